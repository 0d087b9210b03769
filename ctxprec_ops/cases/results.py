"""Result records: one ``MetricResult`` per (case, metric); ``EvaluationResult`` for a batch."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

from ..scoring.verdicts import NodeVerdict

__all__ = ["EvaluationResult", "MetricData", "MetricResult", "TestResult", "WindowResult"]


@dataclass
class WindowResult:
    """Turn contextual precision: one sliding window of interaction units."""

    index: int  # 0-based unit index the window ends at
    turn_indices: list[int]  # conversation turn indices (0-based) in the window
    node_sources: list[tuple[int, int]]  # per node rank: (turn index, index in that turn's context)
    verdicts: list[NodeVerdict]
    score: float
    judge_calls: int = 0


@dataclass
class MetricResult:
    """Everything known about one case scored by one metric.

    ``score`` is None when the case errored; ``error``/``error_type`` say why.
    """

    case_id: str | None
    metric: str
    threshold: float | None
    score: float | None = None
    #: ``score >= threshold``; False after an error; None when the metric has no threshold
    success: bool | None = False
    reason: str | None = None
    verdicts: list[NodeVerdict] = field(default_factory=list)
    error: str | None = None
    error_type: str | None = None
    prompt_tokens: int | None = 0
    completion_tokens: int | None = 0
    cost: float | None = 0.0
    judge_calls: int = 0
    cached_nodes: int = 0
    attempts: int = 1
    judge_model: str | None = None
    prompt_version: str | None = None
    #: the verbose log text, or a function rendering it on first access (most batch results
    #: are never read, so the text is not built for them)
    _verbose: Any = field(default=None, repr=False, compare=False)
    windows: list[WindowResult] | None = None
    case_index: int = 0
    #: metric-specific figures besides the score (label metric: recall, reciprocal rank, NDCG@k)
    figures: dict[str, Any] | None = None
    #: False when the metric does not score this kind of case (e.g. a turn metric on an
    #: ``LLMTestCase``): the row says so in ``error``, ``test_results`` leaves it out
    applicable: bool = True
    #: wall-clock seconds the metric spent on this case
    seconds: float | None = field(default=None, repr=False, compare=False)
    #: a judge cascade: the nodes it judged, those the strong judge decided, and the strong
    #: judge's part of ``cost`` (None unknown; 0 for one judge)
    nodes_judged: int = 0
    nodes_escalated: int = 0
    strong_cost: float | None = 0.0
    #: the exception an isolated case failed with (``measure`` re-raises it)
    exception: BaseException | None = field(default=None, repr=False, compare=False)

    @property
    def verbose_logs(self) -> str | None:
        if callable(self._verbose):
            self._verbose = self._verbose()
        return self._verbose

    @verbose_logs.setter
    def verbose_logs(self, value: Any) -> None:
        """A string, or a zero-argument function that renders it when first read."""
        self._verbose = value

    @property
    def ok(self) -> bool:
        return self.error is None

    def as_row(self) -> dict[str, Any]:
        return {
            "id": self.case_id,
            "metric": self.metric,
            "score": self.score,
            "success": self.success,
            "threshold": self.threshold,
            "reason": self.reason,
            "error": self.error,
            "error_type": self.error_type,
            "verdicts": [v.model_dump() for v in self.verdicts],
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
            "cost": self.cost,
            "judge_calls": self.judge_calls,
            "cached_nodes": self.cached_nodes,
            "judge_model": self.judge_model,
            "prompt_version": self.prompt_version,
        }


@dataclass
class EvaluationResult:
    """Results of ``evaluate()``, in input order (case-major, then metric order)."""

    results: list[MetricResult]
    #: the scored cases and metrics (deepeval's ``test_results`` view is built from them)
    cases: list[Any] = field(default_factory=list, repr=False)
    metrics: list[Any] = field(default_factory=list, repr=False)
    #: deepeval's fields, always None here (no hosted test run)
    confident_link: str | None = None
    test_run_id: str | None = None
    #: run counters set by ``evaluate()``: judge calls, retries, repairs, max_in_flight, rate_limited
    stats: dict[str, int] = field(default_factory=dict, repr=False, compare=False)

    def __repr__(self) -> str:  # short: a batch can hold millions of verdicts
        return f"EvaluationResult({len(self.results)} results, {len(self.errors)} errors)"

    def __iter__(self) -> Iterator[MetricResult]:
        return iter(self.results)

    def __len__(self) -> int:
        return len(self.results)

    def __getitem__(self, i: int) -> MetricResult:
        return self.results[i]

    @property
    def errors(self) -> list[MetricResult]:
        return [r for r in self.results if r.error is not None]

    @property
    def judge_calls(self) -> int:
        return sum(r.judge_calls for r in self.results)

    @property
    def prompt_tokens(self) -> int:
        return sum(r.prompt_tokens or 0 for r in self.results)

    @property
    def completion_tokens(self) -> int:
        return sum(r.completion_tokens or 0 for r in self.results)

    @property
    def cost(self) -> float | None:
        costs = [r.cost for r in self.results]
        if any(c is None for c in costs):
            return None
        return float(sum(c for c in costs if c is not None))

    @property
    def test_results(self) -> list[TestResult]:
        """deepeval's view: one ``TestResult`` per case, in input order, with ``metrics_data``."""
        cached = self.__dict__.get("_test_results")
        if cached is None:
            cached = _test_results(self)
            self.__dict__["_test_results"] = cached
        return cached

    def to_pandas(self):
        import pandas as pd

        rows = [r.as_row() for r in self.results]
        columns = [
            "id",
            "metric",
            "score",
            "success",
            "threshold",
            "reason",
            "error",
            "error_type",
            "verdicts",
            "prompt_tokens",
            "completion_tokens",
            "cost",
            "judge_calls",
            "cached_nodes",
            "judge_model",
            "prompt_version",
        ]
        df = pd.DataFrame(rows, columns=columns)
        df["score"] = df["score"].astype("float64")
        return df


