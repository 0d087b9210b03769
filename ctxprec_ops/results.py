"""Result records: one ``MetricResult`` per (case, metric); ``EvaluationResult`` for a batch."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterator

from .verdicts import NodeVerdict

__all__ = ["MetricResult", "WindowResult", "EvaluationResult"]


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
    threshold: float
    score: float | None = None
    success: bool = False
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
        return float(sum(costs))  # type: ignore[arg-type]

    def to_pandas(self):
        import pandas as pd

        rows = [r.as_row() for r in self.results]
        columns = [
            "id", "metric", "score", "success", "threshold", "reason", "error", "error_type",
            "verdicts", "prompt_tokens", "completion_tokens", "cost", "judge_calls",
            "cached_nodes", "judge_model", "prompt_version",
        ]
        df = pd.DataFrame(rows, columns=columns)
        df["score"] = df["score"].astype("float64")
        return df
