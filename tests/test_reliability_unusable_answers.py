"""A judge whose answers are always unusable — node ids counted from 0, ``"oui"``/``"non"`` for
``relevant``, an empty answer text — through the real openai client and the local judge server.

What must hold: repairing costs at most 4 paid calls per row (one group) whatever the answers
(the recursive re-ask-then-split used to pay 4n - 2: 380 calls for 10 rows of 10 nodes); a judge
whose answers keep failing the same way stops the run early, failing the remaining rows at once
with a configuration error naming the pattern, which the outcome policy fails rather than retries
(an orchestrator's retry would pay for the same answers again); a judge that slips now and then is
repaired as before and never stopped."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta

import pytest

from ctxprec_ops.cli import main
from ctxprec_ops.errors import JudgeAnswersUnusableError
from ctxprec_ops.judge.answer_watch import DEFAULT_UNUSABLE_CASES
from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.pipeline.outcome import Outcome, decide
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import create_logs, log_row
from tests.helpers.planted import DAY
from tests.test_reliability_judge_faults import table_state

ROWS, NODES = 10, 10
#: the rows in flight pay their first answer and the re-ask that settles the pattern; the halves of
#: the cases that settled it before it tripped; nothing after (was 380: 4n - 2 per row)
MOST_CALLS = 2 * ROWS + 2 * (DEFAULT_UNUSABLE_CASES - 1)
PATTERNS = {
    "zero_based": "node ids start at 0",
    "oui_non": "relevant is not a boolean: 'oui'",
    "empty_answer": "empty answer",
}


def _rows(n: int = ROWS, nodes: int = NODES, start: int = 1) -> list[dict]:
    t0 = datetime.fromisoformat(DAY)
    return [
        log_row(
            i,
            t0 + timedelta(minutes=i),
            input=f"question {i}?",
            expected=f"answer {i}",
            context=[
                f"row {i} passage {k}: " + ("a RELEVANT fact" if k % 3 == 1 else "IRRELEVANT")
                for k in range(1, nodes + 1)
            ],
        )  # fmt: skip
        for i in range(start, start + n)
    ]


@pytest.fixture
def url(tmp_path) -> str:
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(get_engine(url), _rows())
    return url


def _config(url: str, server, **kw) -> PipelineConfig:
    return PipelineConfig(
        warehouse=url, judge="judge-test-model", judge_base_url=server.base_url, judge_api_key="test-key", **kw
    )


def _calls_per_row(server) -> Counter[str]:
    """Requests per row (its question is in every prompt of its calls)."""
    per_row: Counter[str] = Counter()
    for r in server.requests:
        text = r["json"]["messages"][-1]["content"]
        row = next(f"question {i}?" for i in range(1, 1000) if f"question {i}?" in text)
        per_row[row] += 1
    return per_row


@pytest.mark.parametrize("fault", sorted(PATTERNS))
def test_a_judge_that_never_follows_the_format_is_stopped_naming_the_pattern(judge_server, url, fault):
    setattr(judge_server, f"p_{fault}", 1.0)
    summary = score_partition(_config(url, judge_server, concurrency=4), DAY)
    assert judge_server.calls <= MOST_CALLS, judge_server.calls
    assert max(_calls_per_row(judge_server).values()) <= 4
    assert summary.rows_failed == ROWS and summary.rows_scored == 0
    scores, failures, _ = table_state(get_engine(url))
    assert not scores and len(failures) == ROWS
    assert {f.error_type for f in failures.values()} <= {"judge_configuration", "judge_answer_invalid"}
    stopped = [f for f in failures.values() if f.error_type == "judge_configuration"]
    assert len(stopped) >= ROWS - DEFAULT_UNUSABLE_CASES
    for f in stopped:
        assert f"systematically unusable: {PATTERNS[fault]}" in f.error_message
    decision = decide(summary)
    assert decision.outcome is Outcome.FAIL  # not retried by Airflow / Dagster / a scheduler
    assert PATTERNS[fault] in decision.reason and "misconfigured" in decision.reason


def test_the_cli_exits_with_one_line_naming_the_pattern(judge_server, url, capsys):
    judge_server.p_zero_based = 1.0
    args = ["score", "--warehouse", url, "--partition", DAY, "--judge", "judge-test-model", "--quiet"]
    import os

    os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"] = judge_server.base_url, "test-key"
    try:
        assert main(args) == 1
    finally:
        del os.environ["OPENAI_BASE_URL"], os.environ["OPENAI_API_KEY"]
    (line,) = [ln for ln in capsys.readouterr().err.splitlines() if ln.startswith("ctxprec score:")]
    assert "node ids start at 0" in line and "fix it and re-run" in line
    assert judge_server.calls <= MOST_CALLS


def test_repairs_cost_at_most_4_calls_per_row_whatever_the_answers(judge_server, url):
    """Unusable answers the watch does not stop on (a verdict dropped or duplicated, at random:
    no one pattern): every row pays its cascade, bounded at 4 calls (first, re-ask, two halves)."""
    judge_server.p_wrong_count = 1.0
    summary = score_partition(_config(url, judge_server, concurrency=2), DAY)
    per_row = _calls_per_row(judge_server)
    assert len(per_row) == ROWS and max(per_row.values()) == 4, per_row
    assert judge_server.calls == 4 * ROWS  # was 38 per row
    assert summary.rows_failed == ROWS
    assert set(summary.failures_by_type) == {"judge_answer_invalid"}
    assert decide(summary).outcome is Outcome.RETRY  # a slip of the moment: worth another run


def test_a_judge_that_slips_now_and_then_is_repaired_and_never_stopped(judge_server, tmp_path):
    """Every other row's first answer counts from 0, its re-ask does not: the watch never trips
    (a usable answer comes between), every row scores, the slipping rows with 2 calls each."""
    url = f"sqlite:///{tmp_path / 'slips.db'}"
    create_logs(get_engine(url), _rows(30))
    judge_server.script(["zero_based", "ok", "ok"] * 15)  # in arrival order (one call at a time)
    summary = score_partition(_config(url, judge_server, concurrency=1), DAY)
    assert summary.status == "succeeded" and summary.rows_scored == 30
    assert sorted(Counter(_calls_per_row(judge_server).values()).items()) == [(1, 15), (2, 15)]


def test_evaluate_fails_fast_after_three_cases(judge_server):
    from ctxprec_ops import ContextualPrecisionMetric, LLMTestCase, evaluate
    from ctxprec_ops.judge.models.openai_judge import OpenAIJudge

    judge_server.p_oui_non = 1.0
    judge = OpenAIJudge("judge-test-model", base_url=judge_server.base_url, api_key="test-key")
    cases = [
        LLMTestCase(
            input=f"q{i}", expected_output="a", retrieval_context=[f"{i} RELEVANT", f"{i} IRRELEVANT"], id=str(i)
        )
        for i in range(20)
    ]
    results = evaluate(cases, [ContextualPrecisionMetric(model=judge)], concurrency=1).results
    assert judge_server.calls == 2 * DEFAULT_UNUSABLE_CASES  # first answer + re-ask of three cases, then none
    assert all(r.score is None for r in results)
    kinds = Counter(r.error_type for r in results)
    assert set(kinds) <= {"judge_configuration", "judge_answer_invalid"}
    assert kinds["judge_configuration"] >= 20 - DEFAULT_UNUSABLE_CASES
    assert "relevant is not a boolean: 'oui'" in results[-1].error
    assert JudgeAnswersUnusableError.error_type == "judge_configuration"
