"""Self-consistency (``samples=N``): majority verdicts of sampled answers, through the real openai
client against the local judge server returning disagreeing choices."""

import pytest

from ctxprec_ops import (
    ContextualPrecisionMetric,
    ConversationalTestCase,
    LLMTestCase,
    OpenAIJudge,
    Turn,
    TurnContextualPrecisionMetric,
)
from ctxprec_ops.judge.budget import Budget
from ctxprec_ops.judge.calls import JudgeRun
from ctxprec_ops.judge.limiter import AdaptiveLimiter
from ctxprec_ops.judge.nodes import judge_nodes
from ctxprec_ops.scoring.consistency import SampledVerdict, majority
from ctxprec_ops.scoring.samples import check_samples, sampled_version, samples_of
from ctxprec_ops.scoring.template import ContextualPrecisionTemplate
from ctxprec_ops.scoring.verdicts import NodeVerdict
from tests.fixtures.judge_server import default_oracle

R = "RELEVANT fact about refunds"
N = "unrelated passage about office hours"


def judge_for(server, **kw):
    kw.setdefault("timeout", 5.0)
    return OpenAIJudge("judge-test-model", base_url=server.base_url, api_key="sk-test", **kw)


def case(nodes):
    return LLMTestCase(
        input="How long do refunds take?", expected_output="Refunds take five business days.", retrieval_context=nodes
    )


def only_node(k, oracle=default_oracle):
    """An oracle that flips the answer for the node whose text ends with ``#k``."""
    return lambda text, prompt: (not oracle(text, prompt)) if text.endswith(f"#{k}") else oracle(text, prompt)


# -- the vote ---------------------------------------------------------------------------------
def test_majority_agreement_and_reason_by_hand():
    a = {1: NodeVerdict(node=1, relevant=True, reason="a1"), 2: NodeVerdict(node=2, relevant=False, reason="a2")}
    b = {1: NodeVerdict(node=1, relevant=False, reason="b1"), 2: NodeVerdict(node=2, relevant=False, reason="b2")}
    c = {1: NodeVerdict(node=1, relevant=True, reason="c1"), 2: NodeVerdict(node=2, relevant=False, reason="c2")}
    out = majority([a, b, c], [1, 2])
    assert out[1] == SampledVerdict(node=1, relevant=True, reason="a1", agreement=2 / 3)
    assert out[2] == SampledVerdict(node=2, relevant=False, reason="a2", agreement=1.0)
    assert out[1].flipped and not out[2].flipped
    with pytest.raises(ValueError, match="odd"):
        majority([a, b], [1, 2])


@pytest.mark.parametrize("bad", [0, 2, 4, -1, 1.0, True, "3", None])
def test_samples_must_be_odd_and_positive(bad):
    with pytest.raises(ValueError, match="samples must be an odd whole number >= 1"):
        check_samples(bad)
    with pytest.raises(ValueError, match="samples must be an odd whole number >= 1"):
        ContextualPrecisionMetric(model="lexical", samples=bad)
    with pytest.raises(ValueError, match="samples must be an odd whole number >= 1"):
        TurnContextualPrecisionMetric(model="lexical", samples=bad)


def test_prompt_version_names_the_samples():
    m1 = ContextualPrecisionMetric(model=OpenAIJudge("m", api_key="k"))
    m5 = ContextualPrecisionMetric(model=OpenAIJudge("m", api_key="k"), samples=5)
    assert m5.prompt_version == m1.prompt_version + "+samples=5"
    assert samples_of(m5.prompt_version) == 5 and samples_of(m1.prompt_version) == 1
    assert sampled_version(m1.prompt_version, 1) == m1.prompt_version
    # a deterministic judge would repeat itself: asked once, recorded as one sample
    lex = ContextualPrecisionMetric(model="lexical", samples=5)
    assert lex.samples == 5 and lex.judge_samples == 1
    assert lex.prompt_version == ContextualPrecisionMetric(model="lexical").prompt_version


