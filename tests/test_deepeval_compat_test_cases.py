"""deepeval compatibility of the test-case classes: deepeval's field set, camelCase spellings,
``model_dump()``, construction-time validation, turn copying, and deepeval objects read by attribute.
"""

import json
import warnings

import pytest
from pydantic import BaseModel

from ctxprec_ops import (
    ContextualPrecisionMetric,
    ConversationalTestCase,
    InvalidTestCaseError,
    LLMTestCase,
    TestCaseTypeError,
    ToolCall,
    Turn,
    TurnContextualPrecisionMetric,
)
from ctxprec_ops.cases.foreign import as_conversational_test_case, as_llm_test_case

DEEPEVAL_LLM_FIELDS = {
    "input",
    "actual_output",
    "expected_output",
    "context",
    "retrieval_context",
    "metadata",
    "tools_called",
    "comments",
    "expected_tools",
    "token_cost",
    "completion_time",
    "flaky",
    "multimodal",
    "name",
    "tags",
    "mcp_servers",
    "mcp_tools_called",
    "mcp_resources_called",
    "mcp_prompts_called",
    "custom_column_key_values",
    "input_token_count",
    "output_token_count",
    "expected_labels",
    "expectations",
}
DEEPEVAL_TURN_FIELDS = {
    "role",
    "content",
    "user_id",
    "audio",
    "latency_ms",
    "interrupted",
    "retrieval_context",
    "tools_called",
    "mcp_tools_called",
    "mcp_resources_called",
    "mcp_prompts_called",
    "metadata",
    "provider_transcript",
}
DEEPEVAL_CONVERSATION_FIELDS = {
    "turns",
    "scenario",
    "context",
    "name",
    "user_description",
    "expected_outcome",
    "chatbot_role",
    "metadata",
    "comments",
    "tags",
    "flaky",
    "mcp_servers",
    "multimodal",
    "voice",
    "call_recording_path",
    "expected_labels",
    "expectations",
}


@pytest.mark.parametrize(
    "cls, fields",
    [
        (LLMTestCase, DEEPEVAL_LLM_FIELDS),
        (Turn, DEEPEVAL_TURN_FIELDS),
        (ConversationalTestCase, DEEPEVAL_CONVERSATION_FIELDS),
    ],
)
def test_every_deepeval_field_exists(cls, fields):
    assert fields <= set(cls.model_fields), fields - set(cls.model_fields)


def test_minimal_case_defaults():
    c = LLMTestCase(input="What is the capital of France?")
    for name in DEEPEVAL_LLM_FIELDS - {"input", "flaky", "multimodal"}:
        assert getattr(c, name) is None, name
    assert c.flaky is False and c.multimodal is False and c.additional_metadata is None


def test_all_fields_kept_and_round_trip_through_model_dump():
    tool = ToolCall(name="search", input_parameters={"q": "refunds"}, output=["doc"])
    c = LLMTestCase(
        input="q",
        actual_output="a",
        expected_output="e",
        context=["ctx"],
        retrieval_context=["n1", "n2"],
        additional_metadata={"team": "rag"},
        tools_called=[tool],
        expected_tools=[tool],
        comments="c",
        token_cost=0.05,
        completion_time=1.25,
        flaky=True,
        name="case one",
        tags=["t1"],
        custom_column_key_values={"k": "v"},
        id=7,
    )
    assert c.metadata == {"team": "rag"} and c.additional_metadata == {"team": "rag"}
    assert c.tools_called == [tool] and c.tools_called[0].input_parameters == {"q": "refunds"}
    dumped = c.model_dump()
    assert dumped["comments"] == "c" and dumped["token_cost"] == 0.05 and dumped["tags"] == ["t1"]
    assert dumped["id"] == "7"
    again = LLMTestCase(**dumped)
    assert again == c
    camel = c.model_dump(by_alias=True)
    assert camel["retrievalContext"] == ["n1", "n2"] and camel["toolsCalled"][0]["inputParameters"] == {"q": "refunds"}
    assert LLMTestCase.model_validate(json.loads(c.model_dump_json(by_alias=True))) == c


