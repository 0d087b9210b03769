"""A seeded uniform random draw of a partition's scored rows (``labels sample``, ``audit``).

The frame is the log ids of the population's score rows of the partition (rows with a score),
sorted as text; the draw is the first n of ``random.Random(seed).sample(ids, len(ids))``, a
uniformly random order of them. Any n-prefix of a uniform random order is a uniform random
n-subset — what makes the label correction unbiased — and the prefix property means a larger
``--n`` with the same seed keeps every row a smaller one drew (labels can be topped up) as long
as the partition's scored rows did not change. Read-only.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..errors import CtxPrecError
from ..warehouse.schema import existing_output_tables
from ..warehouse.source import parse_partition_key
from .population import Population, engine_scope, resolve_population

__all__ = ["DrawnRow", "Draw", "NothingToDrawError", "draw_scored_rows", "draw_order"]


class NothingToDrawError(CtxPrecError, LookupError):
    """The partition has no scored rows of the population to draw from."""

    error_type = "nothing_to_draw"
    retryable = False


@dataclass(frozen=True)
class DrawnRow:
    log_id: str
    score: float
    verdicts: Any  # the score row's verdicts (JSON list, or its text)


@dataclass
class Draw:
    population: Population
    partition_key: str
    seed: int
    frame: int  # scored rows drawn from (N)
    rows: list[DrawnRow] = field(default_factory=list)


def draw_order(ids: list[str], seed: int) -> list[str]:
    """``ids`` (sorted first) in the seeded uniformly random order the draws take prefixes of."""
    frame = sorted(ids)
    return random.Random(seed).sample(frame, len(frame))


def draw_scored_rows(
    engine_or_url: Engine | str,
    partition_key: str,
    n: int,
    *,
    seed: int = 0,
    metric: str = "contextual_precision",
    judge_model: str | None = None,
    prompt_version: str | None = None,
    source_table: str | None = None,
    mapping: str | None = None,
) -> Draw:
    """``n`` distinct scored rows of ``partition_key`` (all of them when it has fewer), drawn
    uniformly at random with ``seed``, of the population (default: the partition's most recent
    judge model / prompt version / input table / column mapping)."""
    parse_partition_key(partition_key)
    if n < 1:
        raise ValueError(f"n must be at least 1, got {n}")
    with engine_scope(engine_or_url) as engine:
        tables = existing_output_tables(engine)
        t = tables.scores
        with engine.connect() as conn:
            pop = resolve_population(
                conn, tables, metric, partition_key=partition_key, judge_model=judge_model,
                prompt_version=prompt_version, source_table=source_table, mapping=mapping,
            )  # fmt: skip
            where = [t.c.partition_key == partition_key, t.c.score.is_not(None)]
            ids = (
                []
                if pop is None
                else [str(i) for (i,) in conn.execute(sa.select(t.c.log_id).where(pop.where(t), *where))]
            )
            if pop is None or not ids:
                who = f" of {pop.label()}" if pop is not None else ""
                raise NothingToDrawError(
                    f"{partition_key} has no {metric} scores{who} to draw from: score it first "
                    f"(ctxprec score --partition {partition_key})"
                )
            chosen = draw_order(ids, seed)[:n]
            found: dict[str, DrawnRow] = {}
            for start in range(0, len(chosen), 500):
                q = sa.select(t.c.log_id, t.c.score, t.c.verdicts).where(
                    pop.where(t), *where, t.c.log_id.in_(chosen[start : start + 500])
                )
                for log_id, score, verdicts in conn.execute(q):
                    found[str(log_id)] = DrawnRow(str(log_id), float(score), verdicts)
    return Draw(pop, partition_key, seed, len(ids), [found[i] for i in chosen if i in found])
