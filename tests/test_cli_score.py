"""`ctxprec score` in-process (ctxprec_ops.cli.main) and once through the installed console script."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from ctxprec_ops.cli import main
from ctxprec_ops.demo.sample import create_sample_warehouse

DAY = "2026-11-28"
CONSOLE_SCRIPT = Path(sys.executable).with_name("ctxprec")


@pytest.fixture
def warehouse(tmp_path, monkeypatch):
    """A small sample warehouse (2 days; every malformed kind present) and a clean env."""
    for var in (
        "CTXPREC_WAREHOUSE_URL",
        "CTXPREC_JUDGE",
        "CTXPREC_SOURCE_TABLE",
        "CTXPREC_CHUNK_SIZE",
        "CTXPREC_THRESHOLD",
        "OPENAI_API_KEY",
        "OPENAI_BASE_URL",
    ):
        monkeypatch.delenv(var, raising=False)
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    info = create_sample_warehouse(
        url, days=2, rows_per_day=(40, 50), conversations_per_day=(6, 8), end_date=DAY, seed=5
    )
    return url, info


def _query(url: str, sql: str) -> list[tuple]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text(sql))]
    finally:
        engine.dispose()


def _one_error_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


def test_score_partition_then_rerun_is_idempotent(warehouse, capsys):
    url, info = warehouse
    rows = info.retrieval_rows[DAY]
    assert main(["score", "--warehouse", url, "--partition", DAY, "--judge", "lexical"]) == 0
    out = capsys.readouterr().out
    assert DAY in out and "contextual_precision" in out and "invalid_input" in out
    scored = _query(url, f"SELECT count(*) FROM ctxprec_scores WHERE partition_key = '{DAY}'")[0][0]
    failed = _query(url, f"SELECT count(*) FROM ctxprec_failures WHERE partition_key = '{DAY}'")[0][0]
    assert scored + failed == rows and failed >= 1

    assert main(["score", "--warehouse", url, "--partition", DAY, "--judge", "lexical", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rows_total"] == rows and summary["rows_cached"] == scored
    assert summary["rows_failed"] == failed and set(summary["failures_by_type"]) == {"invalid_input"}
    assert _query(url, "SELECT count(*) FROM ctxprec_scores")[0][0] == scored  # no duplicates
    assert _query(url, "SELECT count(*) FROM ctxprec_runs")[0][0] == 2


def test_env_settings_are_defaults_and_flags_override(warehouse, capsys, monkeypatch):
    url, info = warehouse
    monkeypatch.setenv("CTXPREC_WAREHOUSE_URL", url)
    monkeypatch.setenv("CTXPREC_THRESHOLD", "0.9")
    assert main(["score", "--partition", DAY, "--json", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["threshold"] == 0.9
    assert main(["score", "--partition", DAY, "--json", "--threshold", "0.2", "--quiet"]) == 0
    assert json.loads(capsys.readouterr().out)["threshold"] == 0.2
    assert _query(url, "SELECT DISTINCT judge_model FROM ctxprec_scores") == [("lexical",)]


def test_conversations(warehouse, capsys):
    url, info = warehouse
    assert main(["score", "--warehouse", url, "--partition", DAY, "--conversations", "--json", "--quiet"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["metric"] == "turn_contextual_precision"
    assert summary["rows_total"] == info.conversation_rows[DAY]
    assert summary["rows_scored"] >= summary["rows_total"] - 2


def test_single_chunk(warehouse, capsys):
    url, info = warehouse
    args = ["score", "--warehouse", url, "--partition", DAY, "--chunk-size", "10", "--run-id", "r1", "--quiet"]
    assert main(args + ["--chunk", "1", "--json"]) == 0
    res = json.loads(capsys.readouterr().out)
    assert res["index"] == 1 and res["rows_total"] == 10 and res["run_id"] == "r1"
    done = (
        _query(url, "SELECT count(*) FROM ctxprec_scores")[0][0]
        + _query(url, "SELECT count(*) FROM ctxprec_failures")[0][0]
    )
    assert done == 10
    assert main(args + ["--chunk", "99"]) == 2
    assert "out of range" in _one_error_line(capsys.readouterr().err)
    for index in [i for i in range(-(-info.retrieval_rows[DAY] // 10)) if i != 1]:  # the other chunks
        assert main(args + ["--chunk", str(index)]) == 0
    capsys.readouterr()
    assert main(["score", "--warehouse", url, "--partition", DAY, "--run-id", "r1", "--finalize", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["run_id"] == "r1" and summary["rows_total"] == summary["rows_scored"] + summary["rows_failed"]
    assert _query(url, "SELECT count(*) FROM ctxprec_runs WHERE run_id = 'r1'")[0][0] == 1
    assert main(["score", "--warehouse", url, "--partition", DAY, "--finalize"]) == 2
    assert "--run-id" in _one_error_line(capsys.readouterr().err)


def test_progress_lines_when_not_interactive(warehouse, capsys):
    url, _ = warehouse
    assert main(["score", "--warehouse", url, "--partition", DAY, "--chunk-size", "15"]) == 0
    err = capsys.readouterr().err
    assert f"{DAY} contextual_precision:" in err and "rows (chunk 0" in err
    # its failures are bad input rows only: the run is complete, not "partial"
    assert "done, " in err and "bad input row(s) recorded" in err and "partial" not in err


@pytest.mark.parametrize(
    "extra, code, needle",
    [
        (["--partition", "2026-13-01"], 2, "not a real date"),
        (["--partition", "yesterday"], 2, "yesterday"),
        (["--partition", DAY, "--source-table", "nope"], 1, "does not exist"),
        (["--partition", DAY, "--source-table", "logs;drop table x"], 2, "not a valid identifier"),
        (["--partition", DAY, "--threshold", "1.5"], 2, "threshold"),
        (["--partition", DAY, "--chunk-size", "0"], 2, "--chunk-size must be at least 1"),
        (["--partition", DAY, "--judge", "gpt-4o-mini"], 1, "OPENAI_API_KEY"),
    ],
)
def test_errors_are_one_line(warehouse, capsys, extra, code, needle):
    url, _ = warehouse
    assert main(["score", "--warehouse", url, *extra]) == code
    line = _one_error_line(capsys.readouterr().err)
    assert line.startswith("ctxprec score: error:") and needle in line


def test_missing_sqlite_file_is_not_created(tmp_path, capsys):
    path = tmp_path / "nope.db"
    assert main(["score", "--warehouse", f"sqlite:///{path}", "--partition", DAY]) == 1
    assert "does not exist" in _one_error_line(capsys.readouterr().err)
    assert not path.exists()


def test_password_is_never_printed(capsys):
    url = "postgresql://etl:hunter2-secret@127.0.0.1:9/analytics"  # nothing listens on port 9
    assert main(["score", "--warehouse", url, "--partition", DAY]) == 1
    captured = capsys.readouterr()
    line = _one_error_line(captured.err)
    assert "hunter2-secret" not in captured.err + captured.out
    assert "warehouse error" in line


def test_llm_judge_budget_exhaustion_then_resume(warehouse, openai_env, capsys):
    """--max-cost: unaffordable rows become budget_exhausted failures (exit 4); a later run
    without the cap scores them and removes their failure records (exit 0)."""
    url, info = warehouse
    server = openai_env
    base = ["score", "--warehouse", url, "--partition", DAY, "--judge", "gpt-4o-mini", "--quiet"]
    assert main(base + ["--max-cost", "0.0003", "--concurrency", "1"]) == 4
    captured = capsys.readouterr()
    assert "budget exhausted" in captured.err and "budget_exhausted" in captured.out
    exhausted = _query(url, "SELECT count(*) FROM ctxprec_failures WHERE error_type = 'budget_exhausted'")[0][0]
    assert exhausted > 0
    calls_before = server.calls
    assert main(base + ["--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rows_scored"] + summary["rows_failed"] == info.retrieval_rows[DAY]
    assert set(summary["failures_by_type"]) == {"invalid_input"}
    assert server.calls - calls_before >= exhausted  # the exhausted rows were judged now
    assert summary["prompt_tokens"] > 0 and summary["cost"] > 0
    assert "test-key" not in json.dumps(summary)


def test_judge_outage_is_exit_1(warehouse, openai_env, capsys):
    url, _ = warehouse
    openai_env.p_500 = 1.0  # every request fails
    args = ["score", "--warehouse", url, "--partition", DAY, "--judge", "gpt-4o-mini", "--quiet"]
    assert main(args) == 1
    line = _one_error_line(capsys.readouterr().err)
    assert "judge_unavailable" in line and "re-run" in line


def test_postgres_warehouse(pg_url, capsys, monkeypatch):
    monkeypatch.delenv("CTXPREC_JUDGE", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    info = create_sample_warehouse(
        pg_url, days=2, rows_per_day=(30, 30), conversations_per_day=(3, 3), end_date=DAY, seed=9
    )
    assert main(["score", "--warehouse", pg_url, "--partition", DAY, "--judge", "lexical", "--json", "--quiet"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["rows_total"] == info.retrieval_rows[DAY] == 30


def test_console_script_exit_codes(warehouse):
    url, _ = warehouse
    assert CONSOLE_SCRIPT.exists(), CONSOLE_SCRIPT
    ok = subprocess.run(
        [str(CONSOLE_SCRIPT), "score", "--warehouse", url, "--partition", DAY, "--judge", "lexical"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    assert DAY in ok.stdout
    bad = subprocess.run(
        [str(CONSOLE_SCRIPT), "score", "--warehouse", url, "--partition", DAY, "--source-table", "missing_table"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 1
    assert "missing_table" in _one_error_line(bad.stderr)


def test_help_has_examples_and_exit_codes(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["score", "--help"])
    assert exc.value.code == 0
    out = capsys.readouterr().out
    assert "examples:" in out and "exit codes:" in out and "--max-cost" in out
