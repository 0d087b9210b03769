"""`ctxprec demo` end to end on a small sample (fewer days and rows than the real demo)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from ctxprec_ops.cli import main
from ctxprec_ops.demo.job import run_demo

END = "2026-11-28"


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    for var in ("CTXPREC_JUDGE", "OPENAI_API_KEY", "OPENAI_BASE_URL", "CTXPREC_WAREHOUSE_URL", "CTXPREC_CHUNK_SIZE"):
        monkeypatch.delenv(var, raising=False)


def _count(url: str, sql: str) -> int:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return int(conn.execute(sa.text(sql)).scalar_one())
    finally:
        engine.dispose()


def test_demo_command_end_to_end(tmp_path, capsys):
    db, report = tmp_path / "demo.db", tmp_path / "report.html"
    url = f"sqlite:///{db}"
    args = [
        "demo",
        "--warehouse",
        url,
        "--days",
        "4",
        "--rows-per-day",
        "40-60",
        "--conversations-per-day",
        "6-8",
        "--end-date",
        END,
        "--out",
        str(report),
    ]
    assert main(args) == 0
    captured = capsys.readouterr()
    out = captured.out
    assert "contextual precision per day" in out and "turn contextual precision per day" in out
    assert "trend and alerts" in out and "2026-11-25" in out and END in out
    assert "judge lexical" in out
    assert report.exists() and "<html" in report.read_text().lower()
    assert (tmp_path / "report_conversations.html").exists()  # the turn metric's report
    assert (tmp_path / "report_labels.html").exists()  # the label metric's report
    assert "[12/12]" in captured.err  # non-interactive progress: one line per partition run (3 metrics x 4 days)
    # the sample's malformed rows are recorded input problems, not a failed or "partial" day
    assert "partial" not in out and "partial" not in captured.err
    assert "bad input" in out and "bad input row(s) recorded" in captured.err

    rows = _count(url, "SELECT count(*) FROM retrieval_logs")
    convs = _count(url, "SELECT count(*) FROM conversation_logs")
    # every input row ends in exactly one of scores or failures
    assert (
        _count(url, "SELECT count(*) FROM ctxprec_scores WHERE metric = 'contextual_precision'")
        + _count(url, "SELECT count(*) FROM ctxprec_failures WHERE metric = 'contextual_precision'")
        == rows
    )
    assert (
        _count(url, "SELECT count(*) FROM ctxprec_scores WHERE metric = 'turn_contextual_precision'")
        + _count(url, "SELECT count(*) FROM ctxprec_failures WHERE metric = 'turn_contextual_precision'")
        == convs
    )
    assert _count(url, "SELECT count(*) FROM ctxprec_failures WHERE error_type = 'invalid_input'") >= 5
    # the gold labels of the sample score every retrieval with no judge call
    assert (
        _count(
            url,
            "SELECT count(*) FROM ctxprec_scores WHERE metric = 'label_contextual_precision' "
            "AND judge_model = 'labels'",
        )
        == rows
    )
    assert _count(url, "SELECT count(*) FROM ctxprec_runs") == 12

    # a second run recreates the warehouse instead of piling up rows
    assert main(args + ["--quiet"]) == 0
    capsys.readouterr()
    assert _count(url, "SELECT count(*) FROM retrieval_logs") == rows
    assert _count(url, "SELECT count(*) FROM ctxprec_runs") == 12


def test_demo_shows_the_dip_as_alerts(tmp_path):
    """With a baseline week before the dip, the regression rule fires on the dip days only."""
    result = run_demo(
        f"sqlite:///{tmp_path / 'd.db'}",
        days=10,
        rows_per_day=(30, 40),
        conversations_per_day=(2, 3),
        end_date=END,
        out=str(tmp_path / "r.html"),
    )
    dips = set(result.info.dip_days)
    assert len(dips) == 3
    flagged = {key for metric, key, _msg in result.alerts if metric == "contextual_precision"}
    assert flagged and flagged <= dips
    by_day = {s.partition_key: s.mean_score for s in result.by_metric("contextual_precision")}
    normal = [m for k, m in by_day.items() if k not in dips]
    assert max(by_day[k] for k in dips) < min(normal)
    assert result.report_path is not None and result.report_path.exists()


def test_demo_refuses_to_wipe_a_non_sqlite_warehouse_without_force(capsys):
    assert main(["demo", "--warehouse", "postgresql://u:pw-secret-1@127.0.0.1:9/prod", "--days", "2"]) == 1
    err = capsys.readouterr().err
    assert "--force" in err and "pw-secret-1" not in err and err.count("\n") == 1


def test_demo_bad_report_path_fails_before_work(tmp_path, capsys):
    db = tmp_path / "x.db"
    assert main(["demo", "--warehouse", f"sqlite:///{db}", "--out", str(tmp_path / "report.pdf")]) == 2  # usage
    assert ".html" in capsys.readouterr().err
    assert not db.exists()


def test_demo_on_postgres_with_force(pg_url, tmp_path, capsys):
    args = [
        "demo",
        "--warehouse",
        pg_url,
        "--force",
        "--days",
        "2",
        "--rows-per-day",
        "20-25",
        "--conversations-per-day",
        "3-4",
        "--end-date",
        END,
        "--out",
        str(tmp_path / "pg.html"),
        "--quiet",
    ]
    assert main(args) == 0
    assert main(args) == 0  # recreated: the output tables were dropped too
    capsys.readouterr()
    rows = _count(pg_url, "SELECT count(*) FROM retrieval_logs")
    assert (
        _count(pg_url, "SELECT count(*) FROM ctxprec_scores WHERE metric = 'contextual_precision'")
        + _count(pg_url, "SELECT count(*) FROM ctxprec_failures WHERE metric = 'contextual_precision'")
        == rows
    )
    assert _count(pg_url, "SELECT count(*) FROM ctxprec_runs") == 6  # 3 metrics x 2 days


def test_demo_with_an_llm_judge_over_http(tmp_path, openai_env, capsys):
    """``--judge gpt-4o-mini`` (and OPENAI_API_KEY): the LLM judge; the demo announces its estimate."""
    server = openai_env
    args = [
        "demo",
        "--judge",
        "gpt-4o-mini",
        "--warehouse",
        f"sqlite:///{tmp_path / 'llm.db'}",
        "--days",
        "2",
        "--rows-per-day",
        "8-10",
        "--conversations-per-day",
        "2-3",
        "--end-date",
        END,
        "--out",
        str(tmp_path / "llm.html"),
        "--concurrency",
        "8",
    ]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert "LLM judge gpt-4o-mini: about" in captured.err and "estimated cost $" in captured.err
    assert "judge gpt-4o-mini" in captured.out
    assert server.calls > 0
    assert "test-key" not in captured.out + captured.err


def _small_demo(tmp_path, name: str, *extra: str) -> list[str]:
    return [
        "demo",
        "--warehouse",
        f"sqlite:///{tmp_path / (name + '.db')}",
        "--days",
        "2",
        "--rows-per-day",
        "8-10",
        "--conversations-per-day",
        "2-3",
        "--end-date",
        END,
        "--out",
        str(tmp_path / (name + ".html")),
        "--quiet",
        *extra,
    ]


def test_demo_is_offline_whatever_the_environment_says(tmp_path, openai_env, monkeypatch, capsys):
    """OPENAI_API_KEY, OPENAI_BASE_URL, CTXPREC_JUDGE and CTXPREC_JUDGE_MODE all set: the demo
    still scores with the lexical judge and sends no request (DESIGN: offline unless --judge)."""
    monkeypatch.setenv("CTXPREC_JUDGE", "gpt-4o-mini")
    monkeypatch.setenv("CTXPREC_JUDGE_MODE", "batch")
    assert main(_small_demo(tmp_path, "offline")) == 0
    captured = capsys.readouterr()
    assert "judge lexical" in captured.out
    assert openai_env.calls == 0 and openai_env.requests == []
    assert "CTXPREC_JUDGE=gpt-4o-mini is not used by the demo" in captured.err
    assert "estimated cost" not in captured.err
    url = f"sqlite:///{tmp_path / 'offline.db'}"
    assert _count(url, "SELECT count(*) FROM ctxprec_scores WHERE judge_model = 'gpt-4o-mini'") == 0
    assert _count(url, "SELECT count(*) FROM ctxprec_scores WHERE judge_model = 'lexical'") > 0


def test_a_demo_whose_partitions_failed_exits_non_zero(tmp_path, openai_env, capsys):
    """An LLM judge endpoint that refuses the API key (HTTP 401): every judged run fails; the
    demo says how many did not complete and why, and exits 1 (not 0)."""
    openai_env.api_key = "another-key"  # the client sends test-key: 401
    assert main(_small_demo(tmp_path, "failing", "--judge", "gpt-4o-mini")) == 1
    err = capsys.readouterr().err
    line = [ln for ln in err.splitlines() if ln.startswith("ctxprec demo:")]
    assert len(line) == 1, err
    assert "4 of 6 partition runs did not complete" in line[0]  # 2 days x 2 judged metrics; labels need no judge
    assert "judge_configuration" in line[0] and "re-run to retry" not in line[0]
    assert "test-key" not in err


def test_a_demo_too_small_to_calibrate_still_completes(tmp_path, capsys):
    args = _small_demo(tmp_path, "tiny")
    args[args.index("--days") + 1] = "1"
    args[args.index("--rows-per-day") + 1] = "3"
    assert main(args) == 0
    assert not (tmp_path / "tiny_node_labels.csv").exists()
