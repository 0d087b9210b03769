"""``CtxPrecWarehouseHook`` and the operators' settings resolution, in a real Airflow child process
(connections from ``AIRFLOW_CONN_*`` as Airflow's env secrets backend reads them)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.fixtures.airflow_env import AirflowEnv

PASSWORD = "Hook-pa55/word@x"  # URL-special characters on purpose

HOOK_PROBE = r"""
from ctxprec_ops.airflow.hooks import CtxPrecWarehouseHook
out = {}
hook_out = out
for name, kwargs in [
    ("sqlite_conn", {"warehouse_conn_id": "wh_sqlite"}),
    ("pg_conn", {"warehouse_conn_id": "wh_pg"}),
    ("missing_conn_env", {"warehouse_conn_id": "does_not_exist"}),
    ("explicit_url", {"warehouse_conn_id": "wh_pg", "warehouse_url": "sqlite:////tmp/explicit.db"}),
    ("bad_type", {"warehouse_conn_id": "wh_http"}),
]:
    hook = CtxPrecWarehouseHook(**kwargs)
    try:
        url = hook.get_url()
        out[name] = {"driver": url.drivername, "database": url.database, "host": url.host,
                     "port": url.port, "user": url.username, "query": dict(url.query),
                     "password_ok": url.password == PASSWORD if url.password else None,
                     "describe": hook.describe()}
    except Exception as exc:
        out[name] = {"error": type(exc).__name__, "message": str(exc)}
from ctxprec_ops.secrets import redact
out["redacted"] = redact("connect failed for " + PASSWORD)
"""


JUDGE_KEY = "sk-judgeconn-abcdef0123456789"


@pytest.fixture(scope="module")
def probes(airflow_env: AirflowEnv, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Both probes in one Airflow child process (connections from AIRFLOW_CONN_* variables)."""
    tmp = tmp_path_factory.mktemp("airflow_hook")
    sqlite_file = tmp / "dir with space" / "wh.db"
    url = f"sqlite:///{tmp / 'wh.db'}"
    env = {
        "AIRFLOW_CONN_WH_SQLITE": json.dumps({"conn_type": "sqlite", "host": str(sqlite_file)}),
        "AIRFLOW_CONN_WH_PG": json.dumps(
            {
                "conn_type": "postgres",
                "host": "db.internal",
                "port": 6543,
                "login": "scorer",
                "password": PASSWORD,
                "schema": "warehouse",
                "extra": {"sslmode": "require", "connect_timeout": 5, "cursor": "dictcursor"},
            }
        ),
        "AIRFLOW_CONN_WH_HTTP": json.dumps({"conn_type": "http", "host": "example.com"}),
        "CTXPREC_WAREHOUSE_URL": "sqlite:////tmp/from-env.db",
        "AIRFLOW_CONN_CTXPREC_JUDGE": json.dumps(
            {
                "conn_type": "generic",
                "host": "http://127.0.0.1:9/v1",
                "password": JUDGE_KEY,
                "extra": {"model": "my-judge"},
            }
        ),
        "CTXPREC_CONVERSATION_TABLE": "chats",
        "CTXPREC_JUDGE": "env-judge",
    }
    (tmp / "wh.db").touch()  # the warehouse file exists (an empty SQLite file): a missing one is refused
    head = f"PASSWORD = {PASSWORD!r}\nURL = {url!r}\nKEY = {JUDGE_KEY!r}\n"
    out = airflow_env.run_python(head + HOOK_PROBE + OPERATOR_PROBE, env)
    out["sqlite_file"] = str(sqlite_file)
    return out


def test_hook_builds_sqlalchemy_urls_from_connections_and_falls_back_to_the_env(probes: dict[str, Any]) -> None:
    out = probes["hook"]
    sqlite_file = probes["sqlite_file"]

    assert out["sqlite_conn"]["driver"] == "sqlite"
    assert out["sqlite_conn"]["database"] == sqlite_file

    pg = out["pg_conn"]
    assert pg["driver"] == "postgresql+psycopg"  # psycopg 3
    assert (pg["host"], pg["port"], pg["user"], pg["database"]) == ("db.internal", 6543, "scorer", "warehouse")
    assert pg["password_ok"] is True
    assert pg["query"] == {"sslmode": "require", "connect_timeout": "5"}  # libpq options only
    assert PASSWORD not in pg["describe"] and "***" in pg["describe"]
    assert "connection 'wh_pg'" in pg["describe"]

    assert out["missing_conn_env"]["database"] == "/tmp/from-env.db"
    assert "CTXPREC_WAREHOUSE_URL" in out["missing_conn_env"]["describe"]
    assert out["explicit_url"]["database"] == "/tmp/explicit.db"
    assert out["bad_type"]["error"] == "ValueError" and "'http'" in out["bad_type"]["message"]
    # the connection's password was registered: redact() removes it from any message
    assert PASSWORD not in out["redacted"]