@dataclass
class MetricData:
    """One metric's outcome on one case, in deepeval's field names."""

    name: str
    threshold: float | None
    success: bool | None
    score: float | None
    reason: str | None
    strict_mode: bool
    evaluation_model: str | None
    error: str | None
    evaluation_cost: float | None
    verbose_logs: str | None
    flaky: bool = False
    input_tokens: int | None = None
    output_tokens: int | None = None


@dataclass
class TestResult:
    """One case's outcome across metrics (deepeval's ``TestResult``): ``success`` is False when
    any metric failed or errored."""

    __test__ = False  # not a pytest test class

    name: str
    success: bool
    metrics_data: list[MetricData]
    conversational: bool
    index: int | None = None
    multimodal: bool | None = None
    input: str | None = None
    actual_output: str | None = None
    expected_output: str | None = None
    context: list[str] | None = None
    #: the case's items as given (strings, ``RetrievedContextData``, ``MLLMImage``)
    retrieval_context: list[Any] | None = None
    turns: list[Any] | None = None
    metadata: dict | None = None


def _metric_data(r: MetricResult, metric: Any) -> MetricData:
    return MetricData(
        name=getattr(metric, "__name__", r.metric),
        threshold=r.threshold,
        success=r.success,
        score=r.score,
        reason=r.reason if getattr(metric, "include_reason", True) else None,
        strict_mode=bool(getattr(metric, "strict_mode", False)),
        evaluation_model=r.judge_model,
        error=r.error,
        evaluation_cost=r.cost,
        verbose_logs=r.verbose_logs,
        flaky=bool(getattr(metric, "flaky", False)),
        input_tokens=r.prompt_tokens,
        output_tokens=r.completion_tokens,
    )


def _test_results(ev: EvaluationResult) -> list[TestResult]:
    n_metrics = len(ev.metrics)
    out: list[TestResult] = []
    for i, case in enumerate(ev.cases):
        rows = ev.results[i * n_metrics : (i + 1) * n_metrics] if n_metrics else []
        data = [_metric_data(r, m) for r, m in zip(rows, ev.metrics) if r.applicable]
        conversational = hasattr(case, "turns")
        out.append(
            TestResult(
                name=getattr(case, "name", None) or getattr(case, "id", None) or f"test_case_{i}",
                success=all(d.error is None and d.success is not False for d in data),
                metrics_data=data,
                conversational=conversational,
                index=i,
                multimodal=getattr(case, "multimodal", None),
                input=None if conversational else getattr(case, "input", None),
                actual_output=getattr(case, "actual_output", None),
                expected_output=getattr(case, "expected_output", None),
                context=getattr(case, "context", None),
                retrieval_context=getattr(case, "retrieval_context", None),
                turns=getattr(case, "turns", None),
                metadata=getattr(case, "metadata", None),
            )
        )
    return out
