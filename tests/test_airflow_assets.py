"""Airflow Assets of the ctxprec tables, run for real: the nightly DAG's asset event with its run
Metadata, and the asset-triggered variant started by an upstream DAG's partitioned asset event
(``dag.test()`` of the upstream, the scheduler's own step creating the partitioned DAG run, that
run executed) — real metadata DB, real SQLite warehouse, the local OpenAI-compatible judge."""

from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from tests.fixtures.airflow_env import AirflowEnv
from tests.fixtures.warehouse_data import query
from tests.test_airflow_dags import DAG_ID, DAY, GOOD, JUDGE_KEY, assert_no_secrets, seed_day, sqlite_env

PG_URL = "postgresql://etl:Sup3r-Secr3t@db.internal:5433/analytics"


def test_table_references_name_the_table_never_a_credential(airflow_env: AirflowEnv, tmp_path: Path) -> None:
    db = tmp_path / "wh.db"
    out = airflow_env.run_python(
        "from ctxprec_ops.airflow.assets import table_ref, scores_asset, source_asset\n"
        f"pg = table_ref({PG_URL!r}, 'ctxprec_scores')\n"
        f"lite = table_ref('sqlite:///{db}', 'retrieval_logs')\n"
        "none = table_ref(None, 'ctxprec_scores', conn_id='ctxprec_warehouse')\n"
        "from sqlalchemy.engine import URL\n"
        "from ctxprec_ops.airflow.assets import _asset\n"
        "sock = URL.create('postgresql+psycopg', username='u', password='pw', host='/run/pg', port=5432, database='a')\n"
        "socket_uri = _asset(table_ref(sock, 'ctxprec_scores')).uri\n"
        "emit({'pg': pg.__dict__, 'lite': lite.__dict__, 'none': none.__dict__,\n"
        "      'scores': scores_asset().uri, 'logs': source_asset('turn_contextual_precision').uri,\n"
        "      'socket': socket_uri})",
        env={"AIRFLOW_CONN_CTXPREC_WAREHOUSE": json.dumps({"conn_type": "sqlite", "host": str(db)})},
    )
    # the postgres provider's AIP-60 form, and OpenLineage's postgres naming
    assert out["pg"] == {
        "namespace": "postgres://db.internal:5433",
        "name": "analytics.public.ctxprec_scores",
        "uri": "postgres://db.internal:5433/analytics/public/ctxprec_scores",
        "table": "ctxprec_scores",
    }
    assert "Secr3t" not in json.dumps(out) and "etl" not in json.dumps(out)
    # Airflow's normal form of sqlite:///abs/path (an empty host drops the //)
    assert out["lite"]["uri"] == f"sqlite:{db}/retrieval_logs" and out["lite"]["name"] == "retrieval_logs"
    assert out["lite"]["namespace"] == f"sqlite://{db}"
    assert out["none"]["uri"] == "x-ctxprec://ctxprec_warehouse/ctxprec_scores"
    # a unix-socket host (a path) is this machine: the provider's URI form still holds
    assert out["socket"] == "postgres://localhost:5432/a/public/ctxprec_scores"
    # from the ctxprec_warehouse connection, as the tasks resolve it
    assert out["scores"] == f"sqlite:{db}/ctxprec_scores"
    assert out["logs"] == f"sqlite:{db}/conversation_logs"