OPERATOR_PROBE = r"""
from airflow.sdk.exceptions import AirflowFailException
from ctxprec_ops.airflow.operators import ContextualPrecisionOperator, ContextualPrecisionPlanOperator
out = {}
op = ContextualPrecisionOperator(task_id="t", threshold="0.7", chunk_size="25", concurrency="3",
                                 judge_max_retries="None", warehouse_url=URL)
cfg = op.pipeline_config()
out["config"] = {"judge": cfg.judge, "base_url": cfg.judge_base_url, "key_ok": cfg.judge_api_key == KEY,
                 "threshold": cfg.threshold, "chunk_size": cfg.chunk_size, "concurrency": cfg.concurrency,
                 "max_retries": cfg.max_retries, "source_table": cfg.source_table, "repr": repr(cfg)}
turn = ContextualPrecisionOperator(task_id="t2", metric="turn_contextual_precision", warehouse_url=URL,
                                   judge_conn_id=None)
tcfg = turn.pipeline_config()
out["turn"] = {"source_table": tcfg.source_table, "judge": tcfg.judge, "key": tcfg.judge_api_key}
errors = {}
for name, kwargs in [("threshold", {"threshold": "1.5"}), ("chunk_size", {"chunk_size": "ten"}),
                     ("metric", {"metric": "precision"}), ("table", {"source_table": "logs; drop table x"})]:
    try:
        ContextualPrecisionOperator(task_id="e_" + name, warehouse_url=URL, **kwargs).pipeline_config()
        errors[name] = None
    except AirflowFailException as exc:
        errors[name] = str(exc)
from ctxprec_ops.airflow.values import partition_value
for bad in ("None", "2026-13-01", "yesterday"):
    try:
        partition_value(bad)
        errors[bad] = None
    except AirflowFailException as exc:
        errors[bad] = str(exc)
out["errors"] = errors
out["templates"] = list(ContextualPrecisionOperator.template_fields)
# a literal warehouse URL's password is handed to Airflow's own masker (logs, rendered fields)
from airflow.sdk.execution_time.secrets_masker import redact as airflow_redact
ContextualPrecisionOperator(task_id="literal", warehouse_url="postgresql://u:Lit3ral-Secret-99@h/db")
out["airflow_masked"] = airflow_redact("rendered: postgresql://u:Lit3ral-Secret-99@h/db")

# unmapped: one task scores the whole partition (offline lexical judge, real SQLite file)
import json, types, datetime as dt
import sqlalchemy as sa
engine = sa.create_engine(URL)
md = sa.MetaData()
logs = sa.Table("retrieval_logs", md, sa.Column("id", sa.Integer, primary_key=True),
                sa.Column("event_time", sa.DateTime), sa.Column("input", sa.Text),
                sa.Column("actual_output", sa.Text), sa.Column("expected_output", sa.Text),
                sa.Column("retrieval_context", sa.Text))
md.create_all(engine)
with engine.begin() as c:
    c.execute(logs.insert(), [
        {"id": i, "event_time": dt.datetime(2026, 11, 28, i), "input": "What is the capital of France?",
         "actual_output": "Paris", "expected_output": "Paris is the capital of France.",
         "retrieval_context": json.dumps(["Paris is the capital of France.", "Berlin is in Germany."])
         if i != 3 else "[]"}
        for i in range(1, 6)])
whole = ContextualPrecisionOperator(task_id="whole", partition_key="2026-11-28", judge="lexical",
                                    warehouse_url=URL, judge_conn_id=None)
ctx = {"ti": types.SimpleNamespace(dag_id="probe", try_number=1), "run_id": "manual__probe"}
out["whole"] = whole.execute(ctx)
emit({"hook": hook_out, "operator": out})
"""


