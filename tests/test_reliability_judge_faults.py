"""Reliability: a partition of 520 rows scored through the OpenAI judge over real HTTP while the
judge server injects every fault it knows (429 with and without Retry-After, 500, client
timeouts, connection resets, malformed JSON, too few / duplicated verdicts, verdicts for node ids
that were never shown).

What must hold: every input row ends in exactly one of ``ctxprec_scores`` (with exactly the
score its planted relevance gives) or ``ctxprec_failures`` (once retries are exhausted); nothing
is dropped, nothing is scored from a bad answer, and the run ledger adds up.
"""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.isolation import SUITE_RUN
from tests.fixtures.warehouse_data import create_logs
from tests.helpers.planted import DAY, expected_score, planted_rows, verdict_list

N_ROWS = 520
#: HTTP outcomes that carried a completion (the client got an answer it could parse or repair)
ANSWERED = ("ok", "malformed", "drop", "duplicate", "unknown_id")


def all_faults(server, *, timeouts: bool = True) -> None:
    server.p_429 = 0.05  # with Retry-After (0.05 s)
    server.p_429_no_retry_after = 0.05
    server.p_500 = 0.05
    server.p_malformed = 0.05
    server.p_wrong_count = 0.05  # half "drop" (a verdict missing), half "duplicate"
    server.p_unknown_id = 0.03
    server.p_reset = 0.03
    server.p_timeout = 0.02 if timeouts else 0.0


def table_state(engine) -> tuple[dict[str, sa.Row], dict[str, sa.Row], list[sa.Row]]:
    with engine.connect() as conn:
        scores = {r.log_id: r for r in conn.execute(sa.text("SELECT * FROM ctxprec_scores"))}
        failures = {r.log_id: r for r in conn.execute(sa.text("SELECT * FROM ctxprec_failures"))}
        runs = list(conn.execute(sa.text("SELECT * FROM ctxprec_runs")))
    return scores, failures, runs


def assert_every_row_accounted(
    engine, truth: dict[str, list[bool]], summary, *, budget: bool = False
) -> tuple[dict, dict]:
    """Each row in exactly one table; each score exact; the ledger equals the tables."""
    scores, failures, runs = table_state(engine)
    assert not set(scores) & set(failures), "a row is both scored and failed"
    assert set(scores) | set(failures) == set(truth), "rows were dropped (or invented)"
    for log_id, row in scores.items():
        rel = truth[log_id]
        verdicts = verdict_list(row.verdicts)
        # never scored from a bad answer: one verdict per node, by id, with the planted relevance
        assert [v["node"] for v in verdicts] == list(range(1, len(rel) + 1)), log_id
        assert [v["relevant"] for v in verdicts] == rel, log_id
        assert row.score == pytest.approx(expected_score(rel), abs=1e-12), log_id
        assert row.success == (row.score >= 0.5)
    for f in failures.values():
        allowed = ("judge_unavailable", "judge_answer_invalid") + (("budget_exhausted",) if budget else ())
        assert f.error_type in allowed, f.error_type
        assert f.error_message and f.run_id == summary.run_id
    # the summary and the ctxprec_runs row agree with the tables
    assert summary.rows_total == N_ROWS == summary.rows_scored + summary.rows_failed
    assert (summary.rows_scored, summary.rows_failed) == (len(scores), len(failures))
    by_type: dict[str, int] = {}
    for f in failures.values():
        by_type[f.error_type] = by_type.get(f.error_type, 0) + 1
    assert summary.failures_by_type == by_type
    (ledger,) = [r for r in runs if r.run_id == summary.run_id]
    assert (ledger.rows_total, ledger.rows_scored, ledger.rows_failed) == (
        summary.rows_total,
        summary.rows_scored,
        summary.rows_failed,
    )
    want = "succeeded" if not failures else "budget_exhausted" if budget else "partial"
    assert ledger.status == summary.status == want
    assert ledger.finished_at is not None
    if scores:
        mean = sum(r.score for r in scores.values()) / len(scores)
        assert ledger.mean_score == pytest.approx(mean, abs=1e-12)
    return scores, failures


