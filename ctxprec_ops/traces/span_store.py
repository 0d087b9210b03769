"""Spans loaded into a spans table of the warehouse (from an OTLP/JSON file or a Phoenix server),
so the run path scores them as any spans table: one place that creates the table with the default
span columns and inserts rows idempotently (a span already there — same trace and span id — is not
inserted again, so loading twice adds nothing)."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Column, DateTime, Index, MetaData, String, Table, Text, select, tuple_
from sqlalchemy.engine import Connection, Engine

from ..warehouse.ddl import create_table
from ..warehouse.engine import write_transaction
from ..warehouse.identifiers import split_table_name
from ..warehouse.reflect import has_table, reflect_table
from .conventions import CONVENTIONS

__all__ = ["SpanLoad", "spans_table", "store_span_rows"]

_BATCH = 500


@dataclass
class SpanLoad:
    """What loading spans did."""

    table: str = ""
    spans: int = 0
    inserted: int = 0
    already_loaded: int = 0
    #: spans without a trace or span id: they cannot be stored as cases (counted, not hidden)
    without_id: int = 0
    traces: int = 0
    days: list[str] = field(default_factory=list)
    #: spans per convention seen (``openinference`` / ``otel-genai``), by their kind attribute
    conventions: dict[str, int] = field(default_factory=dict)

    def detected_format(self) -> str | None:
        """The one convention the spans follow, or None (none or both)."""
        seen = [name for name, n in self.conventions.items() if n]
        return seen[0] if len(seen) == 1 else None

    def summary(self) -> str:
        days = ", ".join(self.days[:5]) + (" ..." if len(self.days) > 5 else "")
        parts = [f"loaded {self.inserted:,} of {self.spans:,} span(s) ({self.traces:,} trace(s)) into {self.table}"]
        if self.already_loaded:
            parts.append(f"{self.already_loaded:,} were already there")
        if self.without_id:
            parts.append(f"{self.without_id:,} had no trace or span id and were not loaded")
        if days:
            parts.append(f"UTC days: {days}")
        return "; ".join(parts)


def spans_table(name: str, schema: str | None = None) -> Table:
    """The spans table a loader creates (the default columns of a span source)."""
    return Table(
        name,
        MetaData(schema=schema),
        Column("trace_id", String(128)),
        Column("span_id", String(128)),
        Column("parent_id", String(128)),
        Column("name", Text),
        Column("start_time", DateTime(timezone=False)),
        Column("attributes", Text),
        Index(f"ix_{name}_span_id", "span_id"),
        Index(f"ix_{name}_trace_id", "trace_id"),
    )


def _target(conn: Connection, name: str, schema: str | None) -> Table:
    if has_table(conn, name, schema):
        return reflect_table(conn, name, schema)
    table = spans_table(name, schema)
    create_table(conn, table, checkfirst=False)
    return table


def store_span_rows(
    engine: Engine, rows: Iterable[dict[str, Any]], table: str = "spans", schema: str | None = None
) -> SpanLoad:
    """Insert spans-table rows (``trace_id``, ``span_id``, ``parent_id``, ``name``, ``start_time``
    naive UTC, ``attributes`` JSON text) into ``table``, created when missing; idempotent. Rows are
    written in batches of 500, each in its own transaction (memory: one batch; a reader of the
    source, e.g. Phoenix over HTTP, never holds the warehouse's write lock)."""
    schema, name = split_table_name(table, schema, "spans table name")
    result = SpanLoad(f"{schema}.{name}" if schema else name)
    kinds: Counter[str] = Counter()
    traces: set[str] = set()
    days: set[str] = set()
    with write_transaction(engine) as conn:
        t = _target(conn, name, schema)
    part: list[dict[str, Any]] = []
    for row in rows:
        result.spans += 1
        if row["trace_id"] is None or row["span_id"] is None:
            result.without_id += 1
            continue
        attrs = json.loads(row["attributes"])
        for conv in CONVENTIONS.values():
            if conv.kind_of(attrs) is not None:
                kinds[conv.name] += 1
        traces.add(row["trace_id"])
        if row["start_time"] is not None:
            days.add(row["start_time"].strftime("%Y-%m-%d"))
        part.append(row)
        if len(part) == _BATCH:
            _insert_new(engine, t, part, result)
            part = []
    if part:
        _insert_new(engine, t, part, result)
    result.traces, result.days, result.conventions = len(traces), sorted(days), dict(kinds)
    return result


def _insert_new(engine: Engine, t: Table, part: list[dict[str, Any]], result: SpanLoad) -> None:
    """Insert the rows of ``part`` the table does not hold yet (same trace and span id)."""
    with write_transaction(engine) as conn:
        pairs = [(r["trace_id"], r["span_id"]) for r in part]
        stmt = select(t.c.trace_id, t.c.span_id).where(tuple_(t.c.trace_id, t.c.span_id).in_(pairs))
        have: set[tuple[Any, Any]] = {(a, b) for a, b in conn.execute(stmt)}
        new = []
        for r in part:
            key = (r["trace_id"], r["span_id"])
            if key in have:
                result.already_loaded += 1
                continue
            have.add(key)  # a span twice in the input is one span
            new.append({c: r[c] for c in r if c in t.c})
        if new:
            conn.execute(t.insert(), new)
            result.inserted += len(new)
