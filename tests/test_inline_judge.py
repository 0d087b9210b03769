"""A judge that ``answers_inline`` (computes its answer in process) goes through the judging core's
cheap path — ``generate`` called directly, no task per case in the pipeline — with the same
scores, verdicts, judgment-cache entries and failures as the ordinary request path, and a
``generate`` that raises still gets the retries of a network judge."""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import Any

import pytest
import sqlalchemy as sa

from ctxprec_ops import ContextualPrecisionMetric, LLMTestCase, evaluate
from ctxprec_ops.judge.models.base import JudgeModel
from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import create_logs, log_row

DAY = "2026-11-28"
_BLOCK = re.compile(r'<node id="(\d+)">\n(.*?)\n</node>', re.DOTALL)


class RuleJudge(JudgeModel):
    """A node is relevant when it says RELEVANT; row 3's prompts get an unusable answer (no
    verdicts) every time, so that row fails after the repair; ``flaky`` calls raise a timeout
    first. Counts its calls."""

    answers_inline = False

    def __init__(self, flaky: int = 0) -> None:
        self.calls = 0
        self.flaky = flaky

    def get_model_name(self) -> str:
        return "rule-judge"

    def generate(self, prompt: str, schema: Any = None) -> Any:
        self.calls += 1
        if self.flaky:
            self.flaky -= 1
            raise TimeoutError("judge timed out")
        if "question 3?" in prompt:
            return json.dumps({"verdicts": []})
        verdicts = [
            {"node": int(k), "relevant": " RELEVANT" in text, "reason": f"node {k} read"}
            for k, text in _BLOCK.findall(prompt)
        ]
        return json.dumps({"verdicts": verdicts})

    async def a_generate(self, prompt: str, schema: Any = None) -> Any:
        return self.generate(prompt, schema)


class InlineRuleJudge(RuleJudge):
    answers_inline = True
    sent = 0  # calls that took the request path

    async def a_generate(self, prompt: str, schema: Any = None) -> Any:
        self.sent += 1
        return self.generate(prompt, schema)


def _rows(n: int) -> list[dict]:
    return [
        log_row(
            i,
            datetime(2026, 11, 28, i % 24),
            input=f"question {i}?",
            expected=f"answer {i}",
            context=[f"row {i} a: a RELEVANT fact", f"row {i} b: filler", f"row {i} c: another RELEVANT fact"],
        )
        for i in range(1, n + 1)
    ]


def _outcome(url: str) -> tuple[list, list, list]:
    with get_engine(url).connect() as conn:
        scores = conn.execute(
            sa.text("SELECT log_id, score, success, verdicts, reason, judge_calls FROM ctxprec_scores ORDER BY log_id")
        ).all()
        failures = conn.execute(
            sa.text("SELECT log_id, error_type, error_message, attempts FROM ctxprec_failures ORDER BY log_id")
        ).all()
        judgments = conn.execute(sa.text('SELECT "key", relevant, reason FROM ctxprec_judgments ORDER BY "key"')).all()
    return [tuple(r) for r in scores], [tuple(r) for r in failures], [tuple(r) for r in judgments]


def _score(tmp_path, name: str, judge: JudgeModel, **config: Any) -> tuple[Any, tuple[list, list, list]]:
    url = f"sqlite:///{tmp_path / name}"
    create_logs(get_engine(url), _rows(12))
    summary = score_partition(PipelineConfig(warehouse=url, judge=judge, chunk_size=5, concurrency=4, **config), DAY)
    return summary, _outcome(url)


def test_an_inline_judge_scores_a_partition_exactly_as_the_request_path(tmp_path):
    plain, inline = RuleJudge(), InlineRuleJudge()
    s1, out1 = _score(tmp_path, "plain.db", plain)
    s2, out2 = _score(tmp_path, "inline.db", inline)

    scores, failures, judgments = out2
    assert (s2.rows_scored, s2.rows_failed, s2.judge_calls) == (11, 1, s1.judge_calls)
    assert len(judgments) == 33 and [f[0] for f in failures] == ["3"]
    assert "unusable even after re-asking" in failures[0][2] or "verdict" in failures[0][2]
    assert out1 == out2  # same scores, verdicts (stored JSON text), reasons, failures, cache entries
    assert plain.calls == inline.calls
    assert inline.sent == 0  # every call was answered inline (the run's quota has no cap)


def test_an_inline_judge_under_a_request_cap_is_paced_the_ordinary_way(tmp_path, monkeypatch):
    monkeypatch.delenv("CTXPREC_MAX_TPM", raising=False)
    capped = InlineRuleJudge()
    summary, (scores, failures, _) = _score(tmp_path, "capped.db", capped, max_rpm=600_000)
    assert capped.sent == capped.calls > 0 and summary.rows_scored == 11 and [f[0] for f in failures] == ["3"]


def test_an_inline_judge_that_raises_is_retried_like_a_network_judge(tmp_path, monkeypatch):
    monkeypatch.setattr("ctxprec_ops.judge.calls.backoff_seconds", lambda *a, **k: 0.0)
    judge = InlineRuleJudge(flaky=2)  # the first two calls time out
    metric = ContextualPrecisionMetric(model=judge)
    case = LLMTestCase(
        input="question 1?", actual_output="a", expected_output="answer 1", retrieval_context=["x RELEVANT", "y"]
    )
    result = evaluate([case], [metric], concurrency=2)
    r = result.test_results[0].metrics_data[0]
    assert r.score == pytest.approx(1.0) and r.error is None
    assert judge.calls == 3  # two timeouts, retried, then the answer


def test_the_lexical_judge_answers_inline():
    from ctxprec_ops.judge.models.lexical import LexicalJudge

    assert LexicalJudge.answers_inline and not JudgeModel.answers_inline


def test_a_deepeval_style_model_without_schema_can_answer_inline():
    from ctxprec_ops.judge.models.base import DeepEvalBaseLLM

    class Model(DeepEvalBaseLLM):
        answers_inline = True

        def load_model(self):
            return self

        def get_model_name(self):
            return "deepeval-style"

        def generate(self, prompt):  # no schema parameter, as many deepeval models are written
            ids = re.findall(r'<node id="(\d+)">', prompt)
            return json.dumps({"verdicts": [{"node": int(k), "relevant": k == "1", "reason": "r"} for k in ids]})

        async def a_generate(self, prompt):
            raise AssertionError("an inline judge is called through generate")

    metric = ContextualPrecisionMetric(model=Model())
    case = LLMTestCase(input="q", actual_output="a", expected_output="e", retrieval_context=["n1", "n2"])
    assert metric.measure(case) == pytest.approx(1.0)
