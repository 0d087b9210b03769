"""The test-case behaviours deepeval's own test-case tests check (issue 36, item 3): the private
attributes deepeval's evaluation code and plugins read, ``ToolCall`` equality and hashing,
errors of deepeval's type and message for the same bad input, deepeval's field coercions and its
parameter enums. Written from the behaviours (deepeval 4.3.1), not from its tests; the same
checks against the deepeval package itself are in ``test_deepeval_reference.py``."""

from __future__ import annotations

import re
import uuid
import warnings

import pytest
from pydantic import BaseModel, ValidationError

from ctxprec_ops import (
    ConversationalTestCase,
    InvalidTestCaseError,
    LLMTestCase,
    MultiTurnParams,
    SingleTurnParams,
    ToolCall,
    ToolCallParams,
    ToolCallType,
    Turn,
)
from ctxprec_ops.pipeline.rows import row_to_test_case

LLM_PRIVATE = ("_trace_dict", "_dataset_rank", "_dataset_alias", "_dataset_id", "_dataset_version")
CONVERSATION_PRIVATE = ("_dataset_rank", "_dataset_alias", "_dataset_id", "_dataset_version")


# -- private attributes ---------------------------------------------------------------------------


def test_llm_test_case_private_attributes_and_their_defaults():
    case = LLMTestCase(input="q")
    for name in LLM_PRIVATE:
        assert getattr(case, name) is None, name
    assert uuid.UUID(case._identifier).version == 4
    assert case._identifier == case._identifier  # made once
    assert LLMTestCase(input="q")._identifier != case._identifier
    dumped = case.model_dump()
    assert not any(k.startswith("_") for k in dumped)
    case._trace_dict, case._dataset_rank, case._dataset_alias = {"span": 1}, 3, "golden-set"
    case._dataset_id, case._dataset_version = "ds-1", "v2"
    assert (case._trace_dict, case._dataset_rank, case._dataset_alias) == ({"span": 1}, 3, "golden-set")
    copy = case.model_copy()
    assert copy._identifier == case._identifier and copy._dataset_rank == 3
    with pytest.raises(AttributeError):
        _ = case._not_a_deepeval_attribute


def test_private_attributes_of_cases_built_from_warehouse_rows():
    case = row_to_test_case({"id": 1, "input": "q", "expected_output": "a", "retrieval_context": '["n"]'})
    assert all(getattr(case, n) is None for n in LLM_PRIVATE)
    first = case._identifier
    assert uuid.UUID(first) and case._identifier == first
    case._dataset_rank = 7
    assert case._dataset_rank == 7


def test_conversation_private_attributes():
    conv = ConversationalTestCase(turns=[Turn(role="user", content="hi")])
    for name in CONVERSATION_PRIVATE:
        assert getattr(conv, name) is None, name
    conv._dataset_rank = 2
    assert conv._dataset_rank == 2 and "_dataset_rank" not in conv.model_dump()


def test_equality_is_by_content_but_sees_set_private_attributes():
    a, b = LLMTestCase(input="q", tags=["t"]), LLMTestCase(input="q", tags=["t"])
    assert a == b and a._identifier != b._identifier
    b._dataset_rank = 1
    assert a != b


# -- ToolCall --------------------------------------------------------------------------------------


def test_tool_call_equality_is_name_parameters_and_output():
    one = ToolCall(name="search", input_parameters={"q": "x"}, output="r", description="d1")
    same = ToolCall(name="search", input_parameters={"q": "x"}, output="r", reasoning="other")
    assert one == same and hash(one) == hash(same) and len({one, same}) == 1
    assert one != ToolCall(name="search", input_parameters={"q": "y"}, output="r")
    assert one != ToolCall(name="lookup", input_parameters={"q": "x"}, output="r")
    assert one != "search" and one != {"name": "search"}
    assert one.type is ToolCallType.FUNCTION and one.model_dump()["type"] == "FUNCTION"
    assert ToolCall(name="t", type="MCP").type is ToolCallType.MCP


def test_tool_call_hash_handles_nested_and_unhashable_values():
    class Opaque:
        __hash__ = None  # type: ignore[assignment]

        def __eq__(self, other):
            return isinstance(other, Opaque)

    nested = ToolCall(name="t", input_parameters={"l": [1, {"a": [2, 3]}], "s": {4, 5}, "n": None}, output=[{"x": 1}])
    assert isinstance(hash(nested), int)
    opaque_out, opaque_in = ToolCall(name="t", output=Opaque()), ToolCall(name="t", input_parameters={"a": Opaque()})
    assert hash(opaque_out) == hash(ToolCall(name="t", output=Opaque())) and len({opaque_out, opaque_in}) == 2
    # deepeval's rule: hash((name, parameters as sorted pairs, output made hashable)), no parameters = {}
    assert hash(ToolCall(name="t")) == hash(("t", (), None))
    assert hash(ToolCall(name="t", input_parameters={"b": 1, "a": [2]}, output={"k": "v"})) == hash(
        ("t", (("a", (2,)), ("b", 1)), (("k", "v"),))
    )


