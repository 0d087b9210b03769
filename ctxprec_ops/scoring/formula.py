"""Pure math of contextual precision. No I/O, no judge: relevance flags in, score out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["contextual_precision", "apply_strict", "is_success", "precision_steps", "Step"]


@dataclass(frozen=True)
class Step:
    """One rank's contribution, for verbose logs: precision@k counted only where r_k = 1."""

    rank: int
    relevant: bool
    relevant_so_far: int
    precision_at_k: float
    contribution: float


def precision_steps(relevance: Sequence[bool]) -> list[Step]:
    steps: list[Step] = []
    hits = 0
    for k, rel in enumerate(relevance, start=1):
        if rel:
            hits += 1
        p_at_k = hits / k
        steps.append(Step(k, bool(rel), hits, p_at_k, p_at_k if rel else 0.0))
    return steps


def contextual_precision(relevance: Sequence[bool]) -> float:
    """Weighted cumulative precision of a ranking.

    score = (1/R) * sum_k (hits_at_k / k) * r_k, and 0 when R = 0. No epsilon, so a ranking
    with every relevant node first scores exactly 1.0.
    """
    hits = 0
    total = 0.0
    for k, rel in enumerate(relevance, start=1):
        if rel:
            hits += 1
            total += hits / k
    if hits == 0:
        return 0.0
    return total / hits


def apply_strict(score: float, strict_mode: bool) -> float:
    """In strict mode anything short of perfect is 0."""
    if strict_mode and score < 1.0:
        return 0.0
    return score


def is_success(score: float | None, threshold: float) -> bool:
    return score is not None and score >= threshold
