"""A judge cascade in the report: per partition, how many node verdicts the strong judge decided,
what each judge cost, and the threshold with the agreement its calibration measured.

Read from ``ctxprec_runs`` (every run of the day for the population, summed: a re-run's spend is
spend too; the threshold and agreement are the latest run's) — only for a population whose
``judge_model`` names a cascade (``judge.cascade.cascade_name``), so a single judge costs no read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..judge.cascade import parse_cascade_name
from ..warehouse.schema import existing_output_tables
from .population import Population

__all__ = ["CascadeDay", "cascade_days", "cascade_of"]

_NEEDED = {"nodes_judged", "nodes_escalated", "cheap_cost", "strong_cost", "escalate_below", "calibration_agreement"}


@dataclass(frozen=True)
class CascadeDay:
    """One partition's cascade figures."""

    partition_key: str
    nodes: int
    escalated: int
    cheap_cost: float | None
    strong_cost: float | None
    escalate_below: float | None
    calibration_agreement: float | None

    @property
    def escalation_rate(self) -> float | None:
        return self.escalated / self.nodes if self.nodes else None

    @property
    def strong_share(self) -> float | None:
        """The strong judge's share of the day's judge spend."""
        if self.cheap_cost is None or self.strong_cost is None or self.cheap_cost + self.strong_cost <= 0:
            return None
        return self.strong_cost / (self.cheap_cost + self.strong_cost)


def cascade_of(population: Population | None) -> dict[str, Any] | None:
    """``{cheap, strong, rule, value}`` of a cascade population, None for a single judge."""
    parsed = parse_cascade_name(population.judge_model if population is not None else None)
    if parsed is None:
        return None
    cheap, strong, rule, value = parsed
    return {"cheap": cheap, "strong": strong, "rule": rule, "value": value}


def cascade_days(engine: Engine, population: Population | None, partitions: Sequence[str]) -> list[CascadeDay]:
    """The cascade figures of ``partitions`` that have runs with them, in the order given."""
    if cascade_of(population) is None or not partitions:
        return []
    assert population is not None
    tables = existing_output_tables(engine)
    r = tables.runs
    if r is None or not _NEEDED <= tables.runs_columns:
        return []
    q = (
        sa.select(
            r.c.partition_key,
            r.c.nodes_judged,
            r.c.nodes_escalated,
            r.c.cheap_cost,
            r.c.strong_cost,
            r.c.escalate_below,
            r.c.calibration_agreement,
            r.c.finished_at,
        )  # fmt: skip
        .where(population.where(r), r.c.partition_key.in_(list(partitions)), r.c.nodes_judged.is_not(None))
        .order_by(r.c.finished_at)
    )
    acc: dict[str, dict[str, Any]] = {}
    with engine.connect() as conn:
        for row in conn.execute(q):
            day = acc.setdefault(str(row.partition_key), {"nodes": 0, "escalated": 0, "cheap": 0.0, "strong": 0.0})
            day["nodes"] += int(row.nodes_judged or 0)
            day["escalated"] += int(row.nodes_escalated or 0)
            for name, value in (("cheap", row.cheap_cost), ("strong", row.strong_cost)):
                day[name] = None if day[name] is None or value is None else day[name] + float(value)
            day["below"], day["agreement"] = row.escalate_below, row.calibration_agreement  # the latest run's
    return [
        CascadeDay(k, d["nodes"], d["escalated"], d["cheap"], d["strong"], d["below"], d["agreement"])
        for k in partitions
        if (d := acc.get(k)) is not None
    ]