@pytest.fixture
def warehouse(tmp_path):
    url = f"sqlite:///{tmp_path / 'faults.db'}"
    rows, truth = planted_rows(N_ROWS)
    create_logs(get_engine(url), rows)
    return url, truth


def test_partition_under_every_judge_fault_scores_each_row_exactly(judge_server, warehouse):
    url, truth = warehouse
    all_faults(judge_server)
    cfg = PipelineConfig(
        warehouse=url,
        judge="judge-test-model",
        judge_base_url=judge_server.base_url,
        judge_api_key="test-key",
        judge_timeout=3.0,  # the whole call's deadline: room for a loaded machine (a 2 s stall of the
        # test process must not cut an answered call: the ledger would miss a call the server answered)
        chunk_size=200,
        concurrency=16,
        **SUITE_RUN,  # the suite's fast retries
    )
    summary = score_partition(cfg, DAY)

    # every fault kind really happened, many times
    seen = judge_server.outcomes
    for outcome in (
        "429",
        "429_no_retry_after",
        "500",
        "malformed",
        "drop",
        "duplicate",
        "unknown_id",
        "reset",
        "timeout",
    ):
        assert seen[outcome] >= 3, (outcome, dict(seen))
    scores, failures = assert_every_row_accounted(get_engine(url), truth, summary)
    kinds = [f.error_type for f in failures.values()]
    # a transport fault (429, 500, reset, timeout: 0.20 of requests) is retried 6 times: losing a
    # row to them takes 7 in a row on one call, ~1e-5 a call, ~0.01 expected in a run
    assert kinds.count("judge_unavailable") <= 1, failures
    # an unusable answer (malformed, wrong count, unknown id: p = 0.13) is repaired, not retried: a
    # re-ask, then the group's halves once each (nodes.REPAIR_CALLS). A row fails when the first
    # answer and the re-ask are unusable and so is a half: 0.13² x (1 - 0.87²) ≈ 0.004 a row, ~2.1
    # expected of 520 (6 happened in one run); more than 12 has a chance below 1e-5
    assert kinds.count("judge_answer_invalid") <= 12, failures
    # spend accounting: every answered HTTP request is one judge call in the ledger
    answered = sum(seen[o] for o in ANSWERED)
    assert summary.judge_calls == answered


def test_exhausted_retries_become_failures_and_a_rerun_completes(judge_server, warehouse):
    url, truth = warehouse
    engine = get_engine(url)
    all_faults(judge_server, timeouts=False)
    judge_server.p_500 = 0.15  # with no retry at all, ~1 call in 3 fails for good
    cfg = PipelineConfig(
        warehouse=url,
        judge="judge-test-model",
        judge_base_url=judge_server.base_url,
        judge_api_key="test-key",
        judge_timeout=2.0,
        chunk_size=128,
        concurrency=16,
        max_retries=0,
    )
    first = score_partition(cfg, DAY)
    scores, failures = assert_every_row_accounted(engine, truth, first)
    assert first.status == "partial" and not first.completed
    assert len(failures) > N_ROWS // 10 and len(scores) > N_ROWS // 3
    unavailable = [f for f in failures.values() if f.error_type == "judge_unavailable"]
    assert unavailable
    for f in unavailable:
        assert "after 1 attempts" in f.error_message and f.attempts == 1
    answered = sum(judge_server.outcomes[o] for o in ANSWERED)
    assert first.judge_calls == answered  # calls spent on rows that then failed are counted too

    # the judge recovers: only the failed rows are judged again, and they all score exactly
    judge_server.reset()
    second = score_partition(cfg, DAY)
    assert judge_server.calls == len(failures)  # one call per failed row (3-6 nodes each)
    scores2, failures2 = assert_every_row_accounted(engine, truth, second)
    assert not failures2 and second.status == "succeeded" and second.completed
    assert second.rows_cached >= len(scores)
    for log_id, row in scores.items():  # rows scored by the first run were left alone
        assert scores2[log_id].run_id == first.run_id and scores2[log_id].score == row.score
    assert {scores2[i].run_id for i in failures} == {second.run_id}


