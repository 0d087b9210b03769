"""The pipeline with the OpenAI judge against the local OpenAI-compatible server (real HTTP)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.scoring.formula import contextual_precision
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import count, create_logs, log_row

DAY = "2026-11-28"


def rows():
    from datetime import datetime

    out = []
    for i in range(1, 7):
        nodes = [f"note {i} IRRELEVANT", f"fact {i} RELEVANT", "filler IRRELEVANT", f"more {i} RELEVANT"][: 2 + i % 3]
        out.append(log_row(i, datetime(2026, 11, 28, i), context=nodes))
    return out


def test_openai_judge_end_to_end_with_cache(judge_server, tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    data = rows()
    create_logs(engine, data)
    judge_server.script(["429", "ok", "500"])  # transient faults are retried
    secret = "sk-test-secret-key-123456"
    cfg = PipelineConfig(
        warehouse=url,
        judge="gpt-4o-mini",
        judge_base_url=judge_server.base_url,
        judge_api_key=secret,
        chunk_size=4,
        concurrency=4,
    )
    summary = score_partition(cfg, DAY)
    assert summary.status == "succeeded" and summary.rows_scored == 6
    assert summary.prompt_tokens > 0 and summary.completion_tokens > 0 and summary.cost and summary.cost > 0
    calls = judge_server.calls
    assert calls >= 6
    with engine.connect() as conn:
        got = {r.log_id: r.score for r in conn.execute(sa.text("SELECT log_id, score FROM ctxprec_scores"))}
        everything = " ".join(str(v) for row in conn.exec_driver_sql("SELECT * FROM ctxprec_runs") for v in row)
    for r in data:
        want = contextual_precision(["IRRELEVANT" not in n for n in r["retrieval_context"]])
        assert got[str(r["id"])] == pytest.approx(want, abs=0)
    assert secret not in everything
    assert count(engine, "ctxprec_judgments") == len({n for r in data for n in r["retrieval_context"]})

    # new rows repeating judged nodes, and a re-run: no new request reaches the server
    with engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM ctxprec_scores WHERE log_id IN ('1', '2')")
    again = score_partition(cfg, DAY)
    assert judge_server.calls == calls
    assert again.rows_scored == 6 and again.rows_cached == 6 and again.judge_calls == 0


def test_unreachable_judge_rows_fail_and_run_is_not_completed(judge_server, tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(get_engine(url), rows()[:2])
    judge_server.p_500 = 1.0
    cfg = PipelineConfig(
        warehouse=url,
        judge="gpt-4o-mini",
        judge_base_url=judge_server.base_url,
        judge_api_key="test-key",
        max_retries=1,
    )
    summary = score_partition(cfg, DAY)
    assert summary.status == "failed" and not summary.completed
    assert summary.failures_by_type == {"judge_unavailable": 2}