def test_deepeval_shaped_tool_calls_compare_and_hash_alike():
    class ForeignToolCall(BaseModel):  # deepeval's ToolCall has this class name and these fields
        name: str
        description: str | None = None
        reasoning: str | None = None
        output: object = None
        input_parameters: dict | None = None

    ForeignToolCall.__name__ = "ToolCall"
    theirs = ForeignToolCall(name="search", input_parameters={"q": "x"}, output=["doc"])
    ours = ToolCall(name="search", input_parameters={"q": "x"}, output=["doc"])
    assert ours == theirs
    case = LLMTestCase(input="q", tools_called=[theirs], expected_tools=[ours])
    assert isinstance(case.tools_called[0], ToolCall) and case.tools_called == case.expected_tools


def test_tool_call_repr():
    text = repr(ToolCall(name="lookup", description="finds", reasoning="needed", input_parameters={"q": 1}, output=2))
    for part in (
        'name="lookup"',
        'type="FUNCTION"',
        'description="finds"',
        'reasoning="needed"',
        "input_parameters=",
        "output=",
    ):
        assert part in text
    assert "description=" not in repr(ToolCall(name="bare"))


# -- errors: deepeval's type and message for the same bad input -----------------------------------

T = ToolCall(name="t")
#: (constructor, kwargs, the exception type deepeval raises, deepeval's message or pydantic's)
BAD_INPUT = [
    (LLMTestCase, dict(input=1), TypeError, "'input' must be a string"),
    (LLMTestCase, dict(input=["a"]), TypeError, "'input' must be a string"),
    (LLMTestCase, dict(input=None), ValidationError, "Input should be a valid string"),
    (LLMTestCase, dict(), ValidationError, "Field required"),
    (LLMTestCase, dict(input="q", actual_output=1), TypeError, "'actual_output' must be a string"),
    (LLMTestCase, dict(input="q", expected_output=1), ValidationError, "Input should be a valid string"),
    (LLMTestCase, dict(input="q", context="s"), TypeError, "'context' must be None or a list of strings"),
    (LLMTestCase, dict(input="q", context=["a", None]), TypeError, "'context' must be None or a list of strings"),
    (
        LLMTestCase,
        dict(input="q", retrieval_context="s"),
        TypeError,
        "'retrieval_context' must be None or a list of strings or RetrievedContextData",
    ),
    (
        LLMTestCase,
        dict(input="q", retrieval_context=["a", 1]),
        TypeError,
        "'retrieval_context' must be None or a list of strings or RetrievedContextData",
    ),
    (LLMTestCase, dict(input="q", tools_called="s"), TypeError, "'tools_called' must be None or a list of `ToolCall`"),
    (
        LLMTestCase,
        dict(input="q", tools_called=[T, "s"]),
        TypeError,
        "'tools_called' must be None or a list of `ToolCall`",
    ),
    (
        LLMTestCase,
        dict(input="q", expected_tools=[1]),
        TypeError,
        "'expected_tools' must be None or a list of `ToolCall`",
    ),
    (LLMTestCase, dict(input="q", tags=[1]), ValidationError, "Input should be a valid string"),
    (LLMTestCase, dict(input="q", tags="a"), ValidationError, "Input should be a valid list"),
    (LLMTestCase, dict(input="q", metadata=[1]), ValidationError, "Input should be a valid dictionary"),
    (LLMTestCase, dict(input="q", token_cost="x"), ValidationError, "Input should be a valid number"),
    (LLMTestCase, dict(input="q", name=1), ValidationError, "Input should be a valid string"),
    (LLMTestCase, dict(input="q", flaky="maybe"), ValidationError, "Input should be a valid boolean"),
    (
        LLMTestCase,
        dict(input="q", custom_column_key_values={"a": 1}),
        TypeError,
        "'custom_column_key_values' must be None or a Dict[str, str]",
    ),
    (
        LLMTestCase,
        dict(input="q", expected_labels={"a": 1}),
        TypeError,
        "'expected_labels' must be None or a Dict[str, str] mapping classifier name to label",
    ),
    (Turn, dict(role="system", content="x"), ValidationError, "Input should be 'user' or 'assistant'"),
    (Turn, dict(role="user", content=None), ValidationError, "Input should be a valid string"),
    (Turn, dict(role="user", content=1), ValidationError, "Input should be a valid string"),
    (Turn, dict(role="user"), ValidationError, "Field required"),
    (Turn, dict(role="user", content="x", retrieval_context="s"), ValidationError, "Input should be a valid list"),
    (Turn, dict(role="user", content="x", retrieval_context=[1]), ValidationError, "Input should be a valid string"),
    (Turn, dict(role="user", content="x", tools_called=["s"]), ValidationError, "instance of ToolCall"),
    (Turn, dict(role="user", content="x", metadata=[1]), ValidationError, "Input should be a valid dictionary"),
    (Turn, dict(role="user", content="x", user_id=1), ValidationError, "Input should be a valid string"),
    (ConversationalTestCase, dict(turns=[]), TypeError, "'turns' must not be empty"),
    (ConversationalTestCase, dict(turns=[1]), TypeError, "'turns' must be a list of Turn or dict, got <class 'int'>"),
    (ConversationalTestCase, dict(turns=[{"role": "robot", "content": "x"}]), TypeError, "Invalid dict for Turn: "),
    (
        ConversationalTestCase,
        dict(turns=[{"role": "user", "content": "x"}], context=["a", 1]),
        TypeError,
        "'context' must be None or a list of strings or RetrievedContextData",
    ),
    (
        ConversationalTestCase,
        dict(turns=[{"role": "user", "content": "x"}], scenario=1),
        ValidationError,
        "Input should be a valid string",
    ),
    (
        ConversationalTestCase,
        dict(turns=[{"role": "user", "content": "x"}], expected_outcome=1),
        ValidationError,
        "Input should be a valid string",
    ),
    (ToolCall, dict(), ValidationError, "Field required"),
    (ToolCall, dict(name="t", input_parameters=[1]), ValidationError, "Input should be a valid dictionary"),
]