def test_the_nightly_run_emits_the_scores_asset_with_the_run_metadata(
    airflow_env: AirflowEnv, tmp_path: Path, judge_server
) -> None:
    db = tmp_path / "warehouse.db"
    expected = seed_day(f"sqlite:///{db}", DAY, 10, GOOD)
    result = airflow_env.dag_test(DAG_ID, f"{DAY}T00:00:00", env=sqlite_env(db, judge_server))
    assert result.state == "success", result.output[-3000:]
    # one event per partition run, from the task that completes it (not one per mapped chunk)
    (event,) = result.asset_events
    assert event["task_id"] == "aggregate" and event["uri"] == f"sqlite:{db}/ctxprec_scores"
    assert event["partition_key"] is None  # a plain event: consumers scheduled on the Asset all run
    extra = event["extra"]
    assert extra["partition_key"] == DAY and extra["metric"] == "contextual_precision"
    assert extra["source_table"] == "retrieval_logs" and extra["status"] == "succeeded"
    assert extra["rows_total"] == 10 and extra["rows_scored"] == 10 and extra["rows_failed"] == 0
    assert extra["mean_score"] == pytest.approx(statistics.fmean(expected), abs=1e-6)
    assert extra["judge_model"] == judge_server.model_name and "cost" in extra  # None: no price known
    assert_no_secrets(result, JUDGE_KEY)
    assert JUDGE_KEY not in json.dumps(result.asset_events)


def test_the_variant_dag_is_scheduled_on_the_source_asset_partitions(airflow_dags_env: AirflowEnv) -> None:
    dags = airflow_dags_env.dagbag()["dags"]
    assert {"contextual_precision_on_new_logs", "turn_contextual_precision_on_new_logs"} <= set(dags)
    variant = dags["contextual_precision_on_new_logs"]
    assert variant["timetable"] == "PartitionedAssetTimetable"
    assert variant["task_ids"] == ["aggregate", "alert", "plan_chunks", "score_chunk"]
    assert variant["score_is_mapped"] and variant["alert_retries"] == 0


def test_an_upstream_asset_event_triggers_the_asset_scheduled_dag(
    airflow_dags_env: AirflowEnv, tmp_path: Path, judge_server
) -> None:
    db = tmp_path / "warehouse.db"
    upstream, runs = airflow_dags_env.asset_chain(
        "upstream_retrieval_logs",
        "contextual_precision_on_new_logs",
        conf={"day": DAY, "rows": 7},
        env=sqlite_env(db, judge_server),
    )
    assert upstream.state == "success", upstream.output[-3000:]
    (logs_event,) = upstream.asset_events
    assert logs_event["uri"] == f"sqlite:{db}/retrieval_logs" and logs_event["partition_key"] == f"{DAY}T00:00:00"

    # the scheduler created exactly one partitioned run, for the day the upstream reported
    (run,) = runs
    assert run.run_type == "asset_triggered" and run.partition_key == DAY and run.logical_date is None
    assert run.state == "success", run.output[-4000:]
    assert run.xcom("aggregate")["rows_scored"] == 7 and run.xcom("aggregate")["status"] == "succeeded"
    scored = query(f"sqlite:///{db}", "SELECT partition_key, COUNT(*) FROM ctxprec_scores GROUP BY partition_key")
    assert scored == [(DAY, 7)]  # the neighbour days' rows were not touched
    # its own scores event carries the run's partition key (partition-aware consumers downstream)
    (scores_event,) = run.asset_events
    assert scores_event["uri"] == f"sqlite:{db}/ctxprec_scores" and scores_event["partition_key"] == DAY
    assert scores_event["extra"]["rows_scored"] == 7
    assert_no_secrets(run, JUDGE_KEY)


def test_a_manual_run_of_the_variant_without_a_partition_fails_with_a_clear_error(
    airflow_dags_env: AirflowEnv, tmp_path: Path, judge_server
) -> None:
    db = tmp_path / "warehouse.db"
    seed_day(f"sqlite:///{db}", DAY, 3, GOOD)
    result = airflow_dags_env.dag_test("contextual_precision_on_new_logs", None, env=sqlite_env(db, judge_server))
    assert result.state == "failed" and result.state_of("plan_chunks") == "failed"
    assert "no partition to score" in result.output
    # with the partition_key param it scores that day
    result = airflow_dags_env.dag_test(
        "contextual_precision_on_new_logs", None, conf={"partition_key": DAY}, env=sqlite_env(db, judge_server)
    )
    assert result.state == "success" and result.xcom("aggregate")["rows_scored"] == 3
