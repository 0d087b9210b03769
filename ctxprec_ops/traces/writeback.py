"""Verdicts written back to the spans they came from, in Arize Phoenix.

Each scored span gets one **document annotation** per node (name ``ctxprec_relevance`` by
default; ``label`` relevant / irrelevant, ``score`` 1 / 0, the judge's reason as explanation,
``annotator_kind="LLM"`` so Phoenix computes its retrieval metrics — nDCG, precision, MRR, hit
rate — from them) and one **span annotation** with the contextual-precision score (name
``contextual_precision``; ``label`` pass / fail against the run's threshold, the reason as
explanation). Phoenix keys document annotations by (name, span, document position) and span
annotations by (name, span, identifier): sending them again updates them in place, so a re-run
never duplicates one.

A write-back never blocks or fails scoring: it is sent after the scores are committed, in
batches, retried a few times on transient errors (connection errors, HTTP 429 and 5xx) within a
deadline, and its outcome per score row is recorded in ``ctxprec_writebacks`` (``written`` or
``failed`` with the error). ``pending`` finds the partition's score rows not written yet (or
re-scored since), so the next run sends what failed: nothing is lost in the warehouse.
"""

from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Column, DateTime, Index, Integer, MetaData, PrimaryKeyConstraint, String, Table, Text, select
from sqlalchemy.engine import Connection, Engine

from ..secrets import redact
from ..warehouse.ddl import CreatedTables
from ..warehouse.engine import read_connection, write_retrying
from ..warehouse.reflect import table_names
from ..warehouse.schema import OutputTables, readable
from ..warehouse.scoring_key import ScoringKey
from ..warehouse.upsert import upsert
from .phoenix import PhoenixTarget

__all__ = ["WRITEBACKS", "WriteBackResult", "writebacks_table", "write_back", "pending", "write_back_partition"]

log = logging.getLogger("ctxprec_ops.traces")

WRITEBACKS = "ctxprec_writebacks"
#: spans per request (each span: one span annotation and one document annotation per node)
BATCH = 100
#: attempts of one request, and the longest a write-back of one batch may take (seconds)
ATTEMPTS = 3
DEADLINE = 30.0

_tables: dict[str | None, Table] = {}
_created = CreatedTables()
_lock = threading.Lock()


def writebacks_table(schema: str | None = None) -> Table:
    """``ctxprec_writebacks``: one row per (target, score row), keyed by digests so the key fits
    every warehouse's key length (MySQL's 3,072 bytes); the score's key columns are kept as data."""
    with _lock:
        t = _tables.get(schema)
        if t is None:
            t = _tables[schema] = Table(
                WRITEBACKS,
                MetaData(schema=schema),
                Column("target_id", String(16), nullable=False),
                Column("row_id", String(32), nullable=False),
                Column("target", Text, nullable=False),
                Column("partition_key", String(10), nullable=False),
                Column("log_id", Text, nullable=False),
                Column("metric", String(64), nullable=False),
                Column("judge_model", String(255), nullable=False),
                Column("prompt_version", String(64), nullable=False),
                Column("source_table", Text, nullable=False),
                Column("mapping", String(16), nullable=False),
                Column("scored_at", DateTime(timezone=True)),
                Column("written_at", DateTime(timezone=True), nullable=False),
                Column("status", String(16), nullable=False),
                Column("annotations", Integer),
                Column("error", Text),
                PrimaryKeyConstraint("target_id", "row_id", name=f"{WRITEBACKS}_pk"),
                Index(f"ix_{WRITEBACKS}_partition", "target_id", "partition_key"),
            )
        return t


def _digest(*parts: str, size: int) -> str:
    return hashlib.sha256("\x1f".join(parts).encode("utf-8", "surrogatepass")).hexdigest()[:size]


def _row_id(key: ScoringKey, log_id: str) -> str:
    return _digest(log_id, *(value or "" for value in key.values().values()), size=32)


