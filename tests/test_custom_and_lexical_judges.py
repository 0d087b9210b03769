"""Custom JudgeModel subclasses (deepeval-style) and the offline lexical judge."""

import json

import pytest

from ctxprec_ops import ContextualPrecisionMetric, JudgeModel, LLMTestCase, TransientJudgeError, evaluate
from ctxprec_ops.judge.models import LexicalJudge, make_judge
from ctxprec_ops.scoring.template import ContextualPrecisionTemplate
from ctxprec_ops.scoring.verdicts import JudgeAnswer


class KeywordJudge(JudgeModel):
    """A real custom judge: reads the prompt's node blocks and marks those containing 'good'."""

    def __init__(self, as_schema=False, fail_first=0):
        self.as_schema = as_schema
        self.fail_first = fail_first
        self.prompts = []

    def get_model_name(self):
        return "keyword-judge"

    def generate(self, prompt, schema=None):
        import re

        self.prompts.append(prompt)
        if self.fail_first:
            self.fail_first -= 1
            raise TransientJudgeError("busy", retry_after=0.01, rate_limited=True)
        verdicts = [
            {"node": int(k), "relevant": "good" in text, "reason": "keyword"}
            for k, text in re.findall(r'<node id="(\d+)">\n(.*?)\n</node>', prompt, re.DOTALL)
        ]
        if self.as_schema and schema is not None:
            return schema.model_validate({"verdicts": verdicts})
        return json.dumps({"verdicts": verdicts})


@pytest.mark.parametrize("as_schema", [False, True])
def test_custom_judge_json_or_schema_instance(as_schema):
    j = KeywordJudge(as_schema=as_schema)
    m = ContextualPrecisionMetric(model=j)
    case = LLMTestCase(input="q", expected_output="a", retrieval_context=["bad", "good", "good"])
    assert m.measure(case) == pytest.approx((1 / 2 + 2 / 3) / 2)
    assert len(j.prompts) == 1 and m.evaluation_model == "keyword-judge"
    assert m.evaluation_cost is None  # a custom judge that reports no cost


def test_custom_judge_transient_error_is_retried():
    j = KeywordJudge(fail_first=2)
    m = ContextualPrecisionMetric(model=j)
    assert m.measure(LLMTestCase(input="q", expected_output="a", retrieval_context=["good"])) == 1.0
    assert len(j.prompts) == 3


def test_lexical_judge_is_offline_deterministic_and_sensible():
    j = make_judge("lexical")
    assert isinstance(j, LexicalJudge) and j.get_model_name() == "lexical"
    exp = "Password resets are done from the account settings page using the reset link sent by email."
    nodes = [
        "Shipping to Canada takes 7 days.",
        "To reset your password, open account settings and click the reset link we email you.",
        "Billing cycles start on the first of the month.",
    ]
    m = ContextualPrecisionMetric(model="lexical")
    c = LLMTestCase(input="How do I reset my password?", expected_output=exp, retrieval_context=nodes)
    s1 = m.measure(c)
    assert [v.relevant for v in m.verdicts] == [False, True, False]
    assert s1 == 0.5 and m.evaluation_cost == 0.0
    assert "password" in m.verdicts[1].reason
    assert m.measure(c) == s1  # deterministic


def test_lexical_judge_as_generic_judge_parses_default_prompt():
    prompt = ContextualPrecisionTemplate.generate_verdicts(
        "reset password?", "reset the password from account settings", ["account settings password reset", "weather"]
    )
    answer = JudgeAnswer.model_validate_json(LexicalJudge().generate(prompt))
    assert [v.relevant for v in answer.verdicts] == [True, False]


def test_lexical_evaluate_many_is_fast_and_makes_no_calls():
    cases = [
        LLMTestCase(
            input=f"q{i}", expected_output="alpha beta gamma", retrieval_context=["alpha beta", "zzz"], id=str(i)
        )
        for i in range(500)
    ]
    res = evaluate(cases, ContextualPrecisionMetric(model="lexical"))
    assert len(res) == 500 and res.judge_calls == 0 and all(r.score == 1.0 for r in res)


def _reference_terms(text: str) -> dict[str, str]:
    """The lexical judge's terms as its docstring defines them, written plainly: the ``[a-z0-9]+``
    words of the lowercased text, 3 letters or more and no stop word, by stem (the judge's
    ``_stem``, called for each word), each stem with the first word that has it."""
    import re

    from ctxprec_ops.judge.models import lexical

    out: dict[str, str] = {}
    for w in re.findall(r"[a-z0-9]+", text.lower()):
        if len(w) >= 3 and w not in lexical._STOP:
            out.setdefault(lexical._stem(w), w)
    return out


def test_lexical_terms_match_their_definition_on_any_text():
    """The judge finds words by translating the text's UTF-8 bytes (not a regular expression) and
    memoizes stems in a dict: on random texts of ASCII words, punctuation, digits, non-ASCII
    letters (some lowercasing to ASCII), emoji and a lone surrogate, it finds exactly the terms of
    the plain definition, first surface word included."""
    import random

    from ctxprec_ops.judge.models import lexical

    words = "running runs ran studies study flies fly boxes testing tested the and one new via per 42 x1 abc"
    pieces = [
        *words.split(),
        " ",
        "  ",
        "\t",
        "\n",
        ".",
        "'s",
        "-",
        "_",
        "é",
        "É",
        "ß",
        "\u0130",
        "\u212a",
        "ǅ",
        "\u00a0",
        "\U0001f642",
        "\ud800",
        "café",
        "naïve",
        "ÀBC",
        "Kelvin\u212aa",
    ]
    rng = random.Random(11)
    for _ in range(3000):
        text = "".join(rng.choice(pieces) + rng.choice(["", " "]) for _ in range(rng.randint(0, 40)))
        lexical._terms.cache_clear()
        got = lexical._terms(text)
        assert got == _reference_terms(text), repr(text)
