"""An OTLP/JSON export (``ExportTraceServiceRequest`` objects: ``resourceSpans`` -> ``scopeSpans`` ->
``spans``) loaded into a spans table, so ``ctxprec score --otlp-json FILE`` scores it through the
same run path as a warehouse export.

Read: one JSON object, or JSON lines (one object per line, as the OpenTelemetry Collector's file
exporter writes); ids in the OTLP/JSON hex form or the protobuf JSON mapping's base64 form;
``startTimeUnixNano`` as a string or a number; attributes as ``KeyValue`` lists (stored as one flat
JSON object). Loading is idempotent: a span already in the table (same trace and span id) is not
inserted again, so loading a file twice does not turn its spans into duplicates.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy import Column, DateTime, Index, MetaData, String, Table, Text, select, tuple_
from sqlalchemy.engine import Connection, Engine

from ..errors import CtxPrecError
from ..warehouse.ddl import create_table
from ..warehouse.engine import write_transaction
from ..warehouse.identifiers import split_table_name
from ..warehouse.reflect import has_table, reflect_table
from .attributes import key_values
from .conventions import CONVENTIONS

__all__ = ["OtlpFileError", "OtlpLoad", "read_otlp_spans", "load_otlp_json", "spans_table"]

_HEX = re.compile(r"[0-9a-fA-F]+")
_BATCH = 500


class OtlpFileError(CtxPrecError, ValueError):
    """The file is not an OTLP/JSON trace export."""

    error_type = "usage"
    retryable = False


@dataclass
class OtlpLoad:
    """What loading a file did."""

    path: str
    table: str
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
        """The one convention the file's spans follow, or None (none or both)."""
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


def _hex_id(value: Any, nbytes: int) -> str | None:
    """An OTLP id as lowercase hex: hex text as it is; the protobuf JSON mapping's base64 decoded."""
    if value is None or value == "":
        return None
    text = str(value)
    if len(text) == 2 * nbytes and _HEX.fullmatch(text):
        return text.lower()
    try:
        raw = base64.b64decode(text, validate=True)
    except (binascii.Error, ValueError):
        return text
    return raw.hex() if len(raw) == nbytes else text


def _start(value: Any) -> datetime | None:
    try:
        nanos = int(value)
    except (TypeError, ValueError):
        return None
    seconds, rest = divmod(nanos, 1_000_000_000)
    return datetime.fromtimestamp(seconds, UTC).replace(microsecond=rest // 1000, tzinfo=None)


def _documents(text: str, path: str) -> Iterator[Any]:
    stripped = text.strip()
    if not stripped:
        raise OtlpFileError(f"{path} is empty")
    try:
        yield json.loads(stripped)
        return
    except json.JSONDecodeError:
        pass
    for n, line in enumerate(text.splitlines(), 1):  # JSON lines
        if line.strip():
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise OtlpFileError(f"{path} line {n} is not JSON ({exc.msg} at column {exc.colno})") from None


def read_otlp_spans(path: str | Path) -> Iterator[dict[str, Any]]:
    """The spans of an OTLP/JSON file as spans-table rows (``trace_id``, ``span_id``,
    ``parent_id``, ``name``, ``start_time`` naive UTC, ``attributes`` JSON text)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise OtlpFileError(f"cannot read {p}: {exc}") from None
    found = False
    for doc in _documents(text, str(p)):
        if not isinstance(doc, dict) or "resourceSpans" not in doc:
            raise OtlpFileError(f"{p} is not an OTLP/JSON trace export (no resourceSpans)")
        found = True
        for rs in doc.get("resourceSpans") or []:
            for ss in rs.get("scopeSpans") or rs.get("instrumentationLibrarySpans") or []:
                for sp in ss.get("spans") or []:
                    yield {
                        "trace_id": _hex_id(sp.get("traceId"), 16),
                        "span_id": _hex_id(sp.get("spanId"), 8),
                        "parent_id": _hex_id(sp.get("parentSpanId"), 8),
                        "name": sp.get("name"),
                        "start_time": _start(sp.get("startTimeUnixNano")),
                        "attributes": json.dumps(key_values(sp.get("attributes") or [])),
                    }
    if not found:
        raise OtlpFileError(f"{p} holds no OTLP/JSON object")


def spans_table(name: str, schema: str | None = None) -> Table:
    """The spans table ``load_otlp_json`` creates (the default columns of a span source)."""
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


def load_otlp_json(engine: Engine, path: str | Path, table: str = "spans", schema: str | None = None) -> OtlpLoad:
    """Load the file's spans into ``table`` (created with the default span columns when missing)."""
    schema, name = split_table_name(table, schema, "spans table name")
    result = OtlpLoad(str(path), f"{schema}.{name}" if schema else name)
    kinds: Counter[str] = Counter()
    traces: set[str] = set()
    days: set[str] = set()
    rows: list[dict[str, Any]] = []
    for row in read_otlp_spans(path):
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
        rows.append(row)
    with write_transaction(engine) as conn:
        t = _target(conn, name, schema)
        for i in range(0, len(rows), _BATCH):
            part = rows[i : i + _BATCH]
            pairs = [(r["trace_id"], r["span_id"]) for r in part]
            stmt = select(t.c.trace_id, t.c.span_id).where(tuple_(t.c.trace_id, t.c.span_id).in_(pairs))
            have: set[tuple[Any, Any]] = {(a, b) for a, b in conn.execute(stmt)}
            new = []
            for r in part:
                key = (r["trace_id"], r["span_id"])
                if key in have:
                    result.already_loaded += 1
                    continue
                have.add(key)  # a span twice in the file is one span
                new.append({c: r[c] for c in r if c in t.c})
            if new:
                conn.execute(t.insert(), new)
                result.inserted += len(new)
    result.traces, result.days, result.conventions = len(traces), sorted(days), dict(kinds)
    return result
