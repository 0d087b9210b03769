"""Batch judge mode against the local server's Batch API, driven by the real openai client."""

from __future__ import annotations

from datetime import datetime

import pytest
import sqlalchemy as sa

from ctxprec_ops.batch import BatchOptions, score_partition_batch
from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.pricing import cost_of
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import count, create_logs, log_row

DAY = "2026-11-28"
FAST = BatchOptions(poll_seconds=0.01, first_poll=0.0)


def rows(n: int = 12) -> list[dict]:
    out = []
    for i in range(1, n + 1):
        nodes = [f"note {i} IRRELEVANT", f"fact {i} RELEVANT", f"filler {i} IRRELEVANT",
                 f"more {i} RELEVANT", f"tail {i} RELEVANT"][: 2 + i % 4]
        out.append(log_row(i, datetime(2026, 11, 28, i % 24), context=nodes))
    out.append(log_row(999, datetime(2026, 11, 28, 5), context=[]))  # bad input: no judge call
    return out


def config(url: str, server, **kw) -> PipelineConfig:
    return PipelineConfig(warehouse=url, judge="gpt-4o-mini", judge_base_url=server.base_url,
                          judge_api_key="test-key", chunk_size=5, concurrency=4, max_nodes_per_call=3, **kw)


def scores(engine) -> dict[str, tuple]:
    with engine.connect() as conn:
        q = sa.text("SELECT log_id, score, verdicts, reason FROM ctxprec_scores")
        return {r.log_id: (r.score, str(r.verdicts), r.reason) for r in conn.execute(q)}


def batches(engine) -> list:
    with engine.connect() as conn:
        return list(conn.execute(sa.text("SELECT * FROM ctxprec_batches ORDER BY submitted_at")).mappings())


def test_batch_scores_equal_sync_scores_at_half_price(judge_server, tmp_path):
    data = rows()
    sync_url, batch_url = f"sqlite:///{tmp_path / 'sync.db'}", f"sqlite:///{tmp_path / 'batch.db'}"
    for url in (sync_url, batch_url):
        create_logs(get_engine(url), data)
    sync = score_partition(config(sync_url, judge_server), DAY)
    sync_calls = judge_server.calls
    batch = score_partition_batch(config(batch_url, judge_server, judge_mode="batch"), DAY, options=FAST)
    assert judge_server.calls == sync_calls  # no chat call: every judgment came from the batch
    assert len(judge_server.batch_created) == 1
    assert scores(get_engine(batch_url)) == scores(get_engine(sync_url))
    assert (batch.status, batch.rows_scored, batch.rows_failed) == (sync.status, sync.rows_scored, sync.rows_failed)
    assert (batch.prompt_tokens, batch.completion_tokens) == (sync.prompt_tokens, sync.completion_tokens)
    assert batch.cost == pytest.approx(sync.cost / 2)
    assert sync.cost == pytest.approx(cost_of("gpt-4o-mini", sync.prompt_tokens, sync.completion_tokens))
    (rec,) = batches(get_engine(batch_url))
    assert rec["status"] == "completed" and rec["finished_at"] is not None
    assert rec["requests"] == sync.judge_calls and rec["cost"] == pytest.approx(batch.cost)
    # the judgments went to the cache: a re-run submits nothing
    again = score_partition_batch(config(batch_url, judge_server, judge_mode="batch"), DAY, options=FAST)
    assert len(judge_server.batch_created) == 1 and again.rows_scored == sync.rows_scored


def test_judge_mode_batch_routes_score_partition(judge_server, tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(get_engine(url), rows(3))
    summary = score_partition(config(url, judge_server, judge_mode="batch", batch_poll_seconds=0.01), DAY)
    assert summary.status == "partial" and summary.rows_scored == 3  # the bad-input row is a failure
    assert len(judge_server.batch_created) == 1 and count(get_engine(url), "ctxprec_batches") == 1