def test_camel_case_and_mixed_spellings():
    c = LLMTestCase(
        input="q",
        actualOutput="a",
        expectedOutput="e",
        retrievalContext=["n"],
        additionalMetadata={"m": 1},
        toolsCalled=[{"name": "t", "inputParameters": {"x": 1}}],
        tokenCost=0.1,
        completionTime=2.0,
    )
    assert (c.actual_output, c.expected_output, c.retrieval_context) == ("a", "e", ["n"])
    assert c.metadata == {"m": 1} and c.tools_called[0].input_parameters == {"x": 1}
    assert (c.token_cost, c.completion_time) == (0.1, 2.0)
    with pytest.raises(TypeError, match="twice"):
        LLMTestCase(input="q", expected_output="a", expectedOutput="b")


def test_unknown_fields_are_kept_not_dropped():
    c = LLMTestCase(input="q", retrieval_context=["n"], experiment="exp-4")
    assert c.experiment == "exp-4" and c.model_dump()["experiment"] == "exp-4"


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (dict(input=42), "'input' must be a string"),
        (dict(input=None), "'input' must be a string"),
        (dict(input="q", actual_output=1), "'actual_output' must be a string"),
        (dict(input="q", context="not a list"), "'context' must be None or a list of strings"),
        (dict(input="q", context=["ok", 3]), "'context[1]' must be a string"),
        (dict(input="q", retrieval_context=[None]), "'retrieval_context[0]' must be a string"),
        (dict(input="q", tools_called=["search"]), "'tools_called[0]' must be a ToolCall"),
        (dict(input="q", expected_tools="search"), "'expected_tools' must be None or a list of ToolCall"),
        (dict(input="q", token_cost="cheap"), "token_cost"),
        (dict(input="q", tags=[1]), "'tags[0]' must be a string"),
        (dict(input="q", custom_column_key_values={"k": 1}), "custom_column_key_values"),
    ],
)
def test_wrong_types_fail_when_the_case_is_built(kwargs, fragment):
    with pytest.raises(TypeError) as e:  # deepeval users catch TypeError ...
        LLMTestCase(**kwargs)
    assert fragment in str(e.value)
    assert isinstance(e.value, InvalidTestCaseError) and isinstance(e.value, ValueError)  # ... we catch ours


def test_missing_input_is_an_error():
    with pytest.raises(TestCaseTypeError, match="'input' is required"):
        LLMTestCase(expected_output="a")


def test_turn_fields_aliases_and_validation():
    t = Turn(
        role="assistant",
        content="Let me check.",
        userId="u1",
        retrievalContext=["a", "b"],
        toolsCalled=[ToolCall(name="weather")],
        additional_metadata={"model": "gpt"},
        latencyMs=120.0,
    )
    assert t.user_id == "u1" and t.retrieval_context == ["a", "b"] and t.tools_called[0].name == "weather"
    assert t.metadata == {"model": "gpt"} and t.additional_metadata == {"model": "gpt"} and t.latency_ms == 120.0
    assert Turn(role="user", content="").content == ""
    assert Turn(role="user", content="x", retrieval_context=[]).retrieval_context == []
    assert "role='assistant'" in repr(t) and "user_id='u1'" in repr(t)
    for bad in (dict(role="system", content="x"), dict(role="user", content=None), dict(role="user", content=5)):
        with pytest.raises(ValueError):
            Turn(**bad)


def test_conversation_fields_aliases_and_round_trip():
    conv = ConversationalTestCase(
        turns=[Turn(role="user", content="hi"), {"role": "assistant", "content": "hello", "retrievalContext": ["n"]}],
        scenario="support",
        context=["billing"],
        name="chat",
        userDescription="premium user",
        expectedOutcome="issue resolved",
        chatbotRole="agent",
        additionalMetadata={"k": 1},
        comments="c",
        tags=["x"],
    )
    assert (conv.user_description, conv.expected_outcome, conv.chatbot_role) == (
        "premium user",
        "issue resolved",
        "agent",
    )
    assert conv.additional_metadata == {"k": 1} and isinstance(conv.turns[1], Turn)
    assert conv.turns[1].retrieval_context == ["n"] and conv.multimodal is False and conv.voice is False
    assert ConversationalTestCase(**conv.model_dump()) == conv