@dataclass
class WriteBackResult:
    """What one write-back did: spans annotated, spans that failed (recorded for the next run)."""

    target: str
    written: int = 0
    failed: int = 0
    annotations: int = 0
    errors: list[str] = field(default_factory=list)
    #: score rows without a span id (a flat table): nothing to annotate
    without_span: int = 0

    def add(self, other: WriteBackResult) -> None:
        self.written += other.written
        self.failed += other.failed
        self.annotations += other.annotations
        self.without_span += other.without_span
        self.errors += [e for e in other.errors if e not in self.errors]

    def summary(self) -> str:
        text = f"write-back to {self.target}: {self.written} span(s) annotated ({self.annotations} annotations)"
        if self.failed:
            text += f", {self.failed} failed and will be sent again by the next run ({self.errors[0]})"
        if self.without_span:
            text += f", {self.without_span} score row(s) without a span id skipped"
        return text


def _verdicts(value: Any) -> list[dict[str, Any]]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return []
    return [v for v in value if isinstance(v, dict)] if isinstance(value, list) else []


def _annotations(target: PhoenixTarget, row: dict[str, Any], threshold: float | None) -> tuple[list, dict]:
    """The document annotations and the span annotation of one score row."""
    span_id = row["span_id"]
    docs = []
    for v in _verdicts(row.get("verdicts")):
        node = v.get("node")
        if not isinstance(node, int) or node < 1:
            continue
        relevant = bool(v.get("relevant"))
        docs.append(
            {
                "name": target.document_annotation,
                "annotator_kind": "LLM",
                "span_id": span_id,
                "document_position": node - 1,
                "result": {
                    "label": "relevant" if relevant else "irrelevant",
                    "score": 1.0 if relevant else 0.0,
                    "explanation": v.get("reason") or None,
                },
                "metadata": {"source": "ctxprec-ops", "judge_model": row.get("judge_model")},
            }
        )
    score = row.get("score")
    passed = row.get("success")
    span = {
        "name": target.span_annotation,
        "annotator_kind": "LLM",
        "span_id": span_id,
        "identifier": "ctxprec-ops",
        "result": {
            "label": None if passed is None else ("pass" if passed else "fail"),
            "score": None if score is None else float(score),
            "explanation": row.get("reason") or None,
        },
        "metadata": {
            "source": "ctxprec-ops",
            "judge_model": row.get("judge_model"),
            "prompt_version": row.get("prompt_version"),
            "threshold": row.get("threshold", threshold),
        },
    }
    return docs, span


def _post(client: Any, path: str, data: list[dict[str, Any]], deadline: float) -> None:
    """POST ``{"data": data}`` with ``sync=true``, retried on transient errors before ``deadline``."""
    import httpx

    last = ""
    for attempt in range(ATTEMPTS):
        if attempt and time.monotonic() + 0.5 * 2**attempt > deadline:
            break
        if attempt:
            time.sleep(0.5 * 2 ** (attempt - 1))
        try:
            response = client.post(path, params={"sync": "true"}, json={"data": data})
        except httpx.HTTPError as exc:
            last = f"{type(exc).__name__}: {redact(str(exc))}"
            continue
        if response.status_code < 300:
            return
        last = f"HTTP {response.status_code}: {redact(response.text)[:200]}"  # cut once redacted
        if response.status_code not in (408, 429) and response.status_code < 500:
            break  # the request is refused as made: sending it again cannot help
    raise RuntimeError(last or "no answer")


