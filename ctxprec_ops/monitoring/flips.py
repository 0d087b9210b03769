"""Self-consistency in the report: per partition, the flip rate of a population judged with
``samples`` > 1 — the share of node verdicts whose sampled answers disagreed (agreement < 1).

Read from ``ctxprec_scores.verdicts`` (each node's ``agreement``), streamed row by row, only for a
population whose ``prompt_version`` says it sampled (``+samples=N``): a population of single
answers costs no read at all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..scoring.samples import samples_of
from ..warehouse.schema import existing_output_tables
from .cases import json_list
from .population import Population

__all__ = ["FlipRate", "flip_rates", "node_agreements"]


@dataclass(frozen=True)
class FlipRate:
    """One partition's self-consistency figures."""

    partition_key: str
    samples: int
    cases: int
    nodes: int
    flipped: int
    #: mean agreement of the majority verdicts (1.0 = every sample agreed on every node)
    mean_agreement: float | None

    @property
    def flip_rate(self) -> float | None:
        return self.flipped / self.nodes if self.nodes else None


def node_agreements(verdicts: Any) -> list[float]:
    """The ``agreement`` of every node in one score row's ``verdicts`` (JSON text or list)."""
    out = []
    for v in json_list(verdicts):
        a = v.get("agreement") if isinstance(v, dict) else None
        if isinstance(a, (int, float)) and not isinstance(a, bool):
            out.append(float(a))
    return out


def flip_rates(engine: Engine, metric: str, population: Population | None, partitions: Sequence[str]) -> list[FlipRate]:
    """Flip rates of ``partitions`` (those with sampled verdicts), in the order given; empty
    when the population did not sample."""
    if population is None or samples_of(population.prompt_version) == 1 or not partitions:
        return []
    samples = samples_of(population.prompt_version)
    t = existing_output_tables(engine).scores
    q = (
        sa.select(t.c.partition_key, t.c.verdicts)
        .where(t.c.metric == metric, t.c.partition_key.in_(list(partitions)), population.where(t))
        .execution_options(yield_per=1000)
    )
    acc: dict[str, list[float]] = {}  # partition -> [cases, nodes, flipped, agreement sum]
    zero: list[float] = [0, 0, 0, 0.0]
    with engine.connect() as conn:
        for pk, verdicts in conn.execute(q):
            agreements = node_agreements(verdicts)
            if not agreements:
                continue
            a = acc.setdefault(pk, list(zero))
            a[0] += 1
            a[1] += len(agreements)
            a[2] += sum(1 for x in agreements if x < 1.0)
            a[3] += sum(agreements)
    out = []
    for pk in partitions:
        got = acc.get(pk)
        if got is not None:
            cases, nodes, flipped, total = got
            out.append(FlipRate(pk, samples, int(cases), int(nodes), int(flipped), total / nodes if nodes else None))
    return out
