"""Whose scores the monitoring figures compare: the ``Population`` (a ``ScoringKey``), and the
one place every reader turns it into SQL (``Population.where``).

Scores from different judges or prompt versions are different measurements; pooling them would
turn a judge change into a fake regression. Scores of two input tables are different populations
too (their ids may overlap). Every figure is therefore computed for one scoring key — by default
that of the most recently scored row (for ``check``: the most recent in the checked partition,
falling back to the most recent before it); each part can be given.

The key's fields are read generically (every ``ScoringKey`` field that is a column of
``ctxprec_scores``), and every reader filters with ``Population.where(table)``, which is
``ScoringKey.where``: a field added to the scoring key is picked up by every monitoring query.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..secrets import redact_url
from ..warehouse.engine import get_engine, require_sqlite_file
from ..warehouse.migrate import DEFAULT_MAPPING
from ..warehouse.schema import ExistingTables
from ..warehouse.scoring_key import ScoringKey

__all__ = ["Population", "engine_scope", "resolve_population", "key_fields"]


@contextlib.contextmanager
def engine_scope(engine_or_url: Engine | str, *, read_only: bool = True) -> Iterator[Engine]:
    """Yield an Engine for an Engine or a URL (``warehouse.engine.get_engine``: cached per URL).
    The monitoring readers only read: a URL gets the read-only engine (a SQLite file is opened
    read-only and left unchanged; elsewhere SELECT rights suffice); ``read_only=False`` for the
    few that also write (an audit storing its figures)."""
    if isinstance(engine_or_url, Engine):
        yield engine_or_url
        return
    if not isinstance(engine_or_url, str) or not engine_or_url.strip():
        raise ValueError("a warehouse URL is required (--warehouse or CTXPREC_WAREHOUSE_URL)")
    try:
        require_sqlite_file(engine_or_url)  # a missing SQLite file is said so, never created by a reader
        engine = get_engine(engine_or_url, read_only=read_only)
    except ValueError:
        raise
    except Exception as exc:  # missing driver etc.: say which (without the password)
        raise ValueError(f"cannot open warehouse {redact_url(engine_or_url)}: {type(exc).__name__}: {exc}") from None
    yield engine


def key_fields(tables: ExistingTables) -> list[str]:
    """The ``ScoringKey`` fields that are columns of the scores table as it exists (``source_table``
    and ``mapping`` only when the table has them: tables of an older version may not)."""
    have = tables.scores_columns or {c.name for c in tables.scores.c}
    return [name for name in ScoringKey.FIELDS if name in have and (name != "source_table" or tables.source_keyed)]


@dataclass(frozen=True)
class Population:
    """The scoring key whose scores are compared (``source_table`` / ``mapping`` None: any input
    table / column mapping, for output tables written before the column existed)."""

    key: ScoringKey

    @classmethod
    def of(
        cls,
        metric: str,
        judge_model: str | None,
        prompt_version: str | None,
        source_table: str | None = None,
        mapping: str | None = None,
    ) -> Population:
        return cls(ScoringKey(metric, judge_model, prompt_version, source_table, mapping))  # type: ignore[arg-type]

    @property
    def metric(self) -> str:
        return self.key.metric

    @property
    def judge_model(self) -> str | None:
        return self.key.judge_model

    @property
    def prompt_version(self) -> str | None:
        return self.key.prompt_version

    @property
    def source_table(self) -> str | None:
        return self.key.source_table

    @property
    def mapping(self) -> str | None:
        """The fingerprint of the column mapping the scores were read with (``pipeline.mapping``)."""
        return self.key.mapping

    def where(self, table: sa.FromClause) -> sa.ColumnElement[bool]:
        """This population's rows of ``table`` (scores, failures, runs, segments): the key's filter."""
        return self.key.where(table)

    def label(self) -> str:
        table = f" of {self.source_table}" if self.source_table else ""
        mapped = f" (column mapping {self.mapping})" if self.mapping and self.mapping != DEFAULT_MAPPING else ""
        return f"{self.judge_model or '?'} / prompt {self.prompt_version or '?'}{table}{mapped}"


def resolve_population(
    conn: sa.Connection,
    tables: ExistingTables,
    metric: str,
    *,
    partition_key: str | None = None,
    up_to: str | None = None,
    judge_model: str | None = None,
    prompt_version: str | None = None,
    source_table: str | None = None,
    mapping: str | None = None,
) -> Population | None:
    """The population of the most recently scored row matching the given constraints (None: no
    rows). ``source_table`` and ``mapping`` (a column mapping's fingerprint, ``pipeline.mapping``)
    are ignored on output tables written before the column existed."""
    t = tables.scores
    names = key_fields(tables)
    given: dict[str, Any] = {"metric": metric, "judge_model": judge_model, "prompt_version": prompt_version}
    given["source_table"] = source_table if "source_table" in names else None
    given["mapping"] = mapping if "mapping" in names else None
    base = [t.c[name] == value for name, value in given.items() if value is not None and name in names]
    attempts = []
    if partition_key is not None:
        attempts.append(base + [t.c.partition_key == partition_key])
    attempts.append(base + ([t.c.partition_key <= up_to] if up_to else []))
    for where in attempts:
        row = conn.execute(
            sa.select(*(t.c[n] for n in names))
            .where(*where)
            # NULLs last without ``NULLS LAST`` (MySQL/MariaDB have no such clause)
            .order_by(sa.case((t.c.scored_at.is_(None), 1), else_=0), t.c.scored_at.desc(), t.c.partition_key.desc())
            .limit(1)
        ).first()
        if row is not None:
            return _population(names, row)
    if judge_model is not None or prompt_version is not None:
        # named, nothing of it scored: the key of its latest failure (a run whose every row
        # failed is a population too: its failures are its figures), else the parts as named
        f = tables.failures
        if f is not None:
            named = [f.c[n] == v for n, v in given.items() if v is not None and n in names and n in f.c]
            days = [[f.c.partition_key == partition_key]] if partition_key is not None else []
            for where in [*days, [f.c.partition_key <= up_to] if up_to else []]:
                q = sa.select(*(f.c[n] for n in names)).where(*named, *where).order_by(f.c.failed_at.desc())
                row = conn.execute(q.limit(1)).first()
                if row is not None:
                    return _population(names, row)
        return Population.of(metric, judge_model, prompt_version, given["source_table"], given["mapping"])
    return None


def _population(names: list[str], row: Any) -> Population:
    values: dict[str, Any] = {f.name: None for f in dataclasses.fields(ScoringKey) if f.default is dataclasses.MISSING}
    values.update(zip(names, row))
    return Population(ScoringKey(**values))
