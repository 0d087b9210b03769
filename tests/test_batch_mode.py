"""Batch judge mode against the local server's Batch API, driven by the real openai client."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
import sqlalchemy as sa

from ctxprec_ops.batch import BatchOptions, score_partition_batch
from ctxprec_ops.judge.pricing import cost_of
from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import count, create_logs, log_row

DAY = "2026-11-28"
FAST = BatchOptions(poll_seconds=0.01, first_poll=0.0)


def rows(n: int = 12) -> list[dict]:
    out = []
    for i in range(1, n + 1):
        nodes = [
            f"note {i} IRRELEVANT",
            f"fact {i} RELEVANT",
            f"filler {i} IRRELEVANT",
            f"more {i} RELEVANT",
            f"tail {i} RELEVANT",
        ][: 2 + i % 4]
        out.append(log_row(i, datetime(2026, 11, 28, i % 24), context=nodes))
    out.append(log_row(999, datetime(2026, 11, 28, 5), context=[]))  # bad input: no judge call
    return out


def config(url: str, server, **kw) -> PipelineConfig:
    return PipelineConfig(
        warehouse=url,
        judge="gpt-4o-mini",
        judge_base_url=server.base_url,
        judge_api_key="test-key",
        chunk_size=5,
        concurrency=4,
        max_nodes_per_call=3,
        **kw,
    )


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
    assert summary.status == "succeeded" and summary.rows_scored == 3  # the bad-input row is a recorded failure
    assert len(judge_server.batch_created) == 1 and count(get_engine(url), "ctxprec_batches") == 1


def test_sigkill_after_submit_then_rerun_resumes_the_recorded_batch(judge_server, tmp_path):
    """The CLI is SIGKILLed while its batch runs; the re-run submits nothing and finishes from it."""
    from tests.test_reliability_crash import CTXPREC, run_until_killed, scorer_env

    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    create_logs(engine, rows(8))
    env = dict(scorer_env(judge_server), CTXPREC_BATCH_POLL_SECONDS="0.05")
    cmd = [
        CTXPREC,
        "score",
        "--warehouse",
        url,
        "--partition",
        DAY,
        "--judge",
        "gpt-4o-mini",
        "--batch",
        "--chunk-size",
        "3",
        "--quiet",
    ]
    judge_server.batch_hold = True  # the provider keeps working on it

    def submitted() -> bool:
        try:
            return count(engine, "ctxprec_batches") == 1 and judge_server.batch_retrieves >= 2
        except sa.exc.SQLAlchemyError:
            return False

    run_until_killed(cmd, env, submitted)
    assert len(judge_server.batch_created) == 1 and count(engine, "ctxprec_scores") == 0
    (rec,) = batches(engine)
    assert rec["status"] == "in_progress" and rec["finished_at"] is None and rec["requests"] > 0
    judge_server.batch_hold = False
    import subprocess

    done = subprocess.run(cmd + ["--json"], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert len(judge_server.batch_created) == 1  # resumed, not submitted again
    assert judge_server.file_uploads == 1
    assert count(engine, "ctxprec_scores") == 8 and count(engine, "ctxprec_failures") == 1  # the bad-input row
    (rec,) = batches(engine)
    assert rec["status"] == "completed" and rec["finished_at"] is not None


def test_expired_batch_keeps_partial_results_and_requeues_the_rest(judge_server, tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    data = rows(10)
    create_logs(engine, data)
    reference_url = f"sqlite:///{tmp_path / 'ref.db'}"
    create_logs(get_engine(reference_url), data)
    score_partition(config(reference_url, judge_server), DAY)
    judge_server.reset()
    judge_server.batch_final = "expired"
    judge_server.batch_answer_limit = 8  # the first 8 requests were answered before the window closed
    cfg = config(url, judge_server, judge_mode="batch")

    # one round only: the answered rows are written, the rest recorded as judge_unavailable
    one = score_partition_batch(cfg, DAY, options=BatchOptions(poll_seconds=0.01, first_poll=0.0, max_rounds=1))
    (rec,) = batches(engine)
    assert rec["status"] == "expired" and rec["answered"] == 8 and rec["failed"] == rec["requests"] - 8
    lines = judge_server.files[rec["input_file_id"]]["data"].decode().splitlines()
    row_of = [json.loads(line)["custom_id"].split("|")[1] for line in lines]
    assert row_of[7] == row_of[8]  # a row with two node groups got one answer and lost the other
    assert one.status == "partial" and 0 < one.rows_scored < 10
    assert one.failures_by_type.get("judge_unavailable", 0) > 0
    assert "expired" in (one.error_message or "")
    kept = scores(engine)
    assert kept and all(scores(get_engine(reference_url))[k] == v for k, v in kept.items())

    # the next run re-queues only what was not answered, and finishes
    judge_server.batch_final = "completed"
    two = score_partition_batch(cfg, DAY, options=FAST)
    assert two.rows_scored == 10 and two.failures_by_type == {"invalid_input": 1}
    recs = batches(engine)
    # only the unanswered requests go out again: an answered node group of a half-answered row
    # is taken from the first batch's output, never paid for twice
    assert len(recs) == 2 and recs[1]["requests"] == rec["requests"] - 8
    assert scores(engine) == scores(get_engine(reference_url))


def test_expired_batch_is_requeued_within_one_run(judge_server, tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(get_engine(url), rows(6))
    judge_server.batch_final = "expired"
    judge_server.batch_answer_limit = 2
    cfg = config(url, judge_server, judge_mode="batch")
    calls = {"n": 0}

    def sleep(_s: float) -> None:  # the next batch completes
        calls["n"] += 1
        judge_server.batch_final = "completed"

    summary = score_partition_batch(cfg, DAY, options=BatchOptions(poll_seconds=0.0, first_poll=0.0, sleep=sleep))
    assert summary.rows_scored == 6 and summary.failures_by_type == {"invalid_input": 1}
    assert len(judge_server.batch_created) == 2
    assert "expired" in (summary.error_message or "")


def test_failed_batch_and_error_lines_are_requeued(judge_server, tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    create_logs(engine, rows(5))
    judge_server.batch_final = "failed"
    cfg = config(url, judge_server, judge_mode="batch")
    one = score_partition_batch(cfg, DAY, options=BatchOptions(poll_seconds=0, first_poll=0, max_rounds=1))
    assert one.rows_scored == 0 and one.failures_by_type.get("judge_unavailable") == 5
    judge_server.batch_final = "completed"
    judge_server.batch_line_error = lambda cid: cid.split("|")[1] == "3"  # every request of row 3 fails
    two = score_partition_batch(cfg, DAY, options=BatchOptions(poll_seconds=0, first_poll=0, max_rounds=1))
    assert two.rows_scored == 4 and two.failures_by_type.get("judge_unavailable") == 1
    judge_server.batch_line_error = None
    three = score_partition_batch(cfg, DAY, options=FAST)
    assert three.rows_scored == 5 and [r["status"] for r in batches(engine)] == ["failed", "completed", "completed"]


def test_batch_mode_on_postgres_equals_sync(judge_server, pg_url):
    """The same on PostgreSQL (non-UTC server time zone): ctxprec_batches, resume, identical scores."""
    data = rows(6)
    engine = get_engine(pg_url)
    create_logs(engine, data)
    sync = score_partition(config(pg_url, judge_server), DAY)
    reference = scores(engine)
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM ctxprec_scores"))
        conn.execute(sa.text("DELETE FROM ctxprec_judgments"))
    batch = score_partition_batch(config(pg_url, judge_server, judge_mode="batch"), DAY, options=FAST)
    assert scores(engine) == reference and batch.rows_scored == sync.rows_scored
    (rec,) = batches(engine)
    assert rec["status"] == "completed" and rec["submitted_at"] <= rec["finished_at"]


def test_rejected_key_fails_at_once_by_the_outcome_policy(judge_server, tmp_path):
    from ctxprec_ops.errors import JudgeConfigurationError
    from ctxprec_ops.pipeline.outcome import Outcome, decide_error

    url = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(get_engine(url), rows(2))
    judge_server.api_key = "the-right-key"
    with pytest.raises(JudgeConfigurationError) as err:
        score_partition_batch(config(url, judge_server, judge_mode="batch"), DAY, options=FAST)
    assert decide_error(err.value).outcome is Outcome.FAIL and "test-key" not in str(err.value)
    with get_engine(url).connect() as conn:
        (status,) = conn.execute(sa.text("SELECT status FROM ctxprec_runs")).one()
    assert status == "failed" and count(get_engine(url), "ctxprec_batches") == 0
