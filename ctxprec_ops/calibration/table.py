"""``ctxprec_calibrations``: one row per (judge model, prompt version, label set) — the latest
calibration of that judge configuration against that set of labels (re-running overwrites it).

``label_set`` is the digest of the labels (``LabelSet.digest``), ``labels_name`` the file name.
Every figure has its bootstrap CI in ``<figure>_low`` / ``<figure>_high``.
"""

from __future__ import annotations

import threading
from typing import Any

from sqlalchemy import Column, DateTime, Float, Integer, MetaData, PrimaryKeyConstraint, String, Table, select
from sqlalchemy.engine import Connection, Engine

from ..warehouse.ddl import CreatedTables
from ..warehouse.identifiers import validate_identifier
from ..warehouse.reflect import table_names
from ..warehouse.upsert import upsert

__all__ = ["CALIBRATIONS", "FIGURES", "calibrations_table", "write_calibration", "read_calibrations"]

CALIBRATIONS = "ctxprec_calibrations"
#: the agreement figures, each stored with ``_low`` / ``_high``
FIGURES = ("precision", "recall", "f1", "kappa", "mae", "spearman")
_DOUBLE = Float(precision=53)
_tables: dict[str | None, Table] = {}
_created = CreatedTables()
_lock = threading.Lock()


def calibrations_table(schema: str | None = None) -> Table:
    if schema is not None:
        validate_identifier(schema, "output schema name")
    with _lock:
        t = _tables.get(schema)
        if t is None:
            figure_columns = [Column(f"{f}{s}", _DOUBLE) for f in FIGURES for s in ("", "_low", "_high")]
            t = _tables[schema] = Table(
                CALIBRATIONS,
                MetaData(schema=schema),
                Column("judge_model", String(255), nullable=False),
                Column("prompt_version", String(64), nullable=False),
                Column("label_set", String(64), nullable=False),
                Column("labels_name", String(255)),
                Column("cases", Integer, nullable=False),
                Column("nodes", Integer, nullable=False),
                Column("scored_cases", Integer, nullable=False),
                Column("failed_cases", Integer, nullable=False),
                Column("tp", Integer, nullable=False),
                Column("fp", Integer, nullable=False),
                Column("fn", Integer, nullable=False),
                Column("tn", Integer, nullable=False),
                *figure_columns,
                Column("judge_calls", Integer),
                Column("prompt_tokens", Integer),
                Column("completion_tokens", Integer),
                Column("cost", _DOUBLE),
                Column("calibrated_at", DateTime(timezone=True), nullable=False),
                PrimaryKeyConstraint("judge_model", "prompt_version", "label_set", name=f"{CALIBRATIONS}_pk"),
            )
        return t


def write_calibration(conn: Connection, row: dict[str, Any], schema: str | None = None) -> None:
    """Upsert one calibration row (creates the table the first time)."""
    table = calibrations_table(schema)
    _created.ensure(conn, table)
    upsert(conn, table, [row])


def read_calibrations(engine: Engine, schema: str | None = None) -> list[dict[str, Any]]:
    """Every stored calibration, newest first ([] when the table does not exist)."""
    if CALIBRATIONS not in table_names(engine, schema):
        return []
    t = calibrations_table(schema)
    with engine.connect() as conn:
        rows = conn.execute(select(t).order_by(t.c.calibrated_at.desc(), t.c.judge_model)).mappings().all()
    return [dict(r) for r in rows]
