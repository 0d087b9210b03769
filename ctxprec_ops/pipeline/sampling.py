"""Deterministic sampling of a partition's rows: ``sample_rate`` and ``max_rows``.

A row is in the sample iff ``h(log id, seed) < cutoff``, where ``h`` is a 64-bit hash and the
cutoff is ``sample_rate × 2**64``. So the same rows are picked on every re-run and by both metrics
(they hash the same log ids), and a higher rate only adds rows. ``max_rows`` lowers the cutoff to
just above the ``max_rows``-th smallest hash among the rows under the rate: still the same rows on
a re-run, and a larger ``max_rows`` (or rate) is a superset.

Rows outside the sample are neither scored nor recorded as failures. ``plan`` fixes the cutoff
once per partition and every chunk carries it, so chunks scored on other workers agree.
"""

from __future__ import annotations

import hashlib
import heapq
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Sample",
    "FULL_CUTOFF",
    "takes_every_row",
    "sample_hash",
    "plan_cutoff",
    "CutoffPlanner",
    "DEFAULT_SAMPLE_SEED",
]

FULL_CUTOFF = 1 << 64
DEFAULT_SAMPLE_SEED = "ctxprec-sample-1"


def sample_hash(log_id: Any, seed: str = DEFAULT_SAMPLE_SEED) -> int:
    """The row's 64-bit sampling hash (of its log id as stored in ``ctxprec_scores.log_id``)."""
    digest = hashlib.blake2b(f"{seed}\x1f{log_id}".encode("utf-8", "surrogatepass"), digest_size=8).digest()
    return int.from_bytes(digest, "big")


@dataclass(frozen=True)
class Sample:
    """What to sample: ``rate`` in (0, 1], at most ``max_rows`` rows per partition, ``seed``."""

    rate: float = 1.0
    max_rows: int | None = None
    seed: str = DEFAULT_SAMPLE_SEED

    def __post_init__(self) -> None:
        if isinstance(self.rate, bool) or not 0.0 < float(self.rate) <= 1.0:
            raise ValueError(f"sample_rate must be > 0 and <= 1, got {self.rate!r}")
        if self.max_rows is not None and (
            isinstance(self.max_rows, bool) or not isinstance(self.max_rows, int) or self.max_rows < 1
        ):
            raise ValueError(f"max_rows must be a positive integer, got {self.max_rows!r}")

    @property
    def active(self) -> bool:
        return self.rate < 1.0 or self.max_rows is not None

    @property
    def rate_cutoff(self) -> int:
        return FULL_CUTOFF if self.rate >= 1.0 else int(self.rate * FULL_CUTOFF)

    def contains(self, log_id: Any, cutoff: int | None) -> bool:
        """Is the row in the sample whose cutoff ``plan_cutoff`` fixed (None: every row)?"""
        if takes_every_row(cutoff):
            return True
        assert cutoff is not None
        return sample_hash(log_id, self.seed) < cutoff


def takes_every_row(cutoff: int | None) -> bool:
    """Whether a sample with this cutoff (``plan_cutoff``; None: no sampling) holds every row."""
    return cutoff is None or cutoff >= FULL_CUTOFF


class CutoffPlanner:
    """Feed the partition's log ids (streamed) with ``add``; ``result()`` gives ``(cutoff, rows,
    rows_sampled)``. Memory: the ``max_rows`` smallest hashes."""

    def __init__(self, sample: Sample) -> None:
        self.sample = sample
        self.rate_cut = sample.rate_cutoff
        self.heap: list[int] = []  # max-heap (negated) of the max_rows smallest hashes under the rate
        self.rows = 0
        self.under = 0

    def add(self, log_id: Any) -> None:
        self.rows += 1
        h = sample_hash(log_id, self.sample.seed)
        if h >= self.rate_cut:
            return
        self.under += 1
        limit = self.sample.max_rows
        if limit is None:
            return
        if len(self.heap) < limit:
            heapq.heappush(self.heap, -h)
        elif h < -self.heap[0]:
            heapq.heapreplace(self.heap, -h)

    def result(self) -> tuple[int, int, int]:
        limit = self.sample.max_rows
        if limit is not None and self.under > limit:
            return min(self.rate_cut, -self.heap[0] + 1), self.rows, limit
        return self.rate_cut, self.rows, self.under


def plan_cutoff(log_ids: Iterable[Any], sample: Sample) -> tuple[int, int, int]:
    """``(cutoff, rows, rows_sampled)`` over the partition's ``log_ids``."""
    planner = CutoffPlanner(sample)
    for value in log_ids:
        planner.add(value)
    return planner.result()