# -- through the openai client ---------------------------------------------------------------
def test_majority_of_disagreeing_choices_in_one_request(judge_server):
    # 5 choices: choices 2 and 4 flip node 1; choice 5 flips node 3 -> node 1 3/5, node 3 4/5
    judge_server.choice_oracles = [default_oracle, only_node(1), default_oracle, only_node(1), only_node(3)]
    m = ContextualPrecisionMetric(model=judge_for(judge_server, price_per_million=(1.0, 2.0)), samples=5)
    nodes = [R + " #1", N + " #2", R + " #3", N + " #4"]
    score = m.measure(case(nodes))
    assert [v.relevant for v in m.verdicts] == [True, False, True, False]
    assert score == pytest.approx((1 + 2 / 3) / 2)
    assert [v.agreement for v in m.verdicts] == [pytest.approx(0.6), 1.0, pytest.approx(0.8), 1.0]
    # one request with n=5 at a temperature above 0 (the default 1.0: the judge was given 0)
    assert judge_server.calls == 1 and m.result.judge_calls == 1
    body = judge_server.requests[0]["json"]
    assert body["n"] == 5 and body["temperature"] == 1.0
    # exposed per node and in the verbose logs
    row = m.result.as_row()["verdicts"]
    assert row[0]["agreement"] == pytest.approx(0.6) and row[1]["agreement"] == 1.0
    assert "agreement 60%" in m.verbose_logs
    assert "disagreed on 2 of 4 node(s) (flip rate 50%)" in m.verbose_logs


def test_usage_and_cost_count_every_choice(judge_server):
    nodes = [R, N, R]
    price = (1.0, 2.0)
    five = ContextualPrecisionMetric(model=judge_for(judge_server, price_per_million=price), samples=5)
    single = ContextualPrecisionMetric(model=judge_for(judge_server, price_per_million=price))
    five.measure(case(nodes))
    single.measure(case(nodes))
    assert five.result.judge_calls == single.result.judge_calls == 1
    assert five.result.prompt_tokens == single.result.prompt_tokens  # the prompt is sent once
    assert five.result.completion_tokens == 5 * single.result.completion_tokens  # every choice
    assert five.evaluation_cost == pytest.approx(
        (five.result.prompt_tokens * 1.0 + five.result.completion_tokens * 2.0) / 1e6
    )
    assert five.evaluation_cost > 2 * single.evaluation_cost


def test_majority_can_overturn_the_first_answer(judge_server):
    # the first choice says node 1 is irrelevant, the other two say relevant
    judge_server.choice_oracles = [only_node(1), default_oracle, default_oracle]
    m = ContextualPrecisionMetric(model=judge_for(judge_server), samples=3)
    assert m.measure(case([R + " #1", N + " #2"])) == 1.0
    assert m.verdicts[0].relevant is True and m.verdicts[0].agreement == pytest.approx(2 / 3)


def test_user_temperature_above_zero_is_kept_and_sample_temperature_wins(judge_server):
    ContextualPrecisionMetric(model=judge_for(judge_server, temperature=0.7), samples=3).measure(case([R]))
    ContextualPrecisionMetric(model=judge_for(judge_server, sample_temperature=0.4), samples=3).measure(case([R]))
    assert [r["json"]["temperature"] for r in judge_server.requests] == [0.7, 0.4]


def test_fallback_when_the_endpoint_rejects_n(judge_server):
    judge_server.n_mode = "reject"
    judge_server.choice_oracles = [default_oracle, only_node(1), default_oracle]
    judge = judge_for(judge_server)
    m = ContextualPrecisionMetric(model=judge, samples=3)
    assert m.measure(case([R + " #1", N + " #2"])) == 1.0
    assert m.verdicts[0].agreement == pytest.approx(2 / 3) and m.verdicts[1].agreement == 1.0
    # the refused n=3 request, then 3 one-answer requests (no n) at the sampling temperature
    assert [r["outcome"] for r in judge_server.requests] == ["400_n", "ok", "ok", "ok"]
    assert all("n" not in r["json"] and r["json"]["temperature"] == 1.0 for r in judge_server.requests[1:])
    assert m.result.judge_calls == 3  # the refused request was answered, not charged
    assert judge.choices_per_request == 1  # remembered: the next case asks one by one at once
    m.measure(case([R + " #1"]))
    assert judge_server.calls == 4 + 3


def test_fallback_when_the_endpoint_ignores_n(judge_server):
    judge_server.n_mode = "ignore"  # answers one choice whatever n says
    judge_server.choice_oracles = [only_node(1), default_oracle, only_node(1)]
    judge = judge_for(judge_server)
    m = ContextualPrecisionMetric(model=judge, samples=3)
    assert m.measure(case([R + " #1", N + " #2"])) == 0.0  # node 1: irrelevant by 2 of 3
    assert m.verdicts[0].relevant is False and m.verdicts[0].agreement == pytest.approx(2 / 3)
    assert judge_server.calls == 3 and m.result.judge_calls == 3
    assert judge_server.requests[0]["json"]["n"] == 3
    assert judge.choices_per_request == 1


