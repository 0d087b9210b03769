"""The nightly DAGs under a real Airflow 3 metadata DB (``dag.test()`` in a child process),
against real SQLite / PostgreSQL warehouses and the local OpenAI-compatible judge server."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from ctxprec_ops.scoring.formula import contextual_precision
from tests.fixtures.airflow_env import MARKER_ENV, AirflowEnv, DagRunResult
from tests.fixtures.warehouse_data import query

DAY = "2026-11-28"
EMPTY_DAY = "2026-11-25"  # no logs at all
LOW_DAY = "2026-11-20"  # far from DAY: the neighbour-day logs of each stay apart
DAG_ID = "contextual_precision_nightly"
TURN_DAG_ID = "turn_contextual_precision_nightly"
JUDGE_KEY = "sk-airflowtest-0123456789abcdef"
PG_PASSWORD = "pg-Secr3t-pass-4711"

# relevance patterns (best rank first); GOOD averages well above 0.6, LOW well below
GOOD = [(True, True, False), (True, False, True), (True, False, False), (True, True, True), (False, True, True)]
LOW = [(False, False, True), (False, True, False), (False, False, False), (False, False, True)]


def _node(row: int, k: int, relevant: bool) -> str:
    word = "RELEVANT" if relevant else "unrelated"
    return f"Passage {row}.{k}: {word} notes on shipping policy number {row * 10 + k}."


def retrieval_logs(metadata: sa.MetaData) -> sa.Table:
    """The DESIGN.md input table (retrieval_context as JSON text)."""
    return sa.Table(
        "retrieval_logs",
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("event_time", sa.DateTime(), nullable=False),
        sa.Column("input", sa.Text, nullable=False),
        sa.Column("actual_output", sa.Text),
        sa.Column("expected_output", sa.Text),
        sa.Column("retrieval_context", sa.Text),
    )


def seed_day(url: str, day: str, n: int, patterns: list[tuple[bool, ...]], *, first_id: int = 1) -> list[float]:
    """Insert ``n`` logs on ``day`` (spread over the UTC day, edges included) plus one log on
    each neighbouring day; returns the expected per-row scores of ``day``."""
    engine = sa.create_engine(url)
    table = retrieval_logs(sa.MetaData())
    table.metadata.create_all(engine)
    start = datetime.fromisoformat(day)
    rows, expected = [], []
    for i in range(n):
        rel = patterns[i % len(patterns)]
        rid = first_id + i
        t = start + timedelta(seconds=(86399 * i) // max(n - 1, 1))
        rows.append(
            {
                "id": rid,
                "event_time": t,
                "input": f"What is shipping policy {rid}?",
                "actual_output": "It ships in 3 days.",
                "expected_output": f"Policy {rid} ships in 3 days.",
                "retrieval_context": json.dumps([_node(rid, k, r) for k, r in enumerate(rel)]),
            }
        )
        expected.append(contextual_precision(list(rel)))
    for j, t in enumerate((start - timedelta(seconds=1), start + timedelta(days=1))):
        rid = first_id + n + j
        rows.append(
            {
                "id": rid,
                "event_time": t,
                "input": "neighbour day",
                "actual_output": None,
                "expected_output": "x",
                "retrieval_context": json.dumps([_node(rid, 0, True)]),
            }
        )
    with engine.begin() as conn:
        conn.execute(table.insert(), rows)
    engine.dispose()
    return expected


def judge_conn(server: Any) -> str:
    server.api_key = JUDGE_KEY  # any other key gets HTTP 401
    return json.dumps(
        {"conn_type": "generic", "host": server.base_url, "password": JUDGE_KEY, "extra": {"model": server.model_name}}
    )


def sqlite_env(db: Path, server: Any, **extra: str) -> dict[str, str]:
    return {
        "AIRFLOW_CONN_CTXPREC_WAREHOUSE": json.dumps({"conn_type": "sqlite", "host": str(db)}),
        "AIRFLOW_CONN_CTXPREC_JUDGE": judge_conn(server),
        "CTXPREC_AIRFLOW_RETRY_DELAY": "0",
        "CTXPREC_AIRFLOW_RETRIES": "2",
        **extra,
    }


def assert_no_secrets(result: Any, *secrets: str) -> None:
    blob = result.output + json.dumps(result.xcoms, default=str)
    for secret in secrets:
        assert secret not in blob


@pytest.fixture
def sqlite_db(tmp_path: Path) -> Path:
    return tmp_path / "warehouse.db"


def test_dagbag_imports_both_dags_on_a_data_interval_timetable(airflow_env: AirflowEnv) -> None:
    bag = airflow_env.dagbag()
    assert bag["import_errors"] == {}
    assert set(bag["dags"]) == {DAG_ID, TURN_DAG_ID}
    for dag_id, d in bag["dags"].items():
        assert d["timetable"] == "CronDataIntervalTimetable", dag_id
        assert d["timetable_expr"] == "0 0 * * *"
        assert "UTC" in d["timetable_tz"]
        # the run for 2026-11-28 covers that day and starts at 2026-11-29 00:00 UTC
        assert d["next_after_2026_11_27"] == {
            "run_after": "2026-11-29T00:00:00+00:00",
            "start": "2026-11-28T00:00:00+00:00",
            "end": "2026-11-29T00:00:00+00:00",
        }
        assert d["catchup"] is False
        assert d["start_date"].startswith("2025-01-01")
        assert d["task_ids"] == ["aggregate", "alert", "plan_chunks", "score_chunk"]
        assert d["upstream"] == {
            "plan_chunks": [],
            "score_chunk": ["plan_chunks"],
            "aggregate": ["score_chunk"],
            "alert": ["aggregate"],
        }
        assert d["score_is_mapped"] and d["score_max_active_tis_per_dag"] == 4
        assert d["score_retries"] == 3 and d["score_backoff"] == 2.0
        assert d["alert_retries"] == 0
        assert d["aggregate_trigger_rule"] == "none_failed"
        assert {"threshold", "min_mean", "min_pass_rate", "min_drop", "chunk_size", "partition_key"} <= set(d["params"])
        assert {
            "partition_key",
            "warehouse_conn_id",
            "warehouse_url",
            "judge",
            "judge_base_url",
            "threshold",
            "chunk_size",
            "concurrency",
            "metric",
        } <= set(d["template_fields"])


def seed_conversations(url: str, day: str, n: int) -> None:
    engine = sa.create_engine(url)
    table = sa.Table(
        "conversation_logs",
        sa.MetaData(),
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("event_time", sa.DateTime()),
        sa.Column("turns", sa.Text),
        sa.Column("expected_outcome", sa.Text),
    )
    table.metadata.create_all(engine)
    start = datetime.fromisoformat(day)
    convs = []
    for i in range(n):
        turns = [
            {"role": "user", "content": f"Where is order {i}?", "retrieval_context": None},
            {
                "role": "assistant",
                "content": "It is on its way.",
                "retrieval_context": [_node(i, 0, i % 2 == 0), _node(i, 1, True)],
            },
            {"role": "user", "content": "When will it arrive?", "retrieval_context": None},
            {"role": "assistant", "content": "Tomorrow.", "retrieval_context": [_node(i, 2, True)]},
        ]
        convs.append(
            {
                "id": i + 1,
                "event_time": start + timedelta(hours=3 * i),
                "turns": json.dumps(turns),
                "expected_outcome": f"The user learns when order {i} arrives.",
            }
        )
    with engine.begin() as conn:
        conn.execute(table.insert(), convs)
    engine.dispose()


@dataclass
class SqliteRuns:
    """One child process, four DAG runs on one SQLite warehouse (see ``sqlite_runs``)."""

    url: str
    expected_good: list[float]
    expected_low: list[float]
    nightly: DagRunResult
    rerun: DagRunResult
    turn: DagRunResult
    low: DagRunResult
    empty: DagRunResult
    judge_calls: int
    auth_headers: set[str | None]
    marker: Path


@pytest.fixture(scope="module")
def sqlite_runs(
    airflow_env: AirflowEnv, judge_server_session: Any, tmp_path_factory: pytest.TempPathFactory
) -> SqliteRuns:
    """Seed a SQLite warehouse with a good day (30 logs + 6 conversations) and a low-scoring
    day (24 logs), then run in one child: the nightly DAG for the good day, a manual re-run of
    it (no logical date, the day as a param), the conversation DAG, and the nightly DAG for the
    low day with ``min_mean=0.6``, and the nightly DAG for a day without logs. A marker callback
    records every task failure."""
    server = judge_server_session
    server.reset()
    tmp = tmp_path_factory.mktemp("airflow_sqlite")
    db = tmp / "warehouse.db"
    url = f"sqlite:///{db}"
    expected_good = seed_day(url, DAY, 30, GOOD)
    expected_low = seed_day(url, LOW_DAY, 24, LOW, first_id=1001)
    seed_conversations(url, DAY, 6)
    marker = tmp / "failures.jsonl"
    env = sqlite_env(
        db,
        server,
        **{
            "CTXPREC_AIRFLOW_ON_FAILURE": "tests.fixtures.airflow_env:marker_callback",
            MARKER_ENV: str(marker),
        },
    )
    try:
        nightly, rerun, turn, low, empty = airflow_env.dag_tests(
            [
                (DAG_ID, DAY, {"chunk_size": 8}),
                (DAG_ID, None, {"chunk_size": 8, "partition_key": DAY}),
                (TURN_DAG_ID, DAY, {"chunk_size": 4}),
                (DAG_ID, LOW_DAY, {"min_mean": 0.6}),
                (DAG_ID, EMPTY_DAY, {}),
            ],
            env,
        )
        return SqliteRuns(
            url,
            expected_good,
            expected_low,
            nightly,
            rerun,
            turn,
            low,
            empty,
            server.calls,
            set(server.auth_headers),
            marker,
        )
    finally:
        server.reset()


def test_nightly_scores_sqlite_in_mapped_chunks(sqlite_runs: SqliteRuns) -> None:
    first = sqlite_runs.nightly
    assert first.state == "success", first.output[-4000:]
    chunks = first.tis("score_chunk")
    assert [t["map_index"] for t in chunks] == [0, 1, 2, 3]  # 30 rows / 8 per chunk
    assert all(t["state"] == "success" and t["try_number"] == 1 for t in chunks)
    assert [c["rows"] for c in first.xcom("plan_chunks")] == [8, 8, 8, 6]
    assert sum(first.xcom("score_chunk", i)["rows_scored"] for i in range(4)) == 30
    assert sqlite_runs.auth_headers == {f"Bearer {JUDGE_KEY}"}  # the key of the judge connection

    expected = sqlite_runs.expected_good
    rows = query(
        sqlite_runs.url,
        "SELECT log_id, score FROM ctxprec_scores WHERE partition_key = :p AND metric = 'contextual_precision'",
        p=DAY,
    )
    assert {int(r[0]) for r in rows} == set(range(1, 31))  # the neighbouring days' logs untouched
    assert sum(r[1] for r in rows) / 30 == pytest.approx(sum(expected) / 30)
    summary = first.xcom("aggregate")
    assert summary["status"] == "succeeded" and summary["rows_scored"] == 30
    assert summary["mean_score"] == pytest.approx(sum(expected) / 30, abs=1e-6)
    assert summary["judge_calls"] == 30  # one call per row (3 nodes each)
    assert first.xcom("alert")["fired"] is False
    assert_no_secrets(first, JUDGE_KEY)


def test_manual_rerun_of_a_day_is_idempotent(sqlite_runs: SqliteRuns) -> None:
    second = sqlite_runs.rerun
    assert second.state == "success", second.output[-4000:]
    assert second.logical_date is None and second.xcom("plan_chunks")[0]["partition_key"] == DAY
    assert second.xcom("aggregate")["judge_calls"] == 0  # every row already scored
    assert sqlite_runs.judge_calls == sum(
        r.xcom("aggregate")["judge_calls"] for r in (sqlite_runs.nightly, second, sqlite_runs.turn, sqlite_runs.low)
    )
    assert query(
        sqlite_runs.url,
        "SELECT count(*), count(DISTINCT log_id) FROM ctxprec_scores "
        "WHERE partition_key = :p AND metric = 'contextual_precision'",
        p=DAY,
    )[0] == (30, 30)
    runs = query(
        sqlite_runs.url,
        "SELECT run_id, status, rows_scored FROM ctxprec_runs "
        "WHERE partition_key = :p AND metric = 'contextual_precision'",
        p=DAY,
    )
    assert len({r[0] for r in runs}) == 2 and all(r[1:] == ("succeeded", 30) for r in runs)


def test_turn_dag_scores_conversation_logs(sqlite_runs: SqliteRuns) -> None:
    result = sqlite_runs.turn
    assert result.state == "success", result.output[-4000:]
    assert len(result.tis("score_chunk")) == 2  # 6 conversations / 4 per chunk
    rows = query(
        sqlite_runs.url,
        "SELECT log_id, score FROM ctxprec_scores WHERE partition_key = :p AND metric = 'turn_contextual_precision'",
        p=DAY,
    )
    assert sorted(int(r[0]) for r in rows) == [1, 2, 3, 4, 5, 6]
    assert all(0.0 <= r[1] <= 1.0 for r in rows)
    summary = result.xcom("aggregate")
    assert summary["metric"] == "turn_contextual_precision" and summary["judge_calls"] > 0


def test_low_scores_fail_the_alert_task_once_and_fire_the_failure_callbacks(sqlite_runs: SqliteRuns) -> None:
    assert sum(sqlite_runs.expected_low) / len(sqlite_runs.expected_low) < 0.5
    result = sqlite_runs.low
    assert result.state == "failed"
    assert result.state_of("aggregate") == "success"
    assert result.xcom("aggregate")["mean_score"] == pytest.approx(
        sum(sqlite_runs.expected_low) / len(sqlite_runs.expected_low), abs=1e-6
    )
    (alert,) = result.tis("alert")
    assert alert["state"] == "failed" and alert["try_number"] == 1  # AirflowFailException: no retry
    # the marker callback saw exactly one failure in the other runs: this alert
    calls = [json.loads(line) for line in sqlite_runs.marker.read_text().splitlines()]
    calls = [c for c in calls if c["run_id"] != sqlite_runs.empty.run_id]
    assert [(c["dag_id"], c["run_id"], c["task_id"], c["exception"]) for c in calls] == [
        (DAG_ID, result.run_id, "alert", "AirflowFailException")
    ]
    assert "min_mean" in calls[0]["message"] and LOW_DAY in calls[0]["message"]
    # and the default callback logged its one redacted line
    assert f"ctxprec task failed: dag={DAG_ID} task=alert partition={LOW_DAY}" in result.output
    assert_no_secrets(result, JUDGE_KEY)


def test_a_day_without_logs_maps_no_chunk_and_fails_on_volume(sqlite_runs: SqliteRuns) -> None:
    result = sqlite_runs.empty
    assert result.xcom("plan_chunks") == []
    assert [t["state"] for t in result.tis("score_chunk")] == ["skipped"]  # mapped over nothing
    assert result.state_of("aggregate") == "success"  # none_failed: a skipped upstream is fine
    assert result.xcom("aggregate")["rows_total"] == 0
    # a silent pipeline is an incident: zero rows against the scored baseline day fires the
    # volume rule, and the alert fails the run
    assert result.state == "failed" and result.state_of("alert") == "failed"
    calls = [json.loads(line) for line in sqlite_runs.marker.read_text().splitlines()]
    (call,) = [c for c in calls if c["run_id"] == result.run_id]
    assert call["task_id"] == "alert" and "volume" in call["message"] and EMPTY_DAY in call["message"]


def test_transient_judge_outage_is_survived_through_task_retries(
    airflow_env: AirflowEnv, judge_server: Any, sqlite_db: Path
) -> None:
    url = f"sqlite:///{sqlite_db}"
    seed_day(url, DAY, 20, GOOD)
    # every first judge request fails (5xx and rate limits); the library does not retry
    # (judge_max_retries=0), so each chunk task fails once and Airflow retries it
    judge_server.script(["500"] * 14 + ["429"] * 6)
    env = sqlite_env(sqlite_db, judge_server)

    result = airflow_env.dag_test(DAG_ID, DAY, {"chunk_size": 10, "judge_max_retries": 0}, env)

    assert result.state == "success", result.output[-4000:]
    chunks = result.tis("score_chunk")
    assert len(chunks) == 2
    assert [(t["state"], t["try_number"]) for t in chunks] == [("success", 2), ("success", 2)]
    assert judge_server.outcomes["500"] == 14 and judge_server.outcomes["429"] == 6
    assert "JudgeOutageError" in result.output
    assert query(url, "SELECT count(*) FROM ctxprec_scores WHERE partition_key = :p", p=DAY) == [(20,)]
    assert query(url, "SELECT count(*) FROM ctxprec_failures") == [(0,)]  # the retry cleared them
    assert result.xcom("aggregate")["status"] == "succeeded"


def test_nightly_on_postgres_through_a_postgres_connection(
    airflow_env: AirflowEnv, judge_server: Any, pg_server: Any, pg_url: str
) -> None:
    expected = seed_day(pg_url, DAY, 30, GOOD)
    database = sa.engine.make_url(pg_url).database
    conn = {
        "conn_type": "postgres",
        "host": pg_server.socket_dir,
        "login": pg_server.user,
        "password": PG_PASSWORD,
        "schema": database,
        "extra": {"connect_timeout": 10},
    }
    env = {
        "AIRFLOW_CONN_CTXPREC_WAREHOUSE": json.dumps(conn),
        "AIRFLOW_CONN_CTXPREC_JUDGE": judge_conn(judge_server),
        "CTXPREC_AIRFLOW_RETRY_DELAY": "0",
        "CTXPREC_AIRFLOW_RETRIES": "1",
    }

    result = airflow_env.dag_test(DAG_ID, DAY, {"chunk_size": 12}, env)

    assert result.state == "success", result.output[-4000:]
    assert len(result.tis("score_chunk")) == 3
    rows = query(pg_url, "SELECT score FROM ctxprec_scores WHERE partition_key = :p", p=DAY)
    assert len(rows) == 30
    assert sum(r[0] for r in rows) / 30 == pytest.approx(sum(expected) / 30)
    assert "postgresql+psycopg://postgres:***@" in result.output  # the hook's masked URL
    assert_no_secrets(result, JUDGE_KEY, PG_PASSWORD)


def test_score_tasks_run_in_the_judge_pool_named_in_the_dag_params(airflow_env: AirflowEnv) -> None:
    """Issue 15: the chunk tasks share one judge quota through an Airflow pool; its name is in the
    DAG params (fixed at parse time), next to the per-task quota and the outage tolerance."""
    code = (
        "from ctxprec_ops.airflow.nightly import nightly_dag\n"
        "from ctxprec_ops.airflow.operators import ContextualPrecisionOperator\n"
        "dag = nightly_dag('pool_probe', pool='ctxprec_judge')\n"
        "plain = nightly_dag('no_pool_probe')\n"
        "score = dag.get_task('score_chunk')\n"
        "emit({'pool': score.pool, 'plain_pool': plain.get_task('score_chunk').pool,\n"
        "      'params': {k: dag.params[k] for k in ('judge_pool', 'max_rpm', 'max_tpm', 'outage_tolerance')},\n"
        "      'fields': list(ContextualPrecisionOperator.template_fields)})\n"
    )
    out = airflow_env.run_python(code, {"CTXPREC_MAX_RPM": "300", "CTXPREC_OUTAGE_TOLERANCE": "120"})
    assert out["pool"] == "ctxprec_judge"
    assert out["plain_pool"] == "default_pool"
    assert out["params"] == {
        "judge_pool": "ctxprec_judge",
        "max_rpm": 300.0,
        "max_tpm": None,
        "outage_tolerance": 120.0,
    }
    assert {"max_rpm", "max_tpm", "outage_tolerance"} <= set(out["fields"])
