"""deepeval compatibility of the metrics: constructor names and positional order, threshold=None,
is_successful(), strict mode, and deepeval-style custom models written against the real local
judge server (the OpenAI protocol, driven by the real ``openai`` client)."""

import asyncio
import json

import openai
import pytest

from ctxprec_ops import (
    ContextualPrecisionMetric,
    ConversationalTestCase,
    DeepEvalBaseLLM,
    JudgeConfigurationError,
    LLMTestCase,
    Turn,
    TurnContextualPrecisionMetric,
)
from ctxprec_ops.judge.models import CustomModelJudge
from ctxprec_ops.scoring.formula import contextual_precision as cp

R, N = "RELEVANT: refunds take five days", "office hours are 9 to 5"


def case(nodes, **kw):
    return LLMTestCase(
        input="How long do refunds take?", expected_output="Refunds take five days.", retrieval_context=nodes, **kw
    )


class CustomServerModel(DeepEvalBaseLLM):
    """A custom model as deepeval's docs describe one: load_model, generate, a_generate,
    get_model_name; it talks to an OpenAI-compatible server and answers as ``how`` says."""

    def __init__(self, base_url: str, how: str = "str"):
        self.base_url, self.how = base_url, how
        super().__init__("house-judge")

    def load_model(self):
        return openai.OpenAI(base_url=self.base_url, api_key="k", max_retries=0)

    def _content(self, prompt: str) -> str:
        out = self.model.chat.completions.create(
            model="judge-test-model", messages=[{"role": "user", "content": prompt}]
        )
        return out.choices[0].message.content

    def generate(self, prompt: str, schema=None):
        text = self._content(prompt)
        if self.how == "schema":
            return schema.model_validate_json(text)
        if self.how == "dict":
            return json.loads(text)
        return text

    async def a_generate(self, prompt: str, schema=None):
        return await asyncio.to_thread(self.generate, prompt, schema)

    def get_model_name(self):
        return "house-judge"


class NoSchemaModel:
    """Duck-typed (no base class at all), and its methods take no ``schema`` argument."""

    def __init__(self, base_url: str):
        self.client = openai.AsyncOpenAI(base_url=base_url, api_key="k", max_retries=0)
        self.seen_prompts = 0

    def load_model(self):
        return self.client

    def generate(self, prompt: str) -> str:
        raise AssertionError("the async path must be used")

    async def a_generate(self, prompt: str) -> str:
        self.seen_prompts += 1
        out = await self.client.chat.completions.create(
            model="judge-test-model", messages=[{"role": "user", "content": prompt}]
        )
        return out.choices[0].message.content

    def get_model_name(self) -> str:
        return "no-schema-model"


def test_positional_order_and_keyword_names_are_deepevals():
    # deepeval 4.3: threshold, model, system_one_model, eval_mode, include_reason, async_mode,
    # strict_mode, verbose_mode, [window_size,] flaky, evaluation_template
    m = ContextualPrecisionMetric(0.7, "lexical", None, "llm", False, False, True, False, True)
    assert (m.threshold, m.include_reason, m.async_mode, m.strict_mode, m.verbose_mode, m.flaky) == (
        1.0,
        False,
        False,
        True,
        False,
        True,
    )
    t = TurnContextualPrecisionMetric(0.6, "lexical", None, None, True, True, False, False, 3, True)
    assert (t.threshold, t.window_size, t.flaky, t.strict_mode) == (0.6, 3, True, False)
    with pytest.raises(JudgeConfigurationError, match="eval_mode"):
        ContextualPrecisionMetric(0.5, "lexical", None, "system_one")
    with pytest.raises(JudgeConfigurationError, match="system_one_model"):
        ContextualPrecisionMetric(system_one_model="some-model")
    kw = ContextualPrecisionMetric(
        threshold=0.4,
        model="lexical",
        include_reason=True,
        async_mode=False,
        strict_mode=False,
        verbose_mode=False,
        flaky=False,
        evaluation_template=None,
    )
    assert kw.threshold == 0.4 and kw.evaluation_model == "lexical"


def test_threshold_none_scores_without_a_verdict():
    m = ContextualPrecisionMetric(threshold=None, model="lexical")
    assert m.threshold is None
    assert m.measure(case(["Refunds take five days."])) == 1.0
    assert m.success is None and m.is_successful() is None
    with pytest.raises(ValueError, match="between 0 and 1 or None"):
        ContextualPrecisionMetric(threshold=1.5, model="lexical")


def test_is_successful_is_computed_from_score_and_threshold():
    m = ContextualPrecisionMetric(threshold=0.5, model="lexical")
    m.measure(case(["office hours", "Refunds take five days."]))
    assert m.score == 0.5 and m.is_successful() is True
    m.score, m.threshold = 0.6, 0.5  # mutated after measure: recomputed, not the stored flag
    assert m.is_successful() is True and m.success is True
    m.score = 0.4
    assert m.is_successful() is False
    m.score = None
    assert m.is_successful() is False
    m.score, m.error = 0.9, "judge failed"
    assert m.is_successful() is False


def test_strict_mode_as_deepeval():
    m = ContextualPrecisionMetric(threshold=0.2, model="lexical", strict_mode=True)
    assert m.threshold == 1.0
    assert m.measure(case(["office hours", "Refunds take five days."])) == 0.0 and m.is_successful() is False
    assert m.measure(case(["Refunds take five days.", "office hours"])) == 1.0 and m.is_successful() is True


@pytest.mark.parametrize("how", ["str", "dict", "schema"])
def test_deepeval_base_llm_subclass_works_as_model(judge_server, how):
    model = CustomServerModel(judge_server.base_url, how)
    assert model.model is not None  # load_model ran, as in deepeval
    m = ContextualPrecisionMetric(model=model, threshold=0.5)
    assert m.evaluation_model == "house-judge"
    assert m.measure(case([N, R, R])) == pytest.approx(cp([0, 1, 1]))
    assert judge_server.calls == 1  # one call per case, reason composed from the same answer
    assert m.evaluation_cost is None and "node 1" in m.reason


def test_duck_typed_model_without_schema_argument(judge_server):
    model = NoSchemaModel(judge_server.base_url)
    m = ContextualPrecisionMetric(model=model)
    assert isinstance(m.model, CustomModelJudge)
    assert m.measure(case([R, N])) == 1.0 and model.seen_prompts == 1


def test_not_a_model_is_refused_clearly():
    with pytest.raises(JudgeConfigurationError, match="deepeval-style model"):
        ContextualPrecisionMetric(model=object())


def test_custom_model_answer_is_repaired_like_any_other(judge_server):
    judge_server.script(["drop"])  # first answer misses a node: re-asked once, then scored
    m = ContextualPrecisionMetric(model=CustomServerModel(judge_server.base_url, "schema"))
    assert m.measure(case([N, R, N])) == pytest.approx(cp([0, 1, 0]))
    assert judge_server.calls == 2


def test_turn_metric_with_custom_model_and_window(judge_server):
    turns = [
        Turn(role="user", content="q1"),
        Turn(role="assistant", content="a", retrieval_context=[N, R]),
        Turn(role="user", content="q2"),
        Turn(role="assistant", content="b", retrieval_context=[R]),
    ]
    conv = ConversationalTestCase(turns=turns, expected_outcome="Refunds take five days.")
    m = TurnContextualPrecisionMetric(threshold=0.5, model=CustomServerModel(judge_server.base_url), window_size=1)
    assert m.measure(conv) == pytest.approx((cp([0, 1]) + 1.0) / 2)
    assert m.is_successful() is True and judge_server.calls == 2
