"""Label-based contextual precision: the metric's formula computed from gold labels, no judge.

A ``LabelledRetrieval`` carries the ranked ids of what was retrieved (``retrieved_ids``, best
first) and the ids of the chunks known to be relevant (``relevant_ids``). Node k is relevant when
its id is among ``relevant_ids``; the score is contextual precision over those flags, exactly as
for judge verdicts. Because ``relevant_ids`` lists every relevant chunk (retrieved or not), the
number of relevant chunks is known, so recall, reciprocal rank and NDCG@k come with it
(``ranking.ranking_figures``), in ``MetricResult.figures`` and in the pipeline's
``ctxprec_label_figures`` table.

The judge model is recorded as ``labels`` (``LABELS_JUDGE``): scores of this metric sit in
``ctxprec_scores`` next to the LLM judge's, keyed apart by metric and judge model.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, NamedTuple

from ..cases.results import MetricResult
from ..errors import InvalidTestCaseError
from ..json_text import JSONText, plain_ids, plain_verdicts_template, verdicts_json
from ..judge.calls import JudgeRun
from ..scoring.formula import apply_strict
from ..scoring.ranking import RankingFigures, ranking_figures
from . import names
from .base import BaseRetrievalMetric

__all__ = [
    "LabelContextualPrecisionMetric",
    "LabelledRetrieval",
    "LabelScore",
    "ComputedRow",
    "score_labels",
    "LABELS_JUDGE",
    "LABELS_VERSION",
    "label_reason",
]

#: ``judge_model`` of every label-based score
LABELS_JUDGE = "labels"
#: ``prompt_version`` of label-based scores: the version of the computation (no prompt is involved)
LABELS_VERSION = "labels-v1"
#: most retrieved ids per case (the same bound as nodes per retrieval)
MAX_IDS = 200
#: relevance patterns ``compute_row`` keeps computed (it starts over past this many)
PATTERN_MEMO_SIZE = 20_000


def _ids(value: Any, name: str) -> list[str]:
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise InvalidTestCaseError(f"{name} must be a list of ids, got {type(value).__name__}")
    out = []
    for i, v in enumerate(value):
        if isinstance(v, bool) or not isinstance(v, (str, int)):
            raise InvalidTestCaseError(f"{name}[{i}] must be a string or an integer id, got {type(v).__name__}")
        out.append(str(v))
    return out


@dataclass
class LabelledRetrieval:
    """One retrieval with gold labels: ranked retrieved ids and the ids of the relevant chunks."""

    retrieved_ids: list[str]
    relevant_ids: list[str]
    id: str | None = None
    input: str | None = None
    metadata: dict[str, Any] | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.retrieved_ids = _ids(self.retrieved_ids, "retrieved_ids")
        self.relevant_ids = _ids(self.relevant_ids, "relevant_ids")
        if self.id is not None:
            self.id = str(self.id)


class LabelVerdict:
    """A node's label, shaped like ``NodeVerdict`` (``node``, ``relevant``, ``reason`` = the chunk id)
    without pydantic's per-object cost: the label metric makes millions of them."""

    __slots__ = ("node", "relevant", "reason")

    def __init__(self, node: int, relevant: bool, reason: str) -> None:
        self.node, self.relevant, self.reason = node, relevant, reason

    @property
    def verdict(self) -> str:
        return "yes" if self.relevant else "no"

    def model_dump(self) -> dict[str, Any]:
        return {"node": self.node, "relevant": self.relevant, "reason": self.reason}

    def __eq__(self, other: object) -> bool:
        dump = getattr(other, "model_dump", None)
        return dump is not None and dump() == self.model_dump()

    def __repr__(self) -> str:
        return f"LabelVerdict(node={self.node}, relevant={self.relevant}, reason={self.reason!r})"


def label_reason(score: float, figures: RankingFigures, *, strict_mode: bool = False) -> str:
    """One sentence: the score and where the relevant chunks are."""
    head = f"The score is {score:.2f}"
    if strict_mode and score != figures.precision:
        head += f" (strict mode; {figures.precision:.2f} before)"
    if figures.relevant_retrieved == 0:
        body = "none of the retrieved chunks is labelled relevant"
    else:
        body = (
            f"{figures.relevant_retrieved} of the {figures.k} retrieved chunks are labelled relevant, "
            f"the first at rank {round(1 / figures.reciprocal_rank)}"
        )
    tail = ""
    if figures.recall is not None and figures.ndcg is not None:
        tail = (
            f"; recall {figures.relevant_retrieved}/{figures.relevant_total} = {figures.recall:.2f}, "
            f"NDCG@{figures.k} {figures.ndcg:.2f}"
        )
    return f"{head}: {body}{tail}."