@pytest.mark.parametrize("cls, kwargs, error, message", BAD_INPUT, ids=lambda v: repr(v)[:40])
def test_bad_input_raises_deepevals_type_and_message(cls, kwargs, error, message):
    with pytest.raises(error, match=re.escape(message)) as raised:
        cls(**kwargs)
    if cls is not ToolCall:  # a plain pydantic model, as deepeval's
        assert isinstance(raised.value, InvalidTestCaseError)  # and ours: one type for every bad case
        assert isinstance(raised.value, TypeError)  # code catching TypeError keeps working


def test_validation_errors_carry_pydantics_error_type_and_location():
    with pytest.raises(ValidationError) as raised:
        LLMTestCase(input="q", tags=["ok", 3])
    (error,) = raised.value.errors()
    assert (error["type"], error["loc"], error["input"]) == ("string_type", ("tags", 1), 3)
    with pytest.raises(ValidationError) as raised:
        Turn(role="bot", content="x")
    assert raised.value.errors()[0]["type"] == "literal_error"


# -- coercions -------------------------------------------------------------------------------------


def test_deepevals_field_coercions():
    case = LLMTestCase(
        input="q",
        flaky="yes",
        token_cost="1.5",
        completion_time=2,
        input_token_count="3",
        output_token_count=4.0,
        tags=("a", "b"),
    )
    assert case.flaky is True and case.token_cost == 1.5 and case.completion_time == 2.0
    assert case.input_token_count == 3 and case.output_token_count == 4 and case.tags == ["a", "b"]
    assert LLMTestCase(input="q", multimodal=False, retrieval_context=["[DEEPEVAL:IMAGE:x]"]).multimodal is True
    conv = ConversationalTestCase(turns=[{"role": "user", "content": "hi", "userId": "u"}], flaky="1")
    assert isinstance(conv.turns[0], Turn) and conv.turns[0].user_id == "u" and conv.flaky is True
    turn = Turn(role="assistant", content="x", latency_ms="12.5", interrupted="false")
    assert turn.latency_ms == 12.5 and turn.interrupted is False


def test_turns_are_deep_copies():
    original = Turn(role="assistant", content="a", retrieval_context=["n"], metadata={"k": [1]})
    conv = ConversationalTestCase(turns=[original])
    original.metadata["k"].append(2)
    assert conv.turns[0].metadata == {"k": [1]} and conv.turns[0] is not original


# -- parameter enums ---------------------------------------------------------------------------------


def test_parameter_enums_and_their_deprecated_names():
    assert SingleTurnParams.RETRIEVAL_CONTEXT.value == "retrieval_context"
    assert SingleTurnParams.MCP_PROMPTS_CALLED.value == "mcp_prompts_called"
    assert (
        MultiTurnParams.EXPECTED_OUTCOME.value == "expected_outcome"
        and MultiTurnParams.MCP_TOOLS.value == "mcp_tools_called"
    )
    assert [p.value for p in ToolCallParams] == ["input_parameters", "output"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        from ctxprec_ops.cases.params import LLMTestCaseParams, TurnParams
    assert LLMTestCaseParams is SingleTurnParams and TurnParams is MultiTurnParams
    assert sum(issubclass(w.category, DeprecationWarning) for w in caught) == 2