def write_back(
    engine: Engine,
    target: PhoenixTarget,
    key: ScoringKey,
    rows: Sequence[dict[str, Any]],
    *,
    threshold: float | None = None,
    schema: str | None = None,
) -> WriteBackResult:
    """Annotate the spans of ``rows`` (score rows: ``log_id``, ``partition_key``, ``span_id``,
    ``verdicts``, ``score``, ``success``, ``reason``, ``scored_at``) and record each row's outcome.
    Never raises for Phoenix's errors: they are counted and recorded."""
    result = WriteBackResult(target.name)
    usable = [r for r in rows if r.get("span_id")]
    result.without_span = len(rows) - len(usable)
    if not usable:
        return result
    records: list[dict[str, Any]] = []
    with target.client() as client:
        for i in range(0, len(usable), BATCH):
            batch = usable[i : i + BATCH]
            docs: list[dict[str, Any]] = []
            spans: list[dict[str, Any]] = []
            for row in batch:
                d, s = _annotations(target, row, threshold)
                docs += d
                spans.append(s)
            deadline = time.monotonic() + DEADLINE
            error = None
            try:
                if docs:
                    _post(client, "/v1/document_annotations", docs, deadline)
                _post(client, "/v1/span_annotations", spans, deadline)
            except Exception as exc:  # recorded and retried by the next run; scoring goes on
                error = f"{type(exc).__name__}: {redact(str(exc))}" if not isinstance(exc, RuntimeError) else str(exc)
            now = datetime.now(UTC)
            for row in batch:
                records.append(_record(target, key, row, now, error, len(_verdicts(row.get("verdicts"))) + 1))
            if error is None:
                result.written += len(batch)
                result.annotations += len(docs) + len(spans)
            else:
                result.failed += len(batch)
                if error not in result.errors:
                    result.errors.append(error)
    _save(engine, records, schema)
    if result.failed:
        log.warning("%s", result.summary())
    return result


def _record(
    target: PhoenixTarget, key: ScoringKey, row: dict[str, Any], now: datetime, error: str | None, n: int
) -> dict[str, Any]:
    return {
        "target_id": _digest(target.name, size=16),
        "row_id": _row_id(key, str(row["log_id"])),
        "target": target.name,
        "partition_key": row["partition_key"],
        "log_id": str(row["log_id"]),
        **{name: value or "" for name, value in key.values().items()},
        "scored_at": row.get("scored_at"),
        "written_at": now,
        "status": "failed" if error else "written",
        "annotations": None if error else n,
        "error": error[:2000] if error else None,
    }


def _ensure(conn: Connection, schema: str | None) -> Table:
    table = writebacks_table(schema)
    _created.ensure(conn, table)
    return table


def _save(engine: Engine, records: list[dict[str, Any]], schema: str | None) -> None:
    if not records:
        return

    def work(conn: Connection) -> None:
        upsert(conn, _ensure(conn, schema), records)

    write_retrying(engine, work)


def _same_instant(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is b
    if a.tzinfo is None:
        a = a.replace(tzinfo=UTC)
    if b.tzinfo is None:
        b = b.replace(tzinfo=UTC)
    return bool(a == b)


def pending(
    engine: Engine, tables: OutputTables, key: ScoringKey, partition_key: str, target: PhoenixTarget
) -> list[dict[str, Any]]:
    """The partition's score rows (this key) not written back to ``target`` yet: never sent, sent
    and failed, or re-scored since they were sent."""
    schema = tables.scores.schema
    with read_connection(engine) as conn:
        scores = readable(conn, tables.scores)
        c = scores.c
        cols = [c.log_id, c.partition_key, c.span_id, c.verdicts, c.score, c.success, c.reason, c.scored_at]
        cols += [c.judge_model, c.prompt_version, c.threshold]
        stmt = select(*cols).where(key.where(scores), c.partition_key == partition_key)
        rows = [dict(r._mapping) for r in conn.execute(stmt)]
        done: dict[str, Any] = {}
        if WRITEBACKS in table_names(conn, schema):
            w = writebacks_table(schema)
            q = select(w.c.log_id, w.c.scored_at).where(
                w.c.target_id == _digest(target.name, size=16),
                w.c.partition_key == partition_key,
                w.c.metric == key.metric,
                w.c.judge_model == key.judge_model,
                w.c.prompt_version == key.prompt_version,
                w.c.source_table == (key.source_table or ""),
                w.c.mapping == (key.mapping or ""),
                w.c.status == "written",
            )
            done = {log_id: at for log_id, at in conn.execute(q)}
    return [r for r in rows if r["log_id"] not in done or not _same_instant(done[r["log_id"]], r["scored_at"])]


def write_back_partition(
    engine: Engine,
    tables: OutputTables,
    key: ScoringKey,
    partition_key: str,
    target: PhoenixTarget,
    *,
    threshold: float | None = None,
) -> WriteBackResult:
    """Send every pending score row of the partition (see ``pending``)."""
    rows = pending(engine, tables, key, partition_key, target)
    return write_back(engine, target, key, rows, threshold=threshold, schema=tables.scores.schema)
