"""``ctxprec_audits``: one row per judge audit (``ctxprec audit position``), kept as history.

Key ``audit_id``. The row names what was audited (``kind`` = ``position``, partition, metric,
input table, judge model, prompt version, seed, rows asked for) and what was found (``cases``,
``nodes``, ``flipped``, ``flip_rate``, ``score_shift`` with ``ci_low`` / ``ci_high`` and
``p_value``, ``by_rank`` as JSON), with what it cost. ``ctxprec report`` shows the latest audit
of each partition of its window.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Column, DateTime, Float, Integer, MetaData, PrimaryKeyConstraint, String, Table
from sqlalchemy.engine import Engine

from ..warehouse.ddl import CreatedTables
from ..warehouse.engine import read_connection, write_transaction
from ..warehouse.identifiers import validate_identifier
from ..warehouse.reflect import table_names
from ..warehouse.types import KeyText
from ..warehouse.upsert import upsert
from .audit import PositionAudit

__all__ = ["AUDITS", "audits_table", "write_audit", "read_audits"]

AUDITS = "ctxprec_audits"
_DOUBLE = Float(precision=53)
_tables: dict[str | None, Table] = {}
_created = CreatedTables()
_lock = threading.Lock()


def audits_table(schema: str | None = None) -> Table:
    if schema is not None:
        validate_identifier(schema, "output schema name")
    with _lock:
        t = _tables.get(schema)
        if t is None:
            t = _tables[schema] = Table(
                AUDITS,
                MetaData(schema=schema),
                Column("audit_id", String(64), nullable=False),
                Column("kind", String(32), nullable=False),
                Column("partition_key", String(10), nullable=False),
                Column("metric", String(64), nullable=False),
                Column("source_table", KeyText()),
                Column("judge_model", String(255), nullable=False),
                Column("prompt_version", String(64), nullable=False),
                Column("seed", Integer),
                Column("requested", Integer),
                Column("cases", Integer, nullable=False),
                Column("nodes", Integer, nullable=False),
                Column("flipped", Integer, nullable=False),
                Column("flip_rate", _DOUBLE),
                Column("score_shift", _DOUBLE),
                Column("ci_low", _DOUBLE),
                Column("ci_high", _DOUBLE),
                Column("p_value", _DOUBLE),
                Column("failed_cases", Integer),
                Column("skipped_cases", Integer),
                Column("judge_calls", Integer),
                Column("prompt_tokens", Integer),
                Column("completion_tokens", Integer),
                Column("cost", _DOUBLE),
                Column("by_rank", sa.Text()),
                Column("audited_at", DateTime(timezone=True), nullable=False),
                PrimaryKeyConstraint("audit_id", name=f"{AUDITS}_pk"),
            )
        return t


def write_audit(engine: Engine, audit: PositionAudit, schema: str | None = None) -> None:
    """Store one audit (creates the table the first time)."""
    import json

    table = audits_table(schema)
    row: dict[str, Any] = {
        "audit_id": audit.audit_id,
        "kind": "position",
        "partition_key": audit.partition_key,
        "metric": audit.metric,
        "source_table": audit.source_table,
        "judge_model": audit.judge_model,
        "prompt_version": audit.prompt_version,
        "seed": audit.seed,
        "requested": audit.requested,
        "cases": audit.cases,
        "nodes": audit.nodes,
        "flipped": audit.flipped,
        "flip_rate": audit.flip_rate,
        "score_shift": audit.score_shift,
        "ci_low": audit.ci_low,
        "ci_high": audit.ci_high,
        "p_value": audit.p_value,
        "failed_cases": len(audit.failed),
        "skipped_cases": len(audit.skipped),
        "judge_calls": audit.judge_calls,
        "prompt_tokens": audit.prompt_tokens,
        "completion_tokens": audit.completion_tokens,
        "cost": audit.cost,
        "by_rank": json.dumps(audit.by_rank),
        "audited_at": audit.audited_at,
    }
    with write_transaction(engine) as conn:
        _created.ensure(conn, table)
        upsert(conn, table, [row])


def read_audits(
    engine: Engine,
    *,
    partitions: Sequence[str] | None = None,
    judge_model: str | None = None,
    metric: str | None = None,
    schema: str | None = None,
) -> list[dict[str, Any]]:
    """Stored audits, newest first ([] when the table does not exist), optionally of some
    partitions / one judge model / one metric."""
    import json

    if AUDITS not in table_names(engine, schema):
        return []
    t = audits_table(schema)
    where: list[sa.ColumnElement[bool]] = []
    if partitions is not None:
        where.append(t.c.partition_key.in_(list(partitions)))
    if judge_model is not None:
        where.append(t.c.judge_model == judge_model)
    if metric is not None:
        where.append(t.c.metric == metric)
    with read_connection(engine) as conn:
        rows = conn.execute(sa.select(t).where(*where).order_by(t.c.audited_at.desc())).mappings().all()
    out = []
    for r in rows:
        d = dict(r)
        try:
            d["by_rank"] = json.loads(d["by_rank"]) if d.get("by_rank") else []
        except ValueError:
            d["by_rank"] = []
        out.append(d)
    return out