@dataclass(slots=True)
class LabelScore:
    """One labelled retrieval scored: the relevance flag of every retrieved id, in rank order."""

    score: float
    success: bool
    flags: list[bool]
    figures: RankingFigures
    reason: str


class ComputedRow(NamedTuple):
    """What the pipeline stores of one case a metric computes without a judge."""

    score: float
    success: bool
    #: ``[{"node", "relevant", "reason"}, ...]`` as serialized JSON
    verdicts: JSONText
    reason: str
    #: read-only (rows with the same relevance pattern share it)
    figures: Mapping[str, Any] | None


def _score_flags(
    flags: Sequence[bool], relevant_total: int, threshold: float, strict_mode: bool
) -> tuple[float, bool, RankingFigures, str]:
    """Score, success, figures and reason of a relevance pattern: the one formula of the metric."""
    figures = ranking_figures(flags, relevant_total)
    score = apply_strict(figures.precision, strict_mode)
    return score, score >= threshold, figures, label_reason(score, figures, strict_mode=strict_mode)


def score_labels(
    retrieved_ids: Sequence[str], relevant_ids: Sequence[str], *, threshold: float, strict_mode: bool = False
) -> LabelScore:
    """The label metric's computation for validated ids (``compute`` and the pipeline's chunk
    path both call it: one formula). Node k is relevant when its id is in ``relevant_ids``."""
    relevant = set(relevant_ids)
    flags = [i in relevant for i in retrieved_ids]
    score, success, figures, reason = _score_flags(flags, len(relevant), threshold, strict_mode)
    return LabelScore(score, success, flags, figures, reason)


class _Pattern(NamedTuple):
    """Everything ``compute_row`` stores that depends only on the relevance flags and the
    number of relevant ids (not on the ids themselves)."""

    score: float
    success: bool
    reason: str
    figures: Mapping[str, Any]
    #: the verdicts' JSON with ``"%s"`` for each id (``json_text.plain_verdicts_template``)
    template: str


