"""deepeval compatibility of evaluate(), its result shape, assert_test, and deepeval-style
templates (verdicts in node order), against the real local judge server."""

import re

import pytest

from ctxprec_ops import (
    AsyncConfig,
    ContextualPrecisionMetric,
    ContextualPrecisionTemplate,
    ConversationalTestCase,
    DisplayConfig,
    ErrorConfig,
    LLMTestCase,
    OpenAIJudge,
    Turn,
    TurnContextualPrecisionMetric,
    TurnContextualPrecisionTemplate,
    assert_test,
    evaluate,
)
from ctxprec_ops.scoring.formula import contextual_precision as cp

R, N = "RELEVANT: refunds take five days", "office hours are 9 to 5"


def judge(server):
    return OpenAIJudge("judge-test-model", base_url=server.base_url, api_key="k", timeout=5)


def case(nodes, **kw):
    return LLMTestCase(
        input="How long do refunds take?", expected_output="Refunds take five days.", retrieval_context=nodes, **kw
    )


def test_keyword_form_configs_and_test_results(judge_server, capsys):
    judge_server.latency = 0.02
    cases = [case([N, R], name="second"), case([R, N]), case([], name="empty")]
    metric = ContextualPrecisionMetric(threshold=0.7, model=judge(judge_server), strict_mode=False)
    res = evaluate(
        test_cases=cases,
        metrics=[metric],
        async_config=AsyncConfig(max_concurrent=1),
        display_config=DisplayConfig(show_indicator=False, print_results=True),
        error_config=ErrorConfig(ignore_errors=True),
    )
    assert judge_server.max_in_flight == 1  # max_concurrent -> concurrency
    assert [tr.name for tr in res.test_results] == ["second", "test_case_1", "empty"]
    first = res.test_results[0].metrics_data[0]
    assert (first.name, first.threshold, first.score, first.success, first.strict_mode) == (
        "Contextual Precision",
        0.7,
        0.5,
        False,
        False,
    )
    assert first.evaluation_model == "judge-test-model" and first.error is None and first.reason
    assert first.evaluation_cost is None and first.input_tokens > 0  # no price known for the test model
    assert "node   1" in first.verbose_logs
    assert res.test_results[0].success is False and res.test_results[1].success is True
    empty = res.test_results[2]
    assert empty.success is False and "retrieval_context" in empty.metrics_data[0].error  # reported, not aborted
    assert empty.metrics_data[0].score is None and judge_server.calls == 2
    out = capsys.readouterr().out
    assert "FAIL  second" in out and "PASS  test_case_1" in out
    df = res.to_pandas()  # the frame is still there, one row per (case, metric)
    assert list(df["score"].isna()) == [False, False, True]


def test_skip_on_missing_params_leaves_invalid_cases_out(judge_server):
    res = evaluate(
        test_cases=[case([R]), case([])],
        metrics=[ContextualPrecisionMetric(model=judge(judge_server))],
        error_config=ErrorConfig(skip_on_missing_params=True),
        show_progress=False,
    )
    assert [len(tr.metrics_data) for tr in res.test_results] == [1, 0]
    assert res.results[1].error is not None  # still in the per-row results


def test_positional_form_still_works_and_both_forms_conflict():
    res = evaluate(
        [case(["Refunds take five days."])], [ContextualPrecisionMetric(model="lexical")], show_progress=False
    )
    assert res.test_results[0].metrics_data[0].score == 1.0
    with pytest.raises(TypeError, match="both"):
        evaluate([case([R])], test_cases=[case([R])], metrics=[ContextualPrecisionMetric(model="lexical")])


def test_conversations_in_test_results(judge_server):
    conv = ConversationalTestCase(
        turns=[Turn(role="user", content="q"), Turn(role="assistant", content="a", retrieval_context=[N, R])],
        expected_outcome="refunds",
        name="chat",
    )
    res = evaluate(
        test_cases=[conv], metrics=[TurnContextualPrecisionMetric(model=judge(judge_server))], show_progress=False
    )
    tr = res.test_results[0]
    assert tr.conversational is True and tr.turns[1].retrieval_context == [N, R]
    assert tr.metrics_data[0].name == "Turn Contextual Precision" and tr.metrics_data[0].score == 0.5


def test_assert_test_passes_and_fails_with_the_reason(judge_server):
    metric = ContextualPrecisionMetric(threshold=0.6, model=judge(judge_server))
    assert_test(case([R, N]), [metric])
    with pytest.raises(AssertionError) as e:
        assert_test(case([N, R]), [metric])
    msg = str(e.value)
    assert "Contextual Precision" in msg and "score: 0.5" in msg and "threshold: 0.6" in msg
    assert "irrelevant node(s) 1" in msg  # the metric's reason
    with pytest.raises(AssertionError, match="retrieval_context"):
        assert_test(case([]), [metric])
    with pytest.warns(UserWarning, match="flaky"):
        assert_test(case([N, R], flaky=True), [metric])


# -- deepeval-style templates ---------------------------------------------------------------
DOCUMENT = re.compile(r"^- DOC: (.*)$", re.MULTILINE)


