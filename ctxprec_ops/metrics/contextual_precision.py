"""Contextual precision of one retrieval (deepeval-compatible API and numbers)."""

from __future__ import annotations

from operator import attrgetter
from typing import Any

from ..cases.contexts import context_nodes, is_plain
from ..cases.foreign import as_llm_test_case
from ..cases.images import judged_text
from ..cases.results import MetricResult
from ..cases.single_turn import LLMTestCase
from ..cases.validation import CaseModel
from ..errors import InvalidTestCaseError
from ..judge.calls import JudgeRun, Usage
from ..scoring.formula import apply_strict, contextual_precision
from ..scoring.template import ContextualPrecisionTemplate
from . import names
from .base import BaseRetrievalMetric, record_usage
from .reasons import compose_reason, verbose_logs

__all__ = ["ContextualPrecisionMetric"]

_relevant = attrgetter("relevant")


class ContextualPrecisionMetric(BaseRetrievalMetric):
    """Did the retriever rank the nodes that lead to the expected output first?

    ``measure(case)`` asks the judge about each node of ``case.retrieval_context`` (one call per
    group of at most ``max_nodes_per_call`` nodes) and scores the ranking with weighted
    cumulative precision.
    """

    metric_name = names.CONTEXTUAL_PRECISION
    __name__ = "Contextual Precision"
    default_template = ContextualPrecisionTemplate

    def accepts(self, test_case: Any) -> bool:
        return isinstance(test_case, LLMTestCase) or (
            not isinstance(test_case, CaseModel)
            and hasattr(test_case, "retrieval_context")
            and hasattr(test_case, "input")
        )

    def coerce(self, test_case: Any) -> Any:
        return as_llm_test_case(test_case) or test_case

    def _validate(self, test_case: Any) -> None:
        if not isinstance(test_case, LLMTestCase):
            raise InvalidTestCaseError(
                f"ContextualPrecisionMetric scores an LLMTestCase, got {type(test_case).__name__}"
            )
        missing = []
        if not test_case.input or not test_case.input.strip():
            missing.append("input")
        if not test_case.expected_output or not test_case.expected_output.strip():
            missing.append("expected_output")
        if not test_case.retrieval_context:
            missing.append("retrieval_context")
        if missing:
            raise InvalidTestCaseError(
                f"cannot score contextual precision: empty or missing {', '.join(missing)} (no judge call was made)"
            )

    @staticmethod
    def judged(test_case: LLMTestCase) -> tuple[str, str, list[str]]:
        """``(question, expected, nodes)`` as the judge is asked them: the nodes after grouping
        ``RetrievedContextData`` items by source, images named by their key (``cases.images``).
        Plain text cases are returned as they are."""
        items = test_case.retrieval_context or []
        expected = test_case.expected_output or ""
        if not test_case.multimodal and is_plain(items):
            return test_case.input, expected, items  # type: ignore[return-value]  # all str
        return judged_text(test_case.input, "input"), judged_text(expected, "expected_output"), context_nodes(items)

    def judgment_keys(self, test_case: LLMTestCase) -> list[bytes]:
        question, expected, nodes = self.judged(test_case)
        return self.stage_keys(question, expected, nodes)

    def judge_requests(self, test_case: Any) -> list[tuple[str, str, list[str]]]:
        """What scoring ``test_case`` sends the judge: ``[(question, expected, nodes)]``.

        Validates first (``InvalidTestCaseError``), exactly as ``measure`` does; no judge call."""
        self._validate(test_case)
        question, expected, nodes = self.judged(test_case)
        return [(question, expected, list(nodes))]

    async def _evaluate(self, test_case: LLMTestCase, run: JudgeRun, result: MetricResult) -> None:
        question, expected, nodes = self.judged(test_case)
        usage = Usage()
        try:
            verdicts = await self.judge_node_list(run, question, expected, nodes, usage)
        finally:  # a failed case still reports the calls it paid for
            record_usage(result, usage)
        raw = contextual_precision(list(map(_relevant, verdicts)))
        score = apply_strict(raw, self.strict_mode)
        result.score = score
        result.verdicts = verdicts
        result.reason = compose_reason(score, verdicts, strict_mode=self.strict_mode, raw_score=raw)
        result.verbose_logs = lambda: verbose_logs(verdicts, raw)
