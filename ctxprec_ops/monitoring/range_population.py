"""Whose scores a comparison over a range of days reads: the one population (scoring key) of the
range's rows, chosen over the whole range — never the last day's alone.

Scores of two judges (or prompt versions, input tables, column mappings) are two measurements:
pooled, a judge change mid-range reads as a fake difference; comparing the last day's population
alone silently drops the other days' rows while the output lists them. So a range whose rows fit
several populations is refused (``MixedPopulationsError``, one line naming each with its rows and
days); with one named, the rows of the others are reported as not compared (``OtherPopulation``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa

from ..errors import CtxPrecError
from ..warehouse.scoring_key import ScoringKey
from .population import Population
from .segment_data import SegmentSource

__all__ = ["MixedPopulationsError", "OtherPopulation", "range_population"]


class MixedPopulationsError(CtxPrecError, ValueError):
    """The compared range holds the scores of several populations (judge models, prompt
    versions, input tables or column mappings) and none was named: comparing them pooled would
    turn a judge change into a fake difference, comparing one would drop the others' rows."""

    error_type = "mixed_populations"
    retryable = False


@dataclass(frozen=True)
class OtherPopulation:
    """Rows of the range (on either side) that belong to another population than the compared one."""

    population: Population
    rows: int
    first: str
    last: str

    def span(self) -> str:
        return self.first if self.first == self.last else f"{self.first}..{self.last}"

    def describe(self) -> str:
        return f"{self.population.label()}: {self.rows:,} rows on {self.span()}"

    def to_dict(self) -> dict[str, Any]:
        pop = self.population
        return {
            "judge_model": pop.judge_model, "prompt_version": pop.prompt_version,
            "source_table": pop.source_table, "mapping": pop.mapping,
            "rows": self.rows, "partitions": [self.first, self.last],
        }  # fmt: skip


def range_population(
    conn: sa.Connection,
    src: SegmentSource,
    metric: str,
    keys: list[str],
    where: list[sa.ColumnElement[bool]],
    given: dict[str, str | None],
) -> tuple[Population | None, list[OtherPopulation]]:
    """The population of the compared rows over the whole range ``keys`` (not the last day's):
    the one scoring key whose rows match ``given`` (the named parts of the population), and the
    rows of the range under other keys. Several matching keys: ``MixedPopulationsError`` naming
    each with its rows and days. No row at all: ``(None, [])`` (the caller's fallback says why)."""
    t = src.table
    names = [f.name for f in dataclasses.fields(ScoringKey) if f.name in t.c]
    q = (
        sa.select(*(t.c[n] for n in names), sa.func.count(), sa.func.min(t.c.partition_key),
                  sa.func.max(t.c.partition_key))
        .where(t.c.metric == metric, t.c.partition_key >= keys[0], t.c.partition_key <= keys[-1], *where)
        .group_by(*(t.c[n] for n in names))
    )  # fmt: skip
    found: list[OtherPopulation] = []
    for row in conn.execute(q):
        values: dict[str, Any] = dict.fromkeys(f.name for f in dataclasses.fields(ScoringKey))
        values.update(zip(names, row[: len(names)]))
        n, first, last = row[len(names) :]
        found.append(OtherPopulation(Population(ScoringKey(**values)), int(n), str(first), str(last)))
    found.sort(key=lambda o: (o.first, o.population.label()))

    def matches(o: OtherPopulation) -> bool:
        key = o.population.key
        return all(v is None or n not in names or getattr(key, n) == v for n, v in given.items())

    chosen = [o for o in found if matches(o)]
    if len(chosen) > 1:
        span = keys[0] if len(keys) == 1 else f"{keys[0]}..{keys[-1]}"
        raise MixedPopulationsError(
            f"{span} holds {metric} scores of {len(chosen)} populations: "
            + "; ".join(o.describe() for o in chosen)
            + "; compare one at a time (--judge-model, --prompt-version, --source-table, --column)"
        )
    if not chosen:
        return None, []
    return chosen[0].population, [o for o in found if o is not chosen[0]]
