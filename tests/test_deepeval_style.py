"""deepeval-style tests: image cases, source-grouped retrieval context and the test-case checks,
written as a deepeval user writes them. The file runs unchanged against deepeval 4.3.1 with only
the import block below replaced by deepeval's (``test_deepeval_reference.py`` does exactly that
where deepeval is installed, and runs it)::

    from deepeval.metrics import ContextualPrecisionMetric
    from deepeval.models import DeepEvalBaseLLM
    from deepeval.test_case import ConversationalTestCase, LLMTestCase, MLLMImage, RetrievedContextData, ToolCall, Turn

The judge is a custom ``DeepEvalBaseLLM`` that answers the verdicts it is scripted with, in node
order, whatever the prompt's wording: both libraries then score the same verdicts.
"""

import uuid

import pytest
from pydantic import ValidationError

# -- imports: the only lines that differ from the deepeval version of this file --------------------
from ctxprec_ops import (
    ContextualPrecisionMetric,
    ConversationalTestCase,
    DeepEvalBaseLLM,
    LLMTestCase,
    MLLMImage,
    RetrievedContextData,
    ToolCall,
    Turn,
)

# -- end of imports -----------------------------------------------------------------------------------

CAT = "https://images.example.com/cat.png"


class ScriptedJudge(DeepEvalBaseLLM):
    """Answers each verdict request with ``verdicts`` ("yes"/"no", in node order)."""

    def __init__(self, verdicts, multimodal=False):
        self.verdicts = verdicts
        self.reads_images = multimodal
        self.prompts = []
        super().__init__("scripted-judge")

    def load_model(self):
        return self

    def get_model_name(self):
        return "scripted-judge"

    def supports_multimodal(self):
        return self.reads_images

    def generate(self, prompt, schema=None):
        self.prompts.append(prompt)
        if "verdicts" in schema.model_fields:
            items = [
                {"node": k, "relevant": v == "yes", "verdict": v, "reason": f"scripted {v}"}
                for k, v in enumerate(self.verdicts, start=1)
            ]
            return schema(verdicts=items)
        return schema(reason="scripted reason")

    async def a_generate(self, prompt, schema=None):
        return self.generate(prompt, schema)


def grouped_case():
    return LLMTestCase(
        input="How fast are refunds paid?",
        actual_output="Within five days.",
        expected_output="Refunds are paid within five days.",
        retrieval_context=[
            RetrievedContextData(context="Shipping takes a week.", source="faq.md"),
            "Our office is in Lyon.",
            RetrievedContextData(context="Refunds are paid within five days.", source="policy.md"),
            RetrievedContextData(context="We ship worldwide.", source="faq.md"),
        ],
    )


# -- source-grouped retrieval context -------------------------------------------------------------


def test_items_of_one_source_are_one_node_at_its_first_rank():
    judge = ScriptedJudge(["no", "no", "yes"])  # faq.md, the plain string, policy.md
    metric = ContextualPrecisionMetric(threshold=0.5, model=judge, include_reason=False)
    score = metric.measure(grouped_case())
    assert score == pytest.approx(1 / 3)
    assert metric.is_successful() is False
    assert [v.verdict for v in metric.verdicts] == ["no", "no", "yes"]


def test_grouped_context_perfect_ranking():
    metric = ContextualPrecisionMetric(model=ScriptedJudge(["yes", "yes", "no"]), include_reason=False)
    assert metric.measure(grouped_case()) == pytest.approx(1.0)
    assert metric.success is True


def test_retrieved_context_data_needs_context_and_source():
    with pytest.raises(ValidationError):
        RetrievedContextData(context="text only")
    item = RetrievedContextData(context="c", source="s.md")
    assert (item.context, item.source) == ("c", "s.md")
    assert LLMTestCase(input="q", retrieval_context=[item, "plain"]).retrieval_context == [item, "plain"]


# -- images ---------------------------------------------------------------------------------------


def test_image_placeholders_make_a_case_multimodal(tmp_path):
    path = tmp_path / "chart.png"
    path.write_bytes(b"\x89PNG\r\n\x1a\n fake png bytes")
    chart = MLLMImage(url=str(path))
    assert chart.local is True and chart.filename == "chart.png" and chart.mimeType == "image/png"
    assert chart.dataBase64 is not None
    cat = MLLMImage(url=CAT)
    assert cat.local is False and cat.filename == "cat.png"
    case = LLMTestCase(
        input=f"What does {chart} show?",
        expected_output="A cat.",
        retrieval_context=[f"{cat}", "A dog photo."],
    )
    assert case.multimodal is True
    assert set(case._get_images_mapping()) == {chart._id, cat._id}
    assert LLMTestCase(input="q", retrieval_context=["text"]).multimodal is False


