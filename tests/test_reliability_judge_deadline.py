"""A judge that trickles its answer (8 bytes every 0.5 s) never trips a per-read timeout: every
read gets a few bytes in time. ``judge_timeout`` is the whole call's deadline: the call is cut
when it passes, retried as a timeout, and the circuit breaker counts it — a judge that always
trickles ends the run about when the outage tolerance says, naming the cause; a judge that
trickled once scores the row on the retry. The real openai client against the local server."""

from __future__ import annotations

import time

import pytest

from ctxprec_ops.judge.breaker import CircuitBreaker
from ctxprec_ops.judge.calls import JudgeGuards, use_guards
from ctxprec_ops.judge.models.openai_judge import OpenAIJudge
from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import create_logs
from tests.helpers.planted import DAY, expected_score, planted_rows
from tests.test_reliability_judge_faults import table_state

DEADLINE = 2.0


def _config(url: str, server, **kw) -> PipelineConfig:
    return PipelineConfig(
        warehouse=url,
        judge="judge-test-model",
        judge_base_url=server.base_url,
        judge_api_key="test-key",
        judge_timeout=DEADLINE,
        **kw,
    )


@pytest.fixture
def warehouse(tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    rows, truth = planted_rows(6)
    create_logs(get_engine(url), rows)
    return url, truth


def test_one_call_to_a_trickling_judge_ends_at_its_deadline(judge_server):
    """The answer would take ~40 s at 8 bytes per 0.5 s; the call ends at the 3 s deadline."""
    from ctxprec_ops import ContextualPrecisionMetric, LLMTestCase, evaluate

    judge_server.p_trickle = 1.0
    judge = OpenAIJudge("judge-test-model", base_url=judge_server.base_url, api_key="test-key", timeout=3)
    case = LLMTestCase(input="q", expected_output="a", retrieval_context=["a RELEVANT fact", "IRRELEVANT"], id="c")
    breaker = CircuitBreaker(tolerance=60, trip_after=5)
    started = time.monotonic()
    with use_guards(JudgeGuards(breaker=breaker)):
        (r,) = evaluate([case], [ContextualPrecisionMetric(model=judge)], max_retries=0, concurrency=1).results
    took = time.monotonic() - started
    assert 3.0 <= took < 6.0, took
    assert r.score is None and r.error_type == "judge_unavailable"
    assert "deadline of 3 s" in r.error
    # the breaker counted it, as a timeout (one of the 5 in a row that would open it)
    assert breaker.consecutive == 1 and breaker.state == "closed"
    assert breaker.reason().startswith("judge unavailable: no complete answer within the 3 s call deadline (timed out)")
    assert judge_server.calls == 1 and judge_server.requests[0]["json"]["messages"]


def test_a_judge_that_always_trickles_ends_the_run_promptly_naming_the_cause(judge_server, warehouse):
    url, truth = warehouse
    judge_server.p_trickle = 1.0
    started = time.monotonic()
    summary = score_partition(_config(url, judge_server, concurrency=3, outage_tolerance=2), DAY)
    took = time.monotonic() - started
    # waves of 3 calls, each cut at 2 s (a trickled answer takes ~40 s); two waves open the breaker
    # (6 timeouts in a row; a retry or two may already be on its way), the outage began at the
    # first timeout and outlasted the 2 s tolerance: given up after one probe
    assert took < 14, took
    assert summary.status == "failed" and summary.rows_failed == len(truth)
    assert "no complete answer within the 2 s call deadline (timed out)" in (summary.error_message or "")
    scores, failures, _ = table_state(get_engine(url))
    assert not scores and set(failures) == set(truth)
    assert {f.error_type for f in failures.values()} == {"judge_unavailable"}
    assert judge_server.calls <= 4 * 3  # no retry storm


def test_a_judge_that_trickled_once_scores_the_row_on_the_retry(judge_server, warehouse):
    url, truth = warehouse
    judge_server.script(["trickle"])
    started = time.monotonic()
    summary = score_partition(_config(url, judge_server, concurrency=1), DAY)
    took = time.monotonic() - started
    assert summary.status == "succeeded" and summary.rows_scored == len(truth)
    assert DEADLINE <= took < DEADLINE + 8, took
    scores, failures, _ = table_state(get_engine(url))
    assert not failures
    for log_id, row in scores.items():
        assert row.score == pytest.approx(expected_score(truth[log_id]), abs=1e-12)
    assert judge_server.calls == len(truth) + 1  # the trickled call, cut, then its retry
    cut = judge_server.requests[0]["json"]["messages"]
    assert sum(r["json"]["messages"] == cut for r in judge_server.requests) == 2  # asked again