class LabelContextualPrecisionMetric(BaseRetrievalMetric):
    """Contextual precision from gold labels (``retrieved_ids`` / ``relevant_ids``): no judge call.

    ``measure(LabelledRetrieval(...))`` returns the score; ``figures`` holds precision, recall,
    reciprocal rank and NDCG@k. ``compute(case)`` is the synchronous core the pipeline calls.
    """

    metric_name = names.LABEL_CONTEXTUAL_PRECISION
    __name__ = "Label Contextual Precision"

    def __init__(
        self,
        threshold: float = 0.5,
        model: Any = None,
        include_reason: bool = True,
        strict_mode: bool = False,
        async_mode: bool = True,
        verbose_mode: bool = False,
        evaluation_template: type | None = None,
        **_: Any,
    ) -> None:
        if not isinstance(threshold, (int, float)) or isinstance(threshold, bool) or not 0 <= threshold <= 1:
            raise ValueError(f"threshold must be a number between 0 and 1, got {threshold!r}")
        self.strict_mode = strict_mode
        self.threshold = 1.0 if strict_mode else float(threshold)
        self.model = None  # type: ignore[assignment]  # no judge: labels decide
        self.evaluation_model = LABELS_JUDGE
        self.include_reason = include_reason
        self.async_mode = async_mode
        self.verbose_mode = verbose_mode
        self.evaluation_template = None
        self.prompt_version = LABELS_VERSION
        self.max_nodes_per_call = MAX_IDS
        self.max_retries = 0
        self.samples = self.judge_samples = 1  # no judge to sample
        self.figures: RankingFigures | None = None
        self._patterns: dict[tuple[tuple[bool, ...], int], _Pattern] = {}
        self._patterns_for: tuple[float | None, bool] | None = None
        self._reset()

    def accepts(self, test_case: Any) -> bool:
        return isinstance(test_case, LabelledRetrieval)

    def _validate(self, test_case: Any) -> None:
        if not isinstance(test_case, LabelledRetrieval):
            raise InvalidTestCaseError(
                f"LabelContextualPrecisionMetric scores a LabelledRetrieval, got {type(test_case).__name__}"
            )
        ids = test_case.retrieved_ids
        if not ids:
            raise InvalidTestCaseError("cannot score label contextual precision: retrieved_ids is empty")
        if len(ids) > MAX_IDS:
            raise InvalidTestCaseError(f"retrieved_ids has {len(ids)} ids (limit {MAX_IDS})")
        if len(set(ids)) != len(ids):
            dup = next(i for n, i in enumerate(ids) if i in ids[:n])
            raise InvalidTestCaseError(
                f"retrieved_ids lists {dup[:100]!r} more than once (ranks must be distinct chunks)"
            )

    def judgment_keys(self, test_case: Any) -> list[bytes]:
        return []

    def judge_requests(self, test_case: Any) -> list[tuple[str, str, list[str]]]:
        self._validate(test_case)
        return []

    def compute(self, test_case: Any, case_index: int = 0) -> MetricResult:
        """Score one case synchronously; never raises for a case-level problem."""
        result = MetricResult(
            case_id=getattr(test_case, "id", None),
            metric=self.metric_name,
            threshold=self.threshold,
            judge_model=LABELS_JUDGE,
            prompt_version=LABELS_VERSION,
            case_index=case_index,
            cost=0.0,
        )
        try:
            self._validate(test_case)
        except InvalidTestCaseError as exc:
            result.success = False
            result.error_type = exc.error_type
            result.error = str(exc)
            return result
        out = score_labels(
            test_case.retrieved_ids,
            test_case.relevant_ids,
            threshold=self.threshold or 0.0,
            strict_mode=self.strict_mode,
        )
        result.score = out.score
        result.success = out.success
        result.figures = out.figures.as_dict()
        result.verdicts = [
            LabelVerdict(k, rel, i)  # type: ignore[misc]
            for k, (i, rel) in enumerate(zip(test_case.retrieved_ids, out.flags), start=1)
        ]
        result.reason = out.reason
        return result

    def compute_row(self, test_case: LabelledRetrieval) -> ComputedRow:
        """``compute`` for the pipeline's chunk path: the same figures as plain values, no result
        objects (``test_case`` comes validated from ``row_to_labelled``).

        Score, figures and reason depend only on the relevance flags and the number of relevant
        ids, and a partition repeats few such patterns: each is computed once (by the formula
        ``compute`` uses) and kept; a row then costs a set look-up per id and its verdicts' text.
        """
        retrieved = test_case.retrieved_ids
        relevant = set(test_case.relevant_ids)
        flags = tuple(map(relevant.__contains__, retrieved))
        patterns = self._patterns
        if self._patterns_for != (self.threshold, self.strict_mode):  # settings changed: start over
            patterns.clear()
            self._patterns_for = (self.threshold, self.strict_mode)
        key = (flags, len(relevant))
        p = patterns.get(key)
        if p is None:
            if len(patterns) >= PATTERN_MEMO_SIZE:
                patterns.clear()
            score, success, figures, reason = _score_flags(
                flags, len(relevant), self.threshold or 0.0, self.strict_mode
            )
            p = patterns[key] = _Pattern(
                score, success, reason, MappingProxyType(figures.as_dict()), plain_verdicts_template(flags)
            )
        if plain_ids(retrieved):  # the chunk id is a label's reason
            verdicts = JSONText(p.template % tuple(retrieved))
        else:
            verdicts = verdicts_json(retrieved, flags)
        return ComputedRow(p.score, p.success, verdicts, p.reason, p.figures)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled and copied without the pattern memo (its figures are read-only proxies, which
        pickle refuses; a copy computes its patterns again)."""
        state = self.__dict__.copy()
        state["_patterns"], state["_patterns_for"] = {}, None
        return state

    async def score_case(self, test_case: Any, run: JudgeRun | None = None, case_index: int = 0) -> MetricResult:
        started = time.perf_counter()
        result = self.compute(test_case, case_index)
        result.seconds = time.perf_counter() - started
        return result

    async def a_measure(self, test_case: Any, _show_indicator: bool = True, **_: Any) -> float | None:
        self._reset()
        result = self.compute(test_case)
        self._apply(result)
        self.figures = RankingFigures(**result.figures) if result.figures else None
        if result.error is not None:
            raise InvalidTestCaseError(result.error)
        return self.score

    def __repr__(self) -> str:
        return f"{type(self).__name__}(threshold={self.threshold})"