def test_a_failed_case_still_reports_the_calls_it_paid_for(judge_server):
    """Spend on a case that then fails is counted (ledger cost/tokens, failure ``attempts``)."""
    from ctxprec_ops import ContextualPrecisionMetric, ConversationalTestCase, LLMTestCase, Turn, evaluate
    from ctxprec_ops.judge.models.openai_judge import OpenAIJudge
    from ctxprec_ops.metrics.turn_contextual_precision import TurnContextualPrecisionMetric

    judge = OpenAIJudge(
        "judge-test-model", base_url=judge_server.base_url, api_key="test-key", price_per_million=(1.0, 1.0)
    )
    case = LLMTestCase(input="q", expected_output="a", retrieval_context=["a RELEVANT fact", "IRRELEVANT"], id="c")
    # an unusable answer (paid for), then the repair call fails for good
    judge_server.script(["malformed", "500", "500", "500"])
    (r,) = evaluate([case], [ContextualPrecisionMetric(model=judge)], max_retries=2, concurrency=1).results
    assert r.error_type == "judge_unavailable" and r.score is None
    assert (r.judge_calls, r.attempts) == (1, 3) and r.prompt_tokens > 0 and r.cost > 0

    judge_server.reset()
    turns = [
        Turn("user", "hi"),
        Turn("assistant", "x", ["one RELEVANT"]),
        Turn("user", "more"),
        Turn("assistant", "y", ["two IRRELEVANT"]),
    ]
    conv = ConversationalTestCase(turns=turns, expected_outcome="done", id="t")
    judge_server.script(["ok", "500"])  # window 1 answered, window 2 fails
    (t,) = evaluate([conv], [TurnContextualPrecisionMetric(model=judge)], max_retries=0, concurrency=1).results
    assert t.error_type == "judge_unavailable"
    assert t.judge_calls == 1 and t.prompt_tokens > 0


def test_budget_holds_under_concurrency_and_faults(judge_server, warehouse, monkeypatch):
    """16 calls in flight, retries and repairs: the run never spends more than ``max_cost``;
    rows it cannot afford are ``budget_exhausted`` failures that the next run picks up."""
    url, truth = warehouse
    all_faults(judge_server, timeouts=False)
    cfg = PipelineConfig(
        warehouse=url,
        judge="judge-test-model",
        judge_base_url=judge_server.base_url,
        judge_api_key="test-key",
        chunk_size=128,
        concurrency=16,
        max_cost=3.0,
        prices={"judge-test-model": (100.0, 400.0)},  # ~$0.06 a call (CTXPREC_PRICES through a face)
    )
    capped = score_partition(cfg, DAY)
    assert capped.status == "budget_exhausted" and not capped.completed
    assert 0 < capped.cost <= 3.0
    scores, failures = assert_every_row_accounted(get_engine(url), truth, capped, budget=True)
    assert capped.failures_by_type.get("budget_exhausted", 0) > N_ROWS // 2 and len(scores) > 10

    judge_server.reset()
    rest = score_partition(
        PipelineConfig(
            warehouse=url,
            judge="judge-test-model",
            judge_base_url=judge_server.base_url,
            judge_api_key="test-key",
            chunk_size=128,
            concurrency=16,
        ),
        DAY,
    )
    assert rest.status == "succeeded" and judge_server.calls == len(failures)
    assert_every_row_accounted(get_engine(url), truth, rest)


def test_a_cap_without_a_known_price_refuses_to_spend(judge_server, warehouse):
    """``max_cost`` with a judge whose price is unknown: no call is made (the cap could not be
    checked), every row says why, and the run is not complete."""
    url, truth = warehouse
    cfg = PipelineConfig(
        warehouse=url,
        judge="judge-test-model",
        judge_base_url=judge_server.base_url,
        judge_api_key="test-key",
        max_cost=0.01,
    )
    summary = score_partition(cfg, DAY)
    assert judge_server.calls == 0
    assert summary.status == "failed" and summary.failures_by_type == {"judge_configuration": N_ROWS}
    with get_engine(url).connect() as conn:
        message = conn.exec_driver_sql("SELECT error_message FROM ctxprec_failures LIMIT 1").scalar_one()
    assert "max_cost" in message and "CTXPREC_PRICES" in message
