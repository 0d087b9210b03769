"""Test-case validation: clear errors on construction."""

import pytest

from ctxprec_ops import ConversationalTestCase, InvalidTestCaseError, LLMTestCase, ModelTestCase, Turn


def test_llm_test_case_roundtrip_and_alias():
    c = ModelTestCase(input="q", expected_output="a", retrieval_context=["n1", "n2"], id=7, metadata={"k": 1})
    assert isinstance(c, LLMTestCase)
    assert c.id == "7" and c.retrieval_context == ["n1", "n2"]


@pytest.mark.parametrize(
    "kwargs, fragment",
    [
        (dict(input=3), "'input' must be a string"),
        (dict(input="q", retrieval_context="one string"), "'retrieval_context' must be None or a list of strings"),
        (dict(input="q", retrieval_context=["ok", 5]), "'retrieval_context[1]' must be a string"),
        (dict(input="q", expected_output=["a"]), "'expected_output' must be a string"),
        (dict(input="q", id=1.5), "'id' must be"),
        (dict(input="q", metadata=[1]), "'metadata' must be a dict"),
    ],
)
def test_llm_test_case_rejects_bad_fields(kwargs, fragment):
    with pytest.raises(InvalidTestCaseError) as e:
        LLMTestCase(**kwargs)
    assert fragment in str(e.value)


def test_turns_and_conversation_validation():
    conv = ConversationalTestCase(
        turns=[{"role": "user", "content": "hi"}, Turn("assistant", "hello", ["n"])], expected_outcome="x"
    )
    assert isinstance(conv.turns[0], Turn)
    with pytest.raises(InvalidTestCaseError, match="role"):
        Turn("system", "x")
    with pytest.raises(InvalidTestCaseError, match=r"turns\[0\]"):
        ConversationalTestCase(turns=["nope"], expected_outcome="x")
    with pytest.raises(InvalidTestCaseError, match="Turn.retrieval_context"):
        Turn("assistant", "x", retrieval_context=[None])