def test_a_multimodal_judge_scores_an_image_case_and_sees_the_image():
    cat = MLLMImage(url=CAT)
    judge = ScriptedJudge(["yes", "no"], multimodal=True)
    case = LLMTestCase(input="Which animal is this?", expected_output="A cat.", retrieval_context=[f"{cat}", "A dog."])
    metric = ContextualPrecisionMetric(model=judge, include_reason=False)
    assert metric.measure(case) == pytest.approx(1.0)
    images = [p for p in MLLMImage.parse_multimodal_string(judge.prompts[0]) if isinstance(p, MLLMImage)]
    assert [i.url for i in images] == [CAT]


def test_a_judge_that_is_not_multimodal_is_refused_before_any_call():
    judge = ScriptedJudge(["yes"], multimodal=False)
    case = LLMTestCase(input="q", expected_output="a cat", retrieval_context=[f"{MLLMImage(url=CAT)}"])
    with pytest.raises(ValueError, match="multimodal"):
        ContextualPrecisionMetric(model=judge).measure(case)
    assert judge.prompts == []


def test_images_in_conversations():
    conv = ConversationalTestCase(
        turns=[
            Turn(role="user", content=f"what is this? {MLLMImage(url=CAT)}"),
            Turn(role="assistant", content="a cat", retrieval_context=["Cats purr."]),
        ],
        expected_outcome="The user learns it is a cat.",
    )
    assert conv.multimodal is True


def test_bad_images_are_refused():
    with pytest.raises(ValueError):
        MLLMImage()
    with pytest.raises(ValueError):
        MLLMImage(url="ftp://example.com/cat.png")
    with pytest.raises(ValueError):
        MLLMImage(dataBase64="AAAA")


# -- test-case checks ---------------------------------------------------------------------------------


def test_private_attributes_evaluation_code_reads():
    case = LLMTestCase(input="q")
    assert case._trace_dict is None and case._dataset_rank is None
    assert case._dataset_alias is None and case._dataset_id is None
    uuid.UUID(case._identifier)
    assert LLMTestCase(input="q")._identifier != case._identifier
    case._dataset_rank = 4
    assert case._dataset_rank == 4 and "_dataset_rank" not in case.model_dump()
    conv = ConversationalTestCase(turns=[Turn(role="user", content="hi")])
    assert conv._dataset_rank is None and conv._dataset_alias is None


def test_tool_calls_compare_and_hash_by_name_parameters_and_output():
    a = ToolCall(name="search", input_parameters={"q": "refunds", "n": [1, 2]}, output={"hits": 3}, reasoning="r1")
    b = ToolCall(name="search", input_parameters={"q": "refunds", "n": [1, 2]}, output={"hits": 3}, reasoning="r2")
    c = ToolCall(name="search", input_parameters={"q": "shipping"})
    assert a == b and a != c and a != "search"
    assert hash(a) == hash(b) and len({a, b, c}) == 2
    assert 'name="search"' in repr(a)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        (dict(input=42), "'input' must be a string"),
        (dict(input="q", actual_output=["a"]), "'actual_output' must be a string"),
        (dict(input="q", context="one string"), "'context' must be None or a list of strings"),
        (dict(input="q", retrieval_context=["ok", 3]), "'retrieval_context' must be None or a list of strings"),
        (dict(input="q", tools_called=["search"]), "'tools_called' must be None or a list of `ToolCall`"),
        (
            dict(input="q", custom_column_key_values={"k": 1}),
            r"'custom_column_key_values' must be None or a Dict\[str, str\]",
        ),
    ],
)
def test_wrong_types_raise_type_errors(kwargs, message):
    with pytest.raises(TypeError, match=message):
        LLMTestCase(**kwargs)


def test_pydantic_checks_raise_validation_errors():
    with pytest.raises(ValidationError):
        LLMTestCase(input=None)
    with pytest.raises(ValidationError):
        LLMTestCase(input="q", expected_output=5)
    with pytest.raises(ValidationError):
        Turn(role="system", content="x")
    with pytest.raises(ValidationError):
        Turn(role="user", content=None)
    with pytest.raises(TypeError, match="'turns' must not be empty"):
        ConversationalTestCase(turns=[])


def test_field_coercions():
    case = LLMTestCase(input="q", token_cost="0.25", completion_time=3, flaky="true", expectedOutput="e")
    assert case.token_cost == 0.25 and case.completion_time == 3.0 and case.flaky is True
    assert case.expected_output == "e"
    conv = ConversationalTestCase(turns=[{"role": "user", "content": "hi"}], expectedOutcome="done")
    assert isinstance(conv.turns[0], Turn) and conv.expected_outcome == "done"
    assert case.model_dump(by_alias=True)["expectedOutput"] == "e"
