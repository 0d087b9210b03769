"""Reading ``ctxprec_segments`` for monitoring: which rows carry a segment column, and the
moments of their scores per (partition, segment value), aggregated in SQL.

A row counts for segment column ``COL`` only when its ``segment_columns`` lists ``COL`` (a
``seg_COL`` value of a row scored without it is "not recorded", never the ``(null)`` segment).

``compared_columns`` (for ``compare``) also takes a column that was not recorded at scoring time
from the input table itself, after the fact: the score rows are joined with the table their
``source_table`` names on ``log_id`` = the table's id column (as text), and the column's value is
read as text (NULL stays NULL: the ``(null)`` value), as a recorded segment would be — except
that it is today's value, not the value at scoring time. Text columns compare exactly as
recorded ones; other types as the database writes them as text. Score rows whose input row is
gone are left out. A spans source (traces) has no such columns: its values live in the span's
attributes, so there the column must be recorded (``--segment``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import NoSuchTableError

from ..errors import CtxPrecError
from ..warehouse.schema import existing_output_tables
from ..warehouse.segments import NULL_LABEL, existing_segments_table, segment_column
from .history import moments_by
from .population import Population
from .stats import Moments

__all__ = [
    "SegmentError",
    "SegmentSource",
    "segment_source",
    "compared_columns",
    "value_filter",
    "label",
    "segment_moments",
    "partition_segment_means",
]


class SegmentError(CtxPrecError, LookupError):
    """A ``--by``/``--pair-on``/``--within`` column no score row carries, or a value with no rows."""

    error_type = "segment"
    retryable = False


def label(value: str | None) -> str:
    """How a segment value is shown: NULL is ``(null)``; a value that reads as that label, or as a
    quoted value, is shown between single quotes (``'(null)'``), so no two values look alike.
    ``parse_value`` reads every label back to its value."""
    if value is None:
        return NULL_LABEL
    return f"'{value}'" if _needs_quotes(value) else value


def _needs_quotes(value: str) -> bool:
    return value == NULL_LABEL or (value.startswith("'") and value.endswith("'") and len(value) >= 2)


def value_filter(col: sa.ColumnElement[Any], value: str | None) -> sa.ColumnElement[bool]:
    """``col = value``; None (the ``(null)`` segment) is ``col IS NULL``."""
    return col.is_(None) if value is None else col == value


def parse_value(text: str) -> str | None:
    """A value given on the command line, as ``label`` shows it: ``(null)`` selects the NULL
    segment, ``'(null)'`` the text ``(null)``; any other text is the value itself."""
    if text == NULL_LABEL:
        return None
    if len(text) >= 2 and text.startswith("'") and text.endswith("'") and _needs_quotes(text[1:-1]):
        return text[1:-1]
    return text


class SegmentSource:
    """The segments table of a warehouse with the columns a reader asks for, checked (or, from
    ``compared_columns``, the score rows with the columns read from their input table too)."""

    def __init__(self, table: sa.FromClause, names: Sequence[str], from_source: Sequence[str] = ()) -> None:
        self.table = table
        self.names = list(names)
        #: the columns read from the input table (not recorded: no ``segment_columns`` filter)
        self.from_source = list(from_source)

    def col(self, name: str) -> sa.ColumnElement[Any]:
        return self.table.c[segment_column(name)]

    def recorded(self, *names: str) -> list[sa.ColumnElement[bool]]:
        """The rows scored with every one of ``names`` among their segment columns: one ``LIKE``
        (``segment_columns`` is the sorted JSON list, so the names appear in sorted order)."""
        names = tuple(n for n in names if n not in self.from_source)
        if not names:
            return []

        def esc(name: str) -> str:
            return name.replace("/", "//").replace("%", "/%").replace("_", "/_")

        pattern = "%" + "%".join(f'"{esc(n)}"' for n in sorted(set(names))) + "%"
        return [self.table.c.segment_columns.like(pattern, escape="/")]


def segment_source(
    conn: Connection, population: Population | None, *names: str, schema: str | None = None
) -> SegmentSource:
    """The segments table, refusing with a clear ``SegmentError`` a column no row carries."""
    table, have = existing_segments_table(conn, schema)
    missing = [n for n in names if n not in have]
    if table is None or missing:
        recorded = f"segment columns recorded: {', '.join(have)}" if have else "no score row carries segments yet"
        what = ", ".join(repr(n) for n in (missing or names))
        raise SegmentError(
            f"no score rows carry segment column {what} ({recorded}); score with "
            f"--segment {(missing or names)[0]} (or CTXPREC_SEGMENTS) to record it"
        )
    if population is None:
        raise SegmentError("nothing scored for this metric yet: no segments to read")
    return SegmentSource(table, have)


def compared_columns(
    conn: Connection, population: Population | None, *names: str, id_column: str = "id", schema: str | None = None
) -> SegmentSource:
    """The rows ``compare`` reads, with segment columns ``names``: those recorded at scoring time
    from ``ctxprec_segments``, the others from the population's input table (see the module's
    notes); a column in neither is a ``SegmentError`` naming both places."""
    table, have = existing_segments_table(conn, schema)
    missing = [n for n in names if n not in have]
    if not missing:
        return segment_source(conn, population, *names, schema=schema)
    if population is None:
        raise SegmentError("nothing scored for this metric yet: no segments to read")
    source, columns = _input_columns(conn, population, missing, id_column)
    recorded = [n for n in names if n not in missing]
    if recorded:  # rows scored with those segments, their values as recorded
        assert table is not None
        base: sa.FromClause = table
    else:  # every score row of the population
        base = existing_output_tables(conn.engine, schema).scores
    key = _as_text(source.c[columns[id_column]])
    extra = [_as_text(source.c[columns[n]]).label(segment_column(n)) for n in missing]
    rows = sa.select(*base.c, *extra).select_from(base.join(source, base.c.log_id == key)).subquery("ctxprec_compared")
    return SegmentSource(rows, have + missing, from_source=missing)


def _input_columns(
    conn: Connection, population: Population, names: Sequence[str], id_column: str
) -> tuple[sa.Table, dict[str, str]]:
    """The population's input table and its column for each of ``names`` and ``id_column``."""
    from ..traces.options import RERANK_SUFFIX
    from ..warehouse.identifiers import split_table_name
    from ..warehouse.reflect import reflect_table

    what = ", ".join(repr(n) for n in names)
    recorded = f"score with --segment {names[0]} (or CTXPREC_SEGMENTS) to record it"
    name = population.source_table
    if not name:
        raise SegmentError(
            f"no score rows carry segment column {what}, and the scores do not name their input table; {recorded}"
        )
    try:
        schema, table = split_table_name(name.removesuffix(RERANK_SUFFIX), None, "source table name")
        source = reflect_table(conn, table, schema)
    except (CtxPrecError, NoSuchTableError):
        raise SegmentError(
            f"no score rows carry segment column {what}, and their input table {name} cannot be read; {recorded}"
        ) from None
    by_lower = {c.name.lower(): c.name for c in source.columns}
    if id_column.lower() not in by_lower and {"span_id", "attributes"} <= set(by_lower):
        raise SegmentError(
            f"no score rows carry segment column {what}, and {name} is a spans table (its values are span "
            f"attributes, not columns); {recorded}"
        )
    found = {n: source.c[n].name if n in source.c else by_lower.get(n.lower()) for n in [id_column, *names]}
    absent = [n for n, col in found.items() if col is None]
    if absent:
        raise SegmentError(
            f"no score rows carry segment column {', '.join(repr(n) for n in absent)} and {name} has no such "
            f"column (its columns: {', '.join(c.name for c in source.columns)}); {recorded}"
        )
    return source, {n: str(col) for n, col in found.items()}