def test_operator_settings_come_from_templates_connections_and_env(probes: dict[str, Any]) -> None:
    out = probes["operator"]
    key = JUDGE_KEY

    cfg = out["config"]
    assert cfg["judge"] == "my-judge" and cfg["base_url"] == "http://127.0.0.1:9/v1" and cfg["key_ok"]
    assert (cfg["threshold"], cfg["chunk_size"], cfg["concurrency"]) == (0.7, 25, 3)
    assert cfg["max_retries"] == 6  # "None" rendered from an empty param = the library default
    assert cfg["source_table"] == "retrieval_logs"
    assert key not in cfg["repr"]
    assert out["turn"] == {"source_table": "chats", "judge": "env-judge", "key": None}
    errors = out["errors"]
    assert "threshold" in errors["threshold"]
    assert "chunk_size" in errors["chunk_size"]
    assert "metric" in errors["metric"]
    assert errors["table"] is not None
    assert "partition_key" in errors["None"] and "no logical date" in errors["None"]
    assert errors["2026-13-01"] is not None and errors["yesterday"] is not None
    assert "api_key" not in " ".join(out["templates"]) and "judge_api_key" not in out["templates"]
    assert "Lit3ral-Secret-99" not in out["airflow_masked"] and "***" in out["airflow_masked"]


def test_unmapped_operator_scores_a_whole_partition(probes: dict[str, Any]) -> None:
    whole = probes["operator"]["whole"]
    assert (whole["rows_total"], whole["rows_scored"], whole["rows_failed"]) == (5, 4, 1)
    assert whole["failures_by_type"] == {"invalid_input": 1}  # the empty context: bad input, no retry
    assert whole["status"] == "succeeded" and whole["run_id"] == "airflow:probe:manual__probe"
    assert 0.0 <= whole["mean_score"] <= 1.0
    assert set(whole) <= {
        "run_id",
        "partition_key",
        "metric",
        "status",
        "rows_total",
        "rows_scored",
        "rows_cached",
        "rows_failed",
        "mean_score",
        "median_score",
        "pass_rate",
        "ci_low",
        "ci_high",
        "prompt_tokens",
        "completion_tokens",
        "cost",
        "judge_model",
        "prompt_version",
        "started_at",
        "finished_at",
        "threshold",
        "judge_calls",
        "failures_by_type",
        "error_message",
        "rows_unpartitioned",
        "rows_without_id",
        "source_table",
        "mapping",
        "sample_rate",
        "rows_sampled",
        "rows_unaccounted",
        # a judge cascade's figures (None without one)
        "nodes_judged",
        "nodes_escalated",
        "escalation_rate",
        "escalate_below",
        "calibration_agreement",
        "cheap_cost",
        "strong_cost",
    }  # counts and figures, never rows


NO_WAREHOUSE_PROBE = r"""
import os, tempfile
from ctxprec_ops.airflow.hooks import CtxPrecWarehouseHook, MissingWarehouseError
from ctxprec_ops.airflow.operators import ContextualPrecisionPlanOperator
out = {}
work = tempfile.mkdtemp()
os.chdir(work)  # a worker's working directory: the old fallback created ctxprec.db here
try:
    CtxPrecWarehouseHook().get_url()
except MissingWarehouseError as exc:
    out["hook"] = str(exc)
op = ContextualPrecisionPlanOperator(task_id="plan_chunks", partition_key="2026-11-28")
try:
    op.execute({})
    out["task"] = "no error"
except Exception as exc:
    out["task"] = f"{type(exc).__name__}: {exc}"
from ctxprec_ops.warehouse.engine import MissingWarehouseFileError
try:
    CtxPrecWarehouseHook(warehouse_url="sqlite:///missing.db").get_engine()
except MissingWarehouseFileError as exc:
    out["missing_file_hook"] = str(exc)
missing = ContextualPrecisionPlanOperator(task_id="plan_missing", partition_key="2026-11-28",
                                          warehouse_url="sqlite:///missing.db")
try:
    missing.execute({})
    out["missing_file_task"] = "no error"
except Exception as exc:
    out["missing_file_task"] = f"{type(exc).__name__}: {exc}"
out["files"] = sorted(os.listdir(work))
emit(out)
"""


def test_missing_warehouse_setting_fails_first_and_clearly(airflow_env: AirflowEnv) -> None:
    """No `ctxprec_warehouse` connection and no CTXPREC_WAREHOUSE_URL: the first task fails at
    once, saying what to configure, and writes nothing (no sqlite file in the worker's cwd)."""
    out = airflow_env.run_python(NO_WAREHOUSE_PROBE)
    assert "no Airflow connection 'ctxprec_warehouse'" in out["hook"] and "CTXPREC_WAREHOUSE_URL" in out["hook"]
    assert out["task"].startswith("AirflowFailException: no warehouse configured")
    # a SQLite warehouse file that does not exist: refused at once (never created, not retried)
    assert "SQLite warehouse file 'missing.db' named by warehouse_url does not exist" in out["missing_file_hook"]
    assert out["missing_file_task"].startswith("AirflowFailException: the SQLite warehouse file 'missing.db'")
    assert out["files"] == []
