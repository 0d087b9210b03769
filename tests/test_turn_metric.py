"""Turn contextual precision: hand-computed conversations against the local judge server."""

import pytest

from ctxprec_ops import (
    ContextualPrecisionMetric,
    ConversationalTestCase,
    InvalidTestCaseError,
    LLMTestCase,
    NotScorableError,
    OpenAIJudge,
    Turn,
    TurnContextualPrecisionMetric,
    evaluate,
)
from ctxprec_ops.metrics.turn_contextual_precision import interaction_units
from ctxprec_ops.scoring.formula import contextual_precision as cp

R, N = "RELEVANT: refunds take five days", "office hours are 9 to 5"


def judge(server):
    return OpenAIJudge("judge-test-model", base_url=server.base_url, api_key="k", timeout=5)


def U(text="question"):
    return Turn("user", text)


def A(ctx=None):
    return Turn("assistant", "answer", retrieval_context=ctx)


THREE_UNITS = [U("q1"), A([N, R]), U("q2"), A([R]), U("q3"), A([N])]


def conv(turns, outcome="The user learns refunds take five days."):
    return ConversationalTestCase(turns=turns, expected_outcome=outcome, id="c1")


@pytest.mark.parametrize(
    "window_size, window_scores",
    [
        (1, [cp([0, 1]), cp([1]), cp([0])]),
        (2, [cp([0, 1]), cp([0, 1, 1]), cp([1, 0])]),
        (10, [cp([0, 1]), cp([0, 1, 1]), cp([0, 1, 1, 0])]),
    ],
)
def test_window_sizes(judge_server, window_size, window_scores):
    m = TurnContextualPrecisionMetric(model=judge(judge_server), window_size=window_size)
    score = m.measure(conv(THREE_UNITS))
    assert score == pytest.approx(sum(window_scores) / 3)
    assert [w.score for w in m.windows] == pytest.approx(window_scores)
    assert judge_server.calls == 3 and m.result.judge_calls == 3
    # each window's user messages are in its prompt, in order
    prompts = sorted(r["json"]["messages"][-1]["content"] for r in judge_server.requests)
    assert any("q1\nq2\nq3" in p for p in prompts) == (window_size >= 3)


def test_units_leading_assistant_consecutive_roles_and_user_only_tail():
    turns = [A(), U(), U(), A(), A(), U(), A(), U()]
    assert interaction_units(turns) == [[0, 1, 2, 3, 4], [5, 6]]
    assert interaction_units([A(), A()]) == []
    assert interaction_units([U(), A(), U(), U()]) == [[0, 1]]


def test_leading_assistant_turn_joins_first_unit(judge_server):
    m = TurnContextualPrecisionMetric(model=judge(judge_server))
    assert m.measure(conv([A([R]), U(), A([N])])) == 1.0
    assert judge_server.calls == 1 and judge_server.requests[0]["node_ids"] == [1, 2]


def test_assistant_turn_without_retrieval_scores_one_in_its_window(judge_server):
    m = TurnContextualPrecisionMetric(model=judge(judge_server), window_size=1)
    assert m.measure(conv([U(), A(), U(), A([N])])) == pytest.approx(0.5)
    assert judge_server.calls == 1
    assert m.windows[0].score == 1.0 and m.windows[0].judge_calls == 0


def test_user_only_tail_is_ignored(judge_server):
    m = TurnContextualPrecisionMetric(model=judge(judge_server))
    assert m.measure(conv([U(), A([N, R]), U("tail")])) == 0.5
    assert len(m.windows) == 1
    assert "tail" not in judge_server.requests[0]["json"]["messages"][-1]["content"]


def test_strict_mode_clamps_each_window(judge_server):
    m = TurnContextualPrecisionMetric(model=judge(judge_server), window_size=1, strict_mode=True)
    assert m.measure(conv(THREE_UNITS)) == pytest.approx(1 / 3)
    assert m.success is False


@pytest.mark.parametrize(
    "turns, fragment",
    [([U(), A(), U(), A([])], "no assistant turn retrieved"), ([U()], "no complete"), ([A([R])], "no complete")],
)
def test_nothing_to_judge_is_not_scorable_with_zero_calls(judge_server, turns, fragment):
    m = TurnContextualPrecisionMetric(model=judge(judge_server))
    with pytest.raises(NotScorableError, match=fragment):
        m.measure(conv(turns))
    assert judge_server.calls == 0 and m.score is None


def test_missing_expected_outcome(judge_server):
    m = TurnContextualPrecisionMetric(model=judge(judge_server))
    with pytest.raises(InvalidTestCaseError, match="expected_outcome"):
        m.measure(conv(THREE_UNITS, outcome=""))
    assert judge_server.calls == 0


def test_faults_are_survived_and_windows_reported_in_order(judge_server):
    judge_server.script(["500", "malformed", "429"])
    m = TurnContextualPrecisionMetric(model=judge(judge_server), window_size=1)
    m.measure(conv(THREE_UNITS))
    assert [w.index for w in m.windows] == [0, 1, 2]
    assert m.score == pytest.approx((0.5 + 1 + 0) / 3)
    assert "Window 1 (turns 1-2)" in m.verbose_logs and "Window 3 (turns 5-6)" in m.verbose_logs
    assert "turn 6" in m.reason  # the window ending at turn 6 ranked only an irrelevant node


def test_evaluate_mixes_case_kinds(judge_server):
    cases = [LLMTestCase(input="q", expected_output="refunds", retrieval_context=[N, R], id="s"), conv(THREE_UNITS)]
    res = evaluate(
        cases,
        [
            ContextualPrecisionMetric(model=judge(judge_server)),
            TurnContextualPrecisionMetric(model=judge(judge_server), window_size=1),
        ],
    )
    df = res.to_pandas()
    assert list(zip(df["id"], df["metric"])) == [
        ("s", "contextual_precision"),
        ("s", "turn_contextual_precision"),
        ("c1", "contextual_precision"),
        ("c1", "turn_contextual_precision"),
    ]
    assert df["score"].iloc[0] == 0.5 and df["score"].iloc[3] == pytest.approx(0.5)
    assert df["error"].iloc[1] and df["error"].iloc[2]
