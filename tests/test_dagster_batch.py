"""The Dagster scores asset in batch mode: ``materialize()`` submits, polls with logged progress
and writes; a later materialization resumes a recorded batch instead of submitting again."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa
from dagster import DagsterInstance, materialize

from ctxprec_ops.dagster import build_scores_asset
from ctxprec_ops.dagster.resources import AlertThresholdsResource, JudgeResource, WarehouseResource
from ctxprec_ops.scoring.formula import contextual_precision
from tests.fixtures.warehouse_data import create_logs, log_row, query

# built here, not imported from dagster_defs: that module reads CTXPREC_* knobs when first imported
contextual_precision_scores = build_scores_asset("contextual_precision")
R, N = "RELEVANT: the refund window is 30 days.", "unrelated text about the weather"
GOOD = [[R, N, N], [R, R, N], [R, N, R], [N, R, N]]


def expected_score(nodes: list[str]) -> float:
    return contextual_precision([n == R for n in nodes])


def seed(url: str, day: str, contexts: list[list[str]]) -> None:
    t0 = datetime.fromisoformat(day)
    create_logs(
        sa.create_engine(url),
        [log_row(i + 1, t0 + timedelta(minutes=7 * i), context=ctx) for i, ctx in enumerate(contexts)],
    )


DAY = "2026-11-20"


def _resources(url: str, server) -> dict:
    return {
        "warehouse": WarehouseResource(url=url),
        "judge": JudgeResource(
            model="judge-test-model",
            base_url=server.base_url,
            api_key="test-key",
            timeout=5.0,
            max_retries=1,
            concurrency=4,
            judge_mode="batch",
            batch_poll_seconds=0.01,
        ),
        "thresholds": AlertThresholdsResource(),
    }


def test_batch_mode_asset_submits_polls_and_writes(tmp_path, judge_server):
    url = f"sqlite:///{tmp_path / 'warehouse.db'}"
    seed(url, DAY, GOOD * 2)
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [contextual_precision_scores],
            instance=instance,
            partition_key=DAY,
            resources=_resources(url, judge_server),
            raise_on_error=False,
        )
        assert result.success
        logs = [e.message for e in instance.all_logs(result.run_id) if e.message]
    assert len(judge_server.batch_created) == 1 and judge_server.calls == 0
    assert any("batch_waiting" in m for m in logs)  # progress while the provider works
    rows = dict(query(url, "SELECT log_id, score FROM ctxprec_scores"))
    for i, ctx in enumerate(GOOD * 2):
        assert rows[str(i + 1)] == pytest.approx(expected_score(ctx))
    assert query(url, "SELECT status FROM ctxprec_batches") == [("completed",)]
