"""Pure ranking math over binary relevance labels: precision (the contextual-precision formula),
recall, reciprocal rank and NDCG@k. No I/O, no judge.

``relevance`` is the ranked list r_1..r_n (1 = best) of the retrieved nodes; ``relevant_total``
is the number of relevant chunks that exist for the question (retrieved or not) when it is
known — recall and NDCG need it; without it they are ``None``:

- precision: the formula of ``scoring.contextual_precision`` (weighted cumulative precision, 0 when no hit);
- recall = relevant retrieved / relevant_total (``None`` when ``relevant_total`` is 0 or unknown);
- reciprocal rank = 1 / rank of the first relevant node (0 when none is relevant);
- NDCG@k with k = n: DCG = Σ r_k / log2(k + 1), divided by the DCG of the ideal ranking, which
  puts min(relevant_total, n) relevant nodes first (``None`` when ``relevant_total`` is 0 or
  unknown).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["RankingFigures", "ranking_figures", "dcg_discount"]

# 1/log2(k+1) for k = 1..200 (MAX_NODES), precomputed: the label metric computes millions of rows
_DISCOUNT = [1.0 / math.log2(k + 1) for k in range(1, 202)]
#: the ideal DCG of m relevant nodes ranked first, m = 0..201
_IDEAL = [sum(_DISCOUNT[:m]) for m in range(0, 202)]


def dcg_discount(rank: int) -> float:
    """1 / log2(rank + 1), rank 1-based."""
    return _DISCOUNT[rank - 1] if rank <= len(_DISCOUNT) else 1.0 / math.log2(rank + 1)


@dataclass(slots=True)
class RankingFigures:
    """The figures of one ranked list against its labels."""

    precision: float
    k: int
    relevant_retrieved: int
    relevant_total: int | None
    recall: float | None
    reciprocal_rank: float
    ndcg: float | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "precision": self.precision,
            "k": self.k,
            "relevant_retrieved": self.relevant_retrieved,
            "relevant_total": self.relevant_total,
            "recall": self.recall,
            "reciprocal_rank": self.reciprocal_rank,
            "ndcg": self.ndcg,
        }


def ranking_figures(relevance: Sequence[bool], relevant_total: int | None = None) -> RankingFigures:
    """Every figure of ``relevance`` (see the module docstring)."""
    k = len(relevance)
    hits = 0
    first = 0
    dcg = 0.0
    cum = 0.0  # sum of precision@rank over relevant ranks (the contextual-precision numerator)
    discount = _DISCOUNT if k <= len(_DISCOUNT) else [dcg_discount(r) for r in range(1, k + 1)]
    for rank, rel in enumerate(relevance, start=1):
        if rel:
            hits += 1
            if not first:
                first = rank
            cum += hits / rank
            dcg += discount[rank - 1]
    if relevant_total is not None and relevant_total < hits:
        raise ValueError(f"relevant_total ({relevant_total}) is smaller than the relevant nodes retrieved ({hits})")
    recall = ndcg = None
    if relevant_total:
        recall = hits / relevant_total
        ideal = (
            _IDEAL[min(relevant_total, k)]
            if min(relevant_total, k) < len(_IDEAL)
            else sum(dcg_discount(r) for r in range(1, min(relevant_total, k) + 1))
        )
        ndcg = dcg / ideal
    return RankingFigures(
        precision=cum / hits if hits else 0.0,
        k=k,
        relevant_retrieved=hits,
        relevant_total=relevant_total,
        recall=recall,
        reciprocal_rank=1.0 / first if first else 0.0,
        ndcg=ndcg,
    )
