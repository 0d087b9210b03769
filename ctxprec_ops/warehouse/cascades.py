"""``ctxprec_cascades``: the thresholds judge cascades chose for a target agreement, with the
figures of the calibration sample each rests on (one row per calibration, never overwritten).

A cascade with a target agreement reuses the latest row of its configuration — metric, cheap and
strong model, prompt version, how the cheap confidence is taken, target — until one of them
changes or a run asks to recalibrate (``pipeline/cascade.py``); ``ctxprec_runs`` records the
threshold each run used and the agreement it was calibrated to.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Column, Integer, MetaData, PrimaryKeyConstraint, String, Table, Text, select
from sqlalchemy.engine import Connection, Engine

from .ddl import CreatedTables
from .engine import read_connection
from .identifiers import validate_identifier
from .reflect import table_names
from .types import Double, KeyText, ModelName, Timestamp
from .upsert import upsert

__all__ = ["CASCADES", "cascades_table", "latest_calibration", "read_cascades", "write_cascade"]

CASCADES = "ctxprec_cascades"
#: the fields that identify a cascade configuration: a calibration is reused only by its own
IDENTITY = ("metric", "cheap_model", "strong_model", "prompt_version", "confidence", "target_agreement")
_tables: dict[str | None, Table] = {}
_created = CreatedTables()
_lock = threading.Lock()


def cascades_table(schema: str | None = None) -> Table:
    if schema is not None:
        validate_identifier(schema, "output schema name")
    with _lock:
        t = _tables.get(schema)
        if t is None:
            t = _tables[schema] = Table(
                CASCADES,
                MetaData(schema=schema),
                Column("calibration_id", KeyText(64), nullable=False),
                Column("metric", KeyText(64), nullable=False),
                Column("cheap_model", ModelName(), nullable=False),
                Column("strong_model", ModelName(), nullable=False),
                Column("prompt_version", KeyText(64), nullable=False),
                # how the cheap confidence is taken: logprobs, or samples (the prompt version says how many)
                Column("confidence", String(16), nullable=False),
                Column("target_agreement", Double(), nullable=False),
                # the chosen threshold C: nodes whose cheap confidence is below it are escalated
                Column("escalate_below", Double(), nullable=False),
                # the sample: its size, where it came from and what it was compared with
                Column("nodes", Integer, nullable=False),
                Column("source_table", KeyText()),
                Column("partition_key", String(10)),
                Column("reference", String(128), nullable=False),
                Column("agreement", Double(), nullable=False),
                Column("agreement_low", Double(), nullable=False),
                Column("cheap_agreement", Double(), nullable=False),
                Column("escalation_rate", Double(), nullable=False),
                Column("cheap_cost", Double()),
                Column("strong_cost", Double()),
                Column("method", Text),
                Column("run_id", KeyText(64)),
                Column("calibrated_at", Timestamp(), nullable=False),
                PrimaryKeyConstraint("calibration_id", name=f"{CASCADES}_pk"),
            )
        return t


def write_cascade(conn: Connection, row: dict[str, Any], schema: str | None = None) -> None:
    """Record one calibration (creates the table the first time); ``calibrated_at`` defaults to now."""
    table = cascades_table(schema)
    _created.ensure(conn, table)
    upsert(conn, table, [{"calibrated_at": datetime.now(UTC), **row}])


def latest_calibration(engine: Engine, identity: dict[str, Any], schema: str | None = None) -> dict[str, Any] | None:
    """The newest calibration of the configuration ``identity`` (the ``IDENTITY`` fields), or None."""
    if CASCADES not in table_names(engine, schema):
        return None
    t = cascades_table(schema)
    where = [t.c[name] == identity[name] for name in IDENTITY]
    with read_connection(engine) as conn:
        row = conn.execute(select(t).where(*where).order_by(t.c.calibrated_at.desc()).limit(1)).mappings().first()
    return dict(row) if row is not None else None


def read_cascades(engine: Engine, schema: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    """The stored calibrations, newest first ([] when there are none)."""
    if CASCADES not in table_names(engine, schema):
        return []
    t = cascades_table(schema)
    with read_connection(engine) as conn:
        rows = conn.execute(select(t).order_by(t.c.calibrated_at.desc()).limit(limit)).mappings().all()
    return [dict(r) for r in rows]