def test_turns_are_copied_and_empty_turns_refused_at_construction():
    original = Turn(role="assistant", content="Hello", retrieval_context=["node"])
    conv = ConversationalTestCase(turns=[Turn(role="user", content="q"), original], expected_outcome="x")
    original.content = "changed"
    original.retrieval_context.append("added later")
    assert conv.turns[1].content == "Hello" and conv.turns[1].retrieval_context == ["node"]
    with pytest.raises(TypeError, match="'turns' must not be empty"):
        ConversationalTestCase(turns=[], expected_outcome="x")
    with pytest.raises(TypeError, match=r"turns\[0\] must be a Turn or a dict"):
        ConversationalTestCase(turns=[42], expected_outcome="x")
    with pytest.raises(TypeError, match=r"turns\[0\]"):
        ConversationalTestCase(turns=[{"role": "robot", "content": "x"}], expected_outcome="x")


def test_multimodal_is_false_for_text_and_images_are_a_clear_error():
    assert LLMTestCase(input="q", retrieval_context=["plain text"]).multimodal is False
    picture = LLMTestCase(
        input="What is in [DEEPEVAL:IMAGE:abc123]?", expected_output="a cat", retrieval_context=["a cat photo"]
    )
    assert picture.multimodal is True
    metric = ContextualPrecisionMetric(model="lexical")
    with pytest.raises(InvalidTestCaseError, match="images are not supported"):
        metric.measure(picture)
    conv = ConversationalTestCase(
        turns=[
            Turn(role="user", content="see [DEEPEVAL:IMAGE:x]"),
            Turn(role="assistant", content="ok", retrieval_context=["n"]),
        ],
        expected_outcome="o",
    )
    assert conv.multimodal is True
    with pytest.raises(InvalidTestCaseError, match="images are not supported"):
        TurnContextualPrecisionMetric(model="lexical").measure(conv)


# -- deepeval's objects, read by attribute ------------------------------------------------------
# Stand-ins with deepeval's shape (pydantic models with its field names and a deprecated
# property), written here: the project does not depend on deepeval.


class ForeignLLMTestCase(BaseModel):
    input: str
    actual_output: str | None = None
    expected_output: str | None = None
    context: list[str] | None = None
    retrieval_context: list[str] | None = None
    metadata: dict | None = None
    name: str | None = None
    multimodal: bool = False

    @property
    def additional_metadata(self):
        warnings.warn("deprecated", DeprecationWarning, stacklevel=2)
        return self.metadata


class ForeignTurn(BaseModel):
    role: str
    content: str
    retrieval_context: list[str] | None = None
    user_id: str | None = None


class ForeignConversation(BaseModel):
    turns: list[ForeignTurn]
    expected_outcome: str | None = None
    chatbot_role: str | None = None


def test_foreign_cases_are_read_by_attribute_and_scored():
    foreign = ForeignLLMTestCase(
        input="How long do refunds take?",
        expected_output="Refunds take five days.",
        retrieval_context=["Office hours are 9 to 5.", "Refunds take five days."],
        metadata={"src": "deepeval"},
        name="refunds",
    )
    ours = as_llm_test_case(foreign)
    assert isinstance(ours, LLMTestCase) and ours.name == "refunds" and ours.metadata == {"src": "deepeval"}
    metric = ContextualPrecisionMetric(model="lexical")
    assert metric.measure(foreign) == 0.5 and metric.is_successful() is True

    conv = ForeignConversation(
        turns=[
            ForeignTurn(role="user", content="refunds?"),
            ForeignTurn(role="assistant", content="five days", retrieval_context=["Refunds take five days."]),
        ],
        expected_outcome="Refunds take five days.",
        chatbot_role="agent",
    )
    copied = as_conversational_test_case(conv)
    assert isinstance(copied.turns[1], Turn) and copied.chatbot_role == "agent"
    assert TurnContextualPrecisionMetric(model="lexical").measure(conv) == 1.0
    assert as_llm_test_case(42) is None and as_conversational_test_case(ours) is None
