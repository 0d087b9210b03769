"""The run model's single sources of truth, seen from the entry points: the metric registry,
one Settings for every variable, column mapping without Python, the local Dagster deployment
honouring CTXPREC_JUDGE, and failure counts of the compared population only."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import sqlalchemy as sa

from ctxprec_ops.cli import main as ctxprec
from ctxprec_ops.config import Settings, SettingsError, parse_bool
from ctxprec_ops.pipeline import METRIC_KINDS, PipelineConfig, score_partition
from tests.fixtures.warehouse_data import day_rows, query
from tests.helpers.dagster_cli import materialize

ROOT = Path(__file__).resolve().parent.parent
DAY = "2026-11-28"


def renamed_table(url: str, n: int = 4) -> None:
    """A retrieval-log table whose columns all have other names."""
    engine = sa.create_engine(url)
    md = sa.MetaData()
    t = sa.Table(
        "rag_events",
        md,
        sa.Column("event_id", sa.Integer, primary_key=True),
        sa.Column("ts", sa.DateTime),
        sa.Column("question", sa.Text),
        sa.Column("gold", sa.Text),
        sa.Column("contexts", sa.Text),
    )
    md.create_all(engine)
    with engine.begin() as conn:
        conn.execute(
            sa.insert(t),
            [
                {
                    "event_id": r["id"],
                    "ts": r["event_time"],
                    "question": r["input"],
                    "gold": r["expected_output"],
                    "contexts": json.dumps(r["retrieval_context"]),
                }
                for r in day_rows(n)
            ],
        )
    engine.dispose()


MAPPING = {
    "id": "event_id",
    "event_time": "ts",
    "input": "question",
    "expected_output": "gold",
    "retrieval_context": "contexts",
}


def test_the_registry_is_the_only_list_of_metrics() -> None:
    """``turn_contextual_precision`` is written once in product code: in metrics/names.py."""
    hits = []
    for path in [
        *ROOT.joinpath("ctxprec_ops").rglob("*.py"),
        *ROOT.joinpath("dagster_defs").rglob("*.py"),
        *ROOT.joinpath("dags").rglob("*.py"),
    ]:
        text = path.read_text(encoding="utf-8")
        hits += [path.name] * (text.count('"turn_contextual_precision"') + text.count("'turn_contextual_precision'"))
    assert hits == ["names.py"]  # metrics/names.py: the one place metric names are written
    assert set(METRIC_KINDS) >= {"contextual_precision", "turn_contextual_precision"}


def test_one_boolean_parser_and_clear_errors() -> None:
    assert [parse_bool(v, "X") for v in ("1", "TRUE", "yes", "On", "0", "false", "No", "off")] == [True] * 4 + [
        False
    ] * 4
    with pytest.raises(SettingsError, match="CTXPREC_SMTP_SSL must be true or false"):
        Settings.from_env({"CTXPREC_SMTP_SSL": "maybe"})
    with pytest.raises(SettingsError, match="CTXPREC_CHUNK_SIZE must be at least 1"):
        Settings.from_env({"CTXPREC_CHUNK_SIZE": "0"})
    s = Settings.from_env(
        {
            "CTXPREC_BLOCKING_CHECKS": "off",
            "CTXPREC_SCHEDULE_RUNNING": "yes",
            "CTXPREC_SOURCE_COLUMNS": '{"retrieval_context": "contexts"}',
        }
    )
    assert (s.blocking_checks, s.schedule_running, s.source_columns) == (False, True, {"retrieval_context": "contexts"})


def test_score_and_report_through_the_column_flag(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    renamed_table(url)
    flags = [a for k, v in MAPPING.items() for a in ("--column", f"{k}={v}")]
    assert (
        ctxprec(
            [
                "score",
                "--warehouse",
                url,
                "--partition",
                DAY,
                "--source-table",
                "rag_events",
                "--judge",
                "lexical",
                "--quiet",
                *flags,
            ]
        )
        == 0
    )
    assert query(url, "SELECT COUNT(*) FROM ctxprec_scores")[0][0] == 4
    out = tmp_path / "r.html"
    assert ctxprec(["report", "--warehouse", url, "--out", str(out), "--source-table", "rag_events", *flags]) == 0
    html = out.read_text(encoding="utf-8")
    assert "(doc 1)" in html or "(doc 2)" in html  # a node text, read through the mapping


def test_score_through_the_column_variable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    renamed_table(url, n=3)
    monkeypatch.setenv("CTXPREC_SOURCE_COLUMNS", json.dumps(MAPPING))
    monkeypatch.setenv("CTXPREC_SOURCE_TABLE", "rag_events")
    run = score_partition(Settings.from_env().pipeline_config(warehouse=url, judge="lexical"), DAY)
    assert (run.rows_total, run.rows_scored) == (3, 3)
    # a flag on top of the variable: the flag wins for its column, the rest stays mapped
    config = Settings.from_env().pipeline_config(warehouse=url, columns={"input": "gold"})
    assert config.source_columns.input == "gold" and config.source_columns.retrieval_context == "contexts"


def test_a_missing_column_error_says_how_to_map_it(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    renamed_table(url, n=1)
    code = ctxprec(["score", "--warehouse", url, "--partition", DAY, "--source-table", "rag_events", "--quiet"])
    err = capsys.readouterr().err
    assert code == 1
    assert "has no column 'id'" in err and "--column id=COLUMN" in err and "CTXPREC_SOURCE_COLUMNS" in err
    assert ctxprec(["score", "--warehouse", url, "--partition", DAY, "--column", "nodes=contexts"]) == 2
    assert "unknown column name(s) 'nodes'" in capsys.readouterr().err


def test_a_failed_run_of_another_judge_raises_no_failure_alert(tmp_path: Path, monkeypatch, openai_env) -> None:
    """The day is fully scored by the lexical judge; a run with an LLM judge that cannot be
    reached leaves failures under its own name. check/trend compare the lexical population."""
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    from tests.fixtures.warehouse_data import create_logs

    create_logs(sa.create_engine(url), day_rows(30))
    assert ctxprec(["score", "--warehouse", url, "--partition", DAY, "--judge", "lexical", "--quiet"]) == 0
    openai_env.script(["500"] * 400)
    fast = {"retry_initial_wait": 0.01, "retry_max_wait": 0.02, "outage_tolerance": 5}
    run = score_partition(PipelineConfig(warehouse=url, judge="gpt-4o-mini", max_retries=1, **fast), DAY)
    assert run.status == "failed" and run.rows_failed == 30
    assert query(url, "SELECT COUNT(*) FROM ctxprec_failures WHERE judge_model = 'gpt-4o-mini'")[0][0] == 30
    assert ctxprec(["check", "--warehouse", url, "--partition", DAY]) == 0
    from ctxprec_ops.monitoring import load_trend

    df = load_trend(url, metric="contextual_precision", days=1)
    assert int(df["rows_failed"].iloc[-1]) == 0 and int(df["n"].iloc[-1]) == 30


@pytest.mark.timeout(240)
def test_local_dagster_deployment_scores_with_the_configured_judge(tmp_path: Path, openai_env) -> None:
    """``CTXPREC_JUDGE=gpt-4o-mini`` + ``dagster asset materialize`` in the local deployment
    scores with that judge (the local server), not silently with the lexical one."""
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    from tests.fixtures.warehouse_data import create_logs

    create_logs(sa.create_engine(url), day_rows(5))
    env = {
        "DAGSTER_HOME": str(tmp_path / "dh"),
        "CTXPREC_WAREHOUSE_URL": url,
        "CTXPREC_JUDGE": "gpt-4o-mini",
        "CTXPREC_DEPLOYMENT": "local",
        "OPENAI_BASE_URL": openai_env.base_url,
        "OPENAI_API_KEY": "test-key",
    }
    Path(env["DAGSTER_HOME"]).mkdir()
    proc = materialize(DAY, env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert query(url, "SELECT DISTINCT judge_model FROM ctxprec_scores") == [("gpt-4o-mini",)]
    assert len(openai_env.requests) >= 5
    assert "judge gpt-4o-mini" in proc.stdout + proc.stderr
