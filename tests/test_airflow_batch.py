"""The nightly DAG in batch mode under a real Airflow 3 ``dag.test()`` (which runs deferred tasks'
triggers in-process, as the triggerer would), against the local server's Batch API."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.fixtures.airflow_env import AirflowEnv
from tests.fixtures.warehouse_data import query
from tests.test_airflow_dags import DAG_ID, DAY, GOOD, JUDGE_KEY, assert_no_secrets, seed_day, sqlite_env


def test_nightly_dag_in_batch_mode_defers_and_completes(
    airflow_env: AirflowEnv, judge_server_session: Any, tmp_path: Path
) -> None:
    server = judge_server_session
    server.reset()
    db = tmp_path / "warehouse.db"
    url = f"sqlite:///{db}"
    expected = seed_day(url, DAY, 12, GOOD)
    env = sqlite_env(db, server, CTXPREC_JUDGE_MODE="batch", CTXPREC_BATCH_POLL_SECONDS="0.05")
    try:
        result = airflow_env.dag_test(DAG_ID, DAY, {}, env)
        created, chat_calls = list(server.batch_created), server.calls
    finally:
        server.reset()
    assert result.state == "success", result.output[-4000:]
    assert result.state_of("score_batch") == "success" and result.state_of("alert") == "success"
    assert not result.tis("score_chunk")  # no mapped sync scoring in batch mode
    assert "deferring while 1 batch(es) run" in result.output
    assert "running trigger in line" in result.output  # the trigger polled, then the task resumed
    assert len(created) == 1 and chat_calls == 0  # every judgment came through the batch
    summary = result.xcom("score_batch")
    assert summary["status"] == "succeeded" and summary["rows_scored"] == 12
    assert summary["mean_score"] == pytest.approx(sum(expected) / 12, abs=1e-6)
    assert summary["prompt_tokens"] > 0 and summary["completion_tokens"] > 0
    (batch,) = query(url, "SELECT status, requests, finished_at FROM ctxprec_batches")
    assert batch[0] == "completed" and batch[1] == 12 and batch[2] is not None
    rows = query(url, "SELECT log_id, score FROM ctxprec_scores WHERE partition_key = :p", p=DAY)
    assert sorted(r[1] for r in rows) == pytest.approx(sorted(expected))
    assert_no_secrets(result, JUDGE_KEY)