def _as_text(col: sa.ColumnElement[Any]) -> sa.ColumnElement[Any]:
    """A column's value as segment text: text as it is, booleans ``true``/``false``, NULL kept,
    anything else as the database writes it as text."""
    if isinstance(col.type, sa.String):
        return col
    if isinstance(col.type, sa.Boolean):
        return sa.case((col.is_(None), sa.null()), (col, sa.literal("true")), else_=sa.literal("false"))
    return sa.cast(col, sa.String)


def segment_moments(
    conn: Connection, src: SegmentSource, population: Population, by: str, partitions: Sequence[str]
) -> dict[tuple[str, str | None], Moments]:
    """``{(partition, value): Moments}`` of the population's scores in ``partitions`` per value of
    segment column ``by`` (one ``GROUP BY``)."""
    if not partitions:
        return {}
    t = src.table
    where = [population.where(t), t.c.partition_key.in_(list(partitions)), *src.recorded(by)]
    rows = moments_by(conn, t, where, [t.c.partition_key, src.col(by)])
    return {(str(k[0]), k[1]): m for k, m in rows}


def partition_segment_means(
    engine: Engine, population: Population, partition_key: str, names: Sequence[str], *, limit: int = 50
) -> dict[str, list[dict[str, Any]]]:
    """``{column: [{"value", "label", "rows", "mean"}, ...]}`` of one partition, the largest segments
    first (at most ``limit`` per column): the per-segment means the orchestrators show."""
    out: dict[str, list[dict[str, Any]]] = {}
    if not names:
        return out
    with engine.connect() as conn:
        table, have = existing_segments_table(conn)
        if table is None:
            return out
        src = SegmentSource(table, have)
        for name in names:
            if name not in have:
                continue
            got = segment_moments(conn, src, population, name, [partition_key])
            items = sorted(got.items(), key=lambda kv: (-kv[1].n, label(kv[0][1])))[:limit]
            out[name] = [{"value": v, "label": label(v), "rows": m.n, "mean": m.mean} for (_pk, v), m in items]
    return out
