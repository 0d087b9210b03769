"""Provider quotas (requests / tokens per minute) kept before sending, the provider's
``x-ratelimit-*`` headers, and ``Retry-After`` capped by ``CTXPREC_RETRY_MAX_WAIT`` — with the real
openai client against the local judge server, which enforces a requests-per-minute limit itself
(429 above it) and records each request's arrival time."""

from __future__ import annotations

import time

import pytest

from ctxprec_ops import ContextualPrecisionMetric, LLMTestCase, evaluate
from ctxprec_ops.judge.limiter import RequestQuota, parse_reset_seconds
from ctxprec_ops.judge.models import OpenAIJudge
from ctxprec_ops.judge.retry import RetryWaits
from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import create_logs
from tests.helpers.planted import DAY, planted_rows


def _warehouse(tmp_path, n: int) -> tuple[str, dict]:
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    rows, truth = planted_rows(n)
    create_logs(get_engine(url), rows)
    return url, truth


def _max_in_window(times: list[float], window: float) -> int:
    times = sorted(times)
    best, lo = 0, 0
    for hi, t in enumerate(times):
        while t - times[lo] >= window:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


def test_rpm_cap_holds_at_the_server_with_no_429s(judge_server, tmp_path):
    cap = 600.0  # 10 requests a second
    url, truth = _warehouse(tmp_path, 80)
    judge_server.latency = 0.05
    # the server enforces the cap (+2% for arrival jitter) over 6-second windows
    judge_server.rpm_limit, judge_server.rpm_window = cap * 1.02, 6.0
    cfg = PipelineConfig(
        warehouse=url,
        judge="judge-test-model",
        judge_base_url=judge_server.base_url,
        judge_api_key="test-key",
        chunk_size=40,
        concurrency=16,
        max_rpm=cap,
    )
    summary = score_partition(cfg, DAY)
    assert summary.status == "succeeded" and summary.rows_scored == len(truth)
    assert judge_server.outcomes["429_rpm"] == 0 and judge_server.outcomes["ok"] == len(truth), dict(
        judge_server.outcomes
    )
    arrived = sorted(r["arrived"] for r in judge_server.requests)
    # at the server: never more than the cap's share of any window (+1 at a window's edge, +1 for
    # arrival jitter: the first request also opens the client's connection pool)
    for window in (3.0, 6.0):
        assert _max_in_window(arrived, window) <= cap * window / 60 + 2, (window, _max_in_window(arrived, window))
    # and the cap is used, not wasted (the >= 95 % target is bench/bench_quota.py's, measured on a
    # quiet machine; here other test processes share the cores, so only "most of it")
    steady = arrived[1:]  # the first request arrives late (it also opens the connection pool)
    rate = (len(steady) - 1) / (steady[-1] - steady[0]) * 60
    # above the cap only by arrival jitter, the server's own allowance (+2 %): over ~8 s, a first
    # steady request 5 ms late already reads as 0.06 % over (606.4 seen on a busy CI run)
    assert 0.85 * cap <= rate <= cap * 1.02, rate


def test_without_a_cap_the_same_server_answers_429(judge_server, tmp_path):
    """The control: the server's limit is real — unpaced, the same partition collects 429s."""
    url, truth = _warehouse(tmp_path, 80)
    judge_server.latency = 0.05
    judge_server.rpm_limit, judge_server.rpm_window = 612.0, 6.0
    cfg = PipelineConfig(
        warehouse=url,
        judge="judge-test-model",
        judge_base_url=judge_server.base_url,
        judge_api_key="test-key",
        chunk_size=40,
        concurrency=16,
        max_retries=20,
        outage_tolerance=60,
    )
    summary = score_partition(cfg, DAY)
    assert summary.rows_scored == len(truth)
    assert judge_server.outcomes["429_rpm"] > 0


def test_ratelimit_headers_pace_requests_without_a_configured_cap(judge_server, tmp_path):
    url, truth = _warehouse(tmp_path, 40)
    judge_server.latency = 0.02
    judge_server.rpm_limit, judge_server.rpm_window = 900.0, 2.0  # 30 per 2 s
    judge_server.rate_limit_headers = True
    cfg = PipelineConfig(
        warehouse=url,
        judge="judge-test-model",
        judge_base_url=judge_server.base_url,
        judge_api_key="test-key",
        chunk_size=40,
        concurrency=8,
        max_retries=20,
    )
    summary = score_partition(cfg, DAY)
    assert summary.rows_scored == len(truth)
    # only requests already in flight when the headers said "nothing left" can be refused
    assert judge_server.outcomes["429_rpm"] <= 8, dict(judge_server.outcomes)
    assert judge_server.requests[0]["arrived"] + 2.0 < judge_server.requests[-1]["arrived"]


