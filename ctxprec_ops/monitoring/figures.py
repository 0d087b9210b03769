"""Per-partition and trailing-baseline figures, computed from loaded history (pure)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .history import History, PartitionData
from .stats import ScoreSummary, finite_or_none, summarize

__all__ = ["PartitionFigures", "BaselineFigures", "partition_figures", "baseline_figures"]


@dataclass(frozen=True)
class PartitionFigures:
    """One partition: the score summary of its population plus its volume."""

    partition_key: str
    summary: ScoreSummary
    rows: int  # rows seen: scored (any judge) + failed
    rows_failed: int
    run_status: str | None = None
    cost: float | None = None
    #: rows of the partition for the volume rule (all rows even when only a sample was scored)
    volume: int | None = None

    @property
    def failure_rate(self) -> float | None:
        return self.rows_failed / self.rows if self.rows else None

    def to_dict(self) -> dict[str, object]:
        return {
            "partition_key": self.partition_key,
            **self.summary.to_dict(),
            "rows": self.rows,
            "rows_failed": self.rows_failed,
            "failure_rate": finite_or_none(self.failure_rate),
            "run_status": self.run_status,
            "cost": finite_or_none(self.cost),
        }


@dataclass(frozen=True)
class BaselineFigures:
    """The trailing baseline: pooled per-case scores of the previous scored partitions.

    ``partitions`` are the score-baseline partitions; ``volume_partitions`` the previous
    partitions with any rows, whose median ``rows`` is the volume reference.
    """

    partitions: tuple[str, ...]
    summary: ScoreSummary
    scores: np.ndarray
    volume_partitions: tuple[str, ...]
    median_rows: float | None

    def to_dict(self) -> dict[str, object]:
        return {
            "partitions": list(self.partitions),
            **self.summary.to_dict(),
            "volume_partitions": list(self.volume_partitions),
            "median_rows": finite_or_none(self.median_rows),
        }


def partition_figures(data: PartitionData) -> PartitionFigures:
    run = data.run or {}
    cost = run.get("cost")
    return PartitionFigures(
        partition_key=data.partition_key,
        summary=summarize(data.scores, data.passed if data.passed.size == data.scores.size else None),
        rows=int(data.rows),
        rows_failed=int(data.rows_failed),
        run_status=run.get("status"),
        cost=float(cost) if cost is not None else None,
        volume=int(data.volume),
    )


def baseline_figures(history: History, partition_key: str, baseline_partitions: int) -> BaselineFigures:
    keys = history.scored_before(partition_key, baseline_partitions)
    parts = [history.get(k) for k in keys]
    scores = np.concatenate([p.scores for p in parts]) if parts else np.empty(0)
    passed = np.concatenate([p.passed for p in parts]) if parts else np.empty(0, dtype=bool)
    vkeys = history.seen_before(partition_key, baseline_partitions)
    vrows = [history.get(k).volume for k in vkeys]
    return BaselineFigures(
        partitions=tuple(keys),
        summary=summarize(scores, passed if passed.size == scores.size else None),
        scores=scores,
        volume_partitions=tuple(vkeys),
        median_rows=float(np.median(vrows)) if vrows else None,
    )
