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
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from sqlalchemy.engine import Engine

from ..errors import CtxPrecError
from .attributes import key_values
from .span_store import SpanLoad, store_span_rows

__all__ = ["OtlpFileError", "OtlpLoad", "read_otlp_spans", "load_otlp_json"]

_HEX = re.compile(r"[0-9a-fA-F]+")


class OtlpFileError(CtxPrecError, ValueError):
    """The file is not an OTLP/JSON trace export."""

    error_type = "usage"
    retryable = False


@dataclass
class OtlpLoad(SpanLoad):
    """What loading a file did."""

    path: str = ""


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


def load_otlp_json(engine: Engine, path: str | Path, table: str = "spans", schema: str | None = None) -> OtlpLoad:
    """Load the file's spans into ``table`` (created with the default span columns when missing)."""
    loaded = store_span_rows(engine, read_otlp_spans(path), table, schema)
    return OtlpLoad(path=str(path), **vars(loaded))
