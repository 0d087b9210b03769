"""Per-partition and trailing-baseline figures, computed from loaded history (pure)."""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass

import numpy as np

from .history import History, PartitionData
from .stats import Moments, ScoreSummary, finite_or_none, summary_of_moments

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
    #: when the latest run scored a sample: its rate (None when only ``max_rows`` capped it) and
    #: every row of the partition; ``summary.n`` is the sample's size
    sampled: bool = False
    sample_rate: float | None = None
    rows_total: int | None = None

    @property
    def failure_rate(self) -> float | None:
        return self.rows_failed / self.rows if self.rows else None

    def sample_label(self) -> str | None:
        """``sample of 120 of 1,000 rows (rate 0.12)``, or None when every row was scored."""
        if not self.sampled:
            return None
        rate = f", rate {self.sample_rate:g}" if self.sample_rate is not None and self.sample_rate < 1 else ""
        total = f" of {self.rows_total:,} rows" if self.rows_total is not None else ""
        return f"sample of {self.summary.n:,}{total}{rate}"

    def to_dict(self) -> dict[str, object]:
        return {
            "partition_key": self.partition_key,
            **self.summary.to_dict(),
            "rows": self.rows,
            "rows_failed": self.rows_failed,
            "failure_rate": finite_or_none(self.failure_rate),
            "run_status": self.run_status,
            "cost": finite_or_none(self.cost),
            "sampled": self.sampled,
            "sample_rate": finite_or_none(self.sample_rate),
            "rows_total": self.rows_total,
        }


@dataclass(frozen=True)
class BaselineFigures:
    """The trailing baseline: pooled per-case scores of the previous scored partitions.

    ``partitions`` are the score-baseline partitions; ``volume_partitions`` the previous
    partitions with any rows, whose median ``rows`` is the volume reference.
    """

    partitions: tuple[str, ...]
    summary: ScoreSummary
    moments: Moments
    volume_partitions: tuple[str, ...]
    median_rows: float | None
    #: earlier partitions left out of the score baseline because they fired the regression rule
    excluded: tuple[str, ...] = ()
    #: calendar days of the baseline window with no run yet (e.g. a backfill scoring days concurrently)
    missing: tuple[str, ...] = ()

    def describe(self) -> str:
        """Which partitions the baseline used, which it left out and which it is still missing."""
        if self.partitions:
            span = self.partitions[0] if len(self.partitions) == 1 else f"{self.partitions[0]}..{self.partitions[-1]}"
            text = f"{len(self.partitions)} partition(s) {span} ({', '.join(self.partitions)})"
        else:
            text = "no earlier scored partition"
        if self.excluded:
            text += f"; left out as regressions: {', '.join(self.excluded)}"
        if self.missing:
            text += f"; baseline incomplete: {', '.join(self.missing)} not yet scored"
        return text

    def to_dict(self) -> dict[str, object]:
        return {
            "partitions": list(self.partitions),
            "excluded": list(self.excluded),
            "missing": list(self.missing),
            **self.summary.to_dict(),
            "volume_partitions": list(self.volume_partitions),
            "median_rows": finite_or_none(self.median_rows),
        }


def partition_figures(data: PartitionData) -> PartitionFigures:
    run = data.run or {}
    cost = run.get("cost")
    return PartitionFigures(
        partition_key=data.partition_key,
        summary=summary_of_moments(data.moments, median=data.median),
        rows=int(data.rows),
        rows_failed=int(data.rows_failed),
        run_status=run.get("status"),
        cost=float(cost) if cost is not None else None,
        volume=int(data.volume),
        sampled=data.rows_total is not None,
        sample_rate=data.sample_rate,
        rows_total=data.rows_total,
    )


def baseline_figures(
    history: History, partition_key: str, baseline_partitions: int, *, exclude: frozenset[str] = frozenset()
) -> BaselineFigures:
    """The score baseline: the last ``baseline_partitions`` scored partitions before ``partition_key``
    that are not in ``exclude``; the volume reference: the last partitions with rows (any)."""
    earlier = [k for k in history.scored_keys if k < partition_key]
    kept = [k for k in earlier if k not in exclude]
    keys = kept[-baseline_partitions:] if baseline_partitions > 0 else []
    first_kept = keys[0] if keys else partition_key
    excluded = tuple(k for k in earlier if k in exclude and k >= first_kept)
    pooled = Moments()
    for k in keys:
        pooled = pooled + history.get(k).moments
    vkeys = history.seen_before(partition_key, baseline_partitions)
    vrows = [history.get(k).volume for k in vkeys]
    return BaselineFigures(
        partitions=tuple(keys),
        summary=summary_of_moments(pooled),
        moments=pooled,
        volume_partitions=tuple(vkeys),
        median_rows=float(np.median(vrows)) if vrows else None,
        excluded=excluded,
        missing=tuple(unscored_days(history, partition_key, baseline_partitions)),
    )


def unscored_days(history: History, partition_key: str, days: int) -> list[str]:
    """The calendar days of the ``days`` before ``partition_key`` that have no run and no row yet,
    counted from the first partition the warehouse knows: in a backfill, the days still to come."""
    known = sorted(set(history.run_keys) | set(history.seen_keys))
    if not known or days <= 0:
        return []
    done = set(known)
    end = dt.date.fromisoformat(partition_key)
    window = [(end - dt.timedelta(days=i)).isoformat() for i in range(days, 0, -1)]
    return [d for d in window if d >= known[0] and d not in done]