def test_tpm_cap_paces_by_estimated_tokens(judge_server, tmp_path):
    url, truth = _warehouse(tmp_path, 20)
    tpm = 120_000.0  # 2,000 tokens a second; a request here is ~450 estimated tokens
    cfg = PipelineConfig(
        warehouse=url,
        judge="judge-test-model",
        judge_base_url=judge_server.base_url,
        judge_api_key="test-key",
        chunk_size=40,
        concurrency=16,
        max_tpm=tpm,
    )
    started = time.monotonic()
    summary = score_partition(cfg, DAY)
    took = time.monotonic() - started
    assert summary.rows_scored == len(truth)
    spent = summary.prompt_tokens + summary.completion_tokens
    # the schedule books estimates and corrects them with the real usage: the run cannot be faster
    # than the tokens it really used allow (minus the first request, sent at once)
    assert took >= (spent * 0.8 - spent / len(truth)) / (tpm / 60), (took, spent)


def test_retry_after_is_capped_by_retry_max_wait(judge_server, monkeypatch):
    """Issue 19 (5): ``Retry-After: 99999`` waits the longest retry wait (``retry_max_wait``,
    CTXPREC_RETRY_MAX_WAIT through the pipeline), not minutes."""
    judge_server.retry_after = "99999"
    judge_server.script(["429", "429", "429"])
    judge = OpenAIJudge("judge-test-model", base_url=judge_server.base_url, api_key="test-key")
    case = LLMTestCase(input="q?", expected_output="a", retrieval_context=["RELEVANT a", "IRRELEVANT b"])
    started = time.monotonic()
    waits = RetryWaits(initial=0.01, maximum=0.3)
    (r,) = evaluate([case], [ContextualPrecisionMetric(model=judge)], concurrency=1, retry_waits=waits).results
    took = time.monotonic() - started
    assert r.score == 1.0 and r.attempts == 4
    assert 0.6 <= took < 5, took


@pytest.mark.parametrize(
    "raw,seconds",
    [
        ("1s", 1.0),
        ("6m0s", 360.0),
        ("20ms", 0.02),
        ("1h2m3.5s", 3723.5),
        ("0.5", 0.5),
        ("", None),
        (None, None),
        ("soon", None),
        ("5x", None),
    ],
)
def test_parse_reset_seconds(raw, seconds):
    assert parse_reset_seconds(raw) == (pytest.approx(seconds) if seconds is not None else None)


def test_quota_books_even_slots_and_honours_an_exhausted_header():
    q = RequestQuota(max_rpm=120)  # one slot every 0.5 s
    waits = [q.reserve(10) for _ in range(4)]
    assert waits[0] == pytest.approx(0, abs=0.01)
    assert [round(b - a, 2) for a, b in zip(waits, waits[1:])] == [0.5, 0.5, 0.5]
    q2 = RequestQuota()
    q2.observe({"x-ratelimit-remaining-requests": "0", "x-ratelimit-reset-requests": "2s"})
    assert q2.reserve(10) == pytest.approx(2.0, abs=0.05)
    with pytest.raises(ValueError):
        RequestQuota(max_rpm=0)


def test_a_stalled_event_loop_does_not_release_the_booked_requests_in_a_burst():
    """Slots are booked ahead; when the event loop stalls (a long synchronous step, a busy host)
    past several of them, the requests woken together go out one interval apart, and those booked
    after them wait their turn: no window shorter than a minute sees a burst (the run-path test
    above failed once on a CI run: 36 requests in 3 s after a 0.67 s stall, for 30 allowed)."""
    import asyncio

    q = RequestQuota(max_rpm=600)  # a slot every 0.1 s
    sent: list[float] = []

    async def one() -> None:
        await q.acquire(0)
        sent.append(time.monotonic())

    async def main() -> None:
        tasks = [asyncio.create_task(one()) for _ in range(7)]
        await asyncio.sleep(0)  # all seven booked: 0, 0.1, ..., 0.6 s
        time.sleep(0.45)  # the loop blocked past four slots
        await asyncio.gather(*tasks)

    asyncio.run(main())
    gaps = [round(b - a, 3) for a, b in zip(sent, sent[1:])]
    assert len(sent) == 7 and min(gaps) >= 0.08, gaps
    assert sent[-1] - sent[0] <= 0.45 + 6 * 0.1 + 0.15, gaps  # re-spaced, not held back further