def test_an_unusable_choice_is_repaired_and_still_votes(judge_server):
    judge_server.choice_oracles = [default_oracle, "malformed", only_node(1)]
    m = ContextualPrecisionMetric(model=judge_for(judge_server), samples=3)
    m.measure(case([R + " #1", N + " #2"]))
    # choice 2 was unparsable: re-asked alone (one answer to the repair prompt, its first choice)
    assert judge_server.calls == 2
    assert "n" not in judge_server.requests[1]["json"]
    assert m.verdicts[0].relevant is True and m.verdicts[0].agreement == pytest.approx(2 / 3)


def test_samples_one_is_unchanged(judge_server):
    m = ContextualPrecisionMetric(model=judge_for(judge_server), samples=1)
    base = ContextualPrecisionMetric(model=judge_for(judge_server))
    m.measure(case([R, N]))
    base.measure(case([R, N]))
    one, default = (r["json"] for r in judge_server.requests)
    assert one == default and "n" not in one and one["temperature"] == 0
    assert type(m.verdicts[0]) is NodeVerdict
    assert m.result.as_row()["verdicts"] == base.result.as_row()["verdicts"]
    assert set(m.result.as_row()["verdicts"][0]) == {"node", "relevant", "reason"}
    assert m.prompt_version == base.prompt_version and "agreement" not in m.verbose_logs


def test_turn_metric_samples_each_window(judge_server):
    judge_server.choice_oracles = [default_oracle, only_node(1), default_oracle]
    conv = ConversationalTestCase(
        turns=[
            Turn(role="user", content="How long do refunds take?"),
            Turn(role="assistant", content="Five days.", retrieval_context=[R + " #1", N + " #2"]),
        ],
        expected_outcome="The user learns refunds take five business days.",
    )
    m = TurnContextualPrecisionMetric(model=judge_for(judge_server), samples=3)
    assert m.measure(conv) == 1.0
    assert judge_server.requests[0]["json"]["n"] == 3
    assert [v.agreement for v in m.windows[0].verdicts] == [pytest.approx(2 / 3), 1.0]
    assert "flip rate 50%" in m.verbose_logs


def test_budget_reserves_for_every_sampled_answer(judge_server):
    """The pre-call estimate charges the completion allowance once per answer: a cap that
    affords one answer does not afford five."""
    import asyncio

    from ctxprec_ops.errors import BudgetExhaustedError

    nodes = [R] * 3

    async def spend(samples, cap):
        run = JudgeRun(limiter=AdaptiveLimiter(4), budget=Budget(cap))
        judge = judge_for(judge_server, price_per_million=(1000.0, 1000.0))
        try:
            return await judge_nodes(judge, ContextualPrecisionTemplate, "v", "q?", "a.", nodes, run, samples=samples)
        finally:
            await judge.aclose()

    asyncio.run(spend(1, 0.5))  # one answer: ~0.3 USD at this price
    with pytest.raises(BudgetExhaustedError):
        asyncio.run(spend(5, 0.5))


def test_score_dataframe_samples(judge_server):
    import pandas as pd

    from ctxprec_ops.evaluation.dataframe import score_dataframe

    judge_server.choice_oracles = [default_oracle, only_node(2), default_oracle]
    df = pd.DataFrame({"input": ["q?"], "expected_output": ["a."], "retrieval_context": [[R + " #1", N + " #2"]]})
    out = score_dataframe(df, judge=judge_for(judge_server), samples=3, show_progress=False)
    assert out.loc[0, "score"] == 1.0
    assert [v["agreement"] for v in out.loc[0, "verdicts"]] == [1.0, pytest.approx(2 / 3)]


def test_a_context_length_refusal_with_n_stays_the_rows_invalid_input(judge_server):
    """A 400 that is not about ``n`` is not mistaken for missing n-support."""
    from ctxprec_ops import InvalidTestCaseError

    judge_server.script(["bad_request"])
    judge = judge_for(judge_server)
    m = ContextualPrecisionMetric(model=judge, samples=3)
    with pytest.raises(InvalidTestCaseError, match="longer than its model's context"):
        m.measure(case([R]))
    assert judge_server.calls == 1 and judge.choices_per_request > 1