class DeepEvalStyleTemplate(ContextualPrecisionTemplate):
    """As a deepeval user writes one: no node ids; verdicts in document order."""

    @staticmethod
    def generate_verdicts(input, expected_output, retrieval_context):
        docs = "\n".join(f"- DOC: {d}" for d in retrieval_context)
        return (
            f"For each document below, in order, say whether it helps reach the expected output.\n"
            f"Question: {input}\nExpected output: {expected_output}\nDocuments:\n{docs}\n"
            'Answer JSON: {"verdicts": [{"verdict": "yes" or "no", "reason": "..."}]}'
        )


class NewStyleTemplate(ContextualPrecisionTemplate):
    """Newer deepeval templates declare only the variables they use."""

    @staticmethod
    def generate_verdicts(input, expected_output, document_count_str, context_to_display, multimodal_note):
        docs = "\n".join(f"- DOC: {d}" for d in context_to_display)
        return f"Judge{document_count_str}{multimodal_note}:\n{input}\n{expected_output}\n{docs}"


def test_deepeval_style_template_renders_as_written_and_is_answered_in_order(judge_server):
    judge_server.document_pattern = DOCUMENT
    m = ContextualPrecisionMetric(model=judge(judge_server), evaluation_template=DeepEvalStyleTemplate)
    assert m.measure(case([N, R, N, R])) == pytest.approx(cp([0, 1, 0, 1]))
    prompt = judge_server.requests[0]["json"]["messages"][-1]["content"]
    assert prompt.startswith("For each document below, in order") and "<node" not in prompt
    assert f"- DOC: {N}\n- DOC: {R}" in prompt
    assert [v.node for v in m.verdicts] == [1, 2, 3, 4] and [v.relevant for v in m.verdicts] == [0, 1, 0, 1]
    schema = judge_server.requests[0]["json"]["response_format"]["json_schema"]["schema"]
    assert set(schema["properties"]["verdicts"]["items"]["properties"]) == {"verdict", "reason"}
    assert judge_server.calls == 1


@pytest.mark.parametrize("fault", ["drop", "duplicate", "wrong_count"])
def test_in_order_answer_with_wrong_count_is_repaired(judge_server, fault):
    judge_server.document_pattern = DOCUMENT
    judge_server.script([fault])
    m = ContextualPrecisionMetric(model=judge(judge_server), evaluation_template=DeepEvalStyleTemplate)
    assert m.measure(case([N, R, R])) == pytest.approx(cp([0, 1, 1]))
    assert judge_server.calls == 2
    repair = judge_server.requests[1]["json"]["messages"][-1]["content"]
    assert "exactly 3 verdict(s)" in repair


def test_in_order_answer_still_wrong_is_split_and_never_scored_as_is(judge_server):
    judge_server.document_pattern = DOCUMENT
    judge_server.script(["drop", "drop"])  # wrong twice: the group is split in halves
    m = ContextualPrecisionMetric(model=judge(judge_server), evaluation_template=DeepEvalStyleTemplate)
    assert m.measure(case([R, N, N, R])) == pytest.approx(cp([1, 0, 0, 1]))
    assert judge_server.calls == 4


def test_prompt_version_changes_with_the_template():
    base = ContextualPrecisionMetric(model="lexical")
    old = ContextualPrecisionMetric(model="lexical", evaluation_template=DeepEvalStyleTemplate)
    new = ContextualPrecisionMetric(model="lexical", evaluation_template=NewStyleTemplate)
    assert len({base.prompt_version, old.prompt_version, new.prompt_version}) == 3

    class Reworded(DeepEvalStyleTemplate):
        @staticmethod
        def generate_verdicts(input, expected_output, retrieval_context):
            return DeepEvalStyleTemplate.generate_verdicts(input, expected_output, retrieval_context) + "!"

    assert ContextualPrecisionMetric(model="lexical", evaluation_template=Reworded).prompt_version != old.prompt_version


def test_new_style_and_turn_templates_get_their_variables(judge_server):
    judge_server.document_pattern = DOCUMENT
    m = ContextualPrecisionMetric(model=judge(judge_server), evaluation_template=NewStyleTemplate)
    assert m.measure(case([N, R])) == 0.5
    assert judge_server.requests[0]["json"]["messages"][-1]["content"].startswith("Judge (2 documents):")

    class TurnStyle(TurnContextualPrecisionTemplate):
        @staticmethod
        def generate_verdicts(input, expected_outcome, retrieval_context):
            docs = "\n".join(f"- DOC: {d}" for d in retrieval_context)
            return f"Messages:\n{input}\nOutcome: {expected_outcome}\n{docs}"

    conv = ConversationalTestCase(
        turns=[Turn(role="user", content="q1"), Turn(role="assistant", content="a", retrieval_context=[R, N])],
        expected_outcome="refunds in five days",
    )
    t = TurnContextualPrecisionMetric(model=judge(judge_server), evaluation_template=TurnStyle)
    assert t.measure(conv) == 1.0
    assert "Outcome: refunds in five days" in judge_server.requests[-1]["json"]["messages"][-1]["content"]


def test_template_asking_for_unknown_variables_is_refused_at_construction():
    class Odd(ContextualPrecisionTemplate):
        @staticmethod
        def generate_verdicts(input, nodes_as_html):
            return ""

    with pytest.raises(TypeError, match="nodes_as_html"):
        ContextualPrecisionMetric(model="lexical", evaluation_template=Odd)
