"""``ctxprec_batches``: one row per provider batch, written the moment the batch is created.

A batch is *open* while ``finished_at`` is NULL (its results are not written yet): a re-run or a
restarted worker of the same (partition, metric, judge model, prompt version) polls the open
batches instead of submitting again, so no request is paid for twice. ``status`` is the
provider's status (``validating`` ... ``completed`` / ``expired`` / ``failed`` / ``cancelled``).
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import Column, DateTime, Float, Index, Integer, MetaData, PrimaryKeyConstraint, String, Table, select
from sqlalchemy.engine import Engine

from ..warehouse.ddl import create_table
from ..warehouse.engine import read_connection, write_transaction
from ..warehouse.migrate import add_missing_columns
from ..warehouse.scoring_key import ScoringKey
from ..warehouse.upsert import upsert

__all__ = [
    "BATCHES",
    "BatchRecord",
    "batches_table",
    "record_batch",
    "open_batches",
    "update_batch",
    "partition_batches",
    "other_open_batches",
    "list_batches",
    "get_batch",
]

BATCHES = "ctxprec_batches"
_TS = DateTime(timezone=True)
_tables: dict[str | None, Table] = {}
#: the schemas each engine has the table in (by the engine itself, not its ``id()``: an engine
#: made after another was collected may get its id, and then found the table "created" in a
#: database that has none — "no such table: ctxprec_batches")
_created: weakref.WeakKeyDictionary[Engine, set[str | None]] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def _build(schema: str | None) -> Table:
    return Table(
        BATCHES,
        MetaData(schema=schema),
        Column("batch_id", String(255), nullable=False),
        Column("partition_key", String(10), nullable=False),
        Column("metric", String(64), nullable=False),
        Column("judge_model", String(255), nullable=False),
        Column("prompt_version", String(64), nullable=False),
        Column("status", String(32), nullable=False),
        Column("requests", Integer, nullable=False),
        Column("input_file_id", String(255), nullable=False),
        Column("output_file_id", String(255)),
        Column("error_file_id", String(255)),
        Column("submitted_at", _TS, nullable=False),
        Column("finished_at", _TS),
        Column("prompt_tokens", Integer),
        Column("completion_tokens", Integer),
        Column("cost", Float(precision=53)),
        # additions: the run that submitted it, and the provider's counts of answered/failed lines
        Column("run_id", String(255)),
        Column("answered", Integer),
        Column("failed", Integer),
        # the model the batch's requests name, where it is not judge_model (a cascade's stages)
        Column("model", String(255)),
        PrimaryKeyConstraint("batch_id", name=f"{BATCHES}_pk"),
        Index(f"ix_{BATCHES}_partition", "partition_key", "metric", "judge_model", "prompt_version"),
    )


def batches_table(engine: Engine, schema: str | None = None, *, create: bool = True) -> Table:
    """The table (created when missing, once per engine; ``create=False``: only declared, for readers)."""
    with _lock:
        table = _tables.get(schema)
        if table is None:
            table = _tables[schema] = _build(schema)
        if create and schema not in _created.get(engine, ()):
            with write_transaction(engine) as conn:
                create_table(conn, table)
                add_missing_columns(conn, table)  # a table of an older version gains the new columns
            _created.setdefault(engine, set()).add(schema)
    return table


@dataclass
class BatchRecord:
    batch_id: str
    partition_key: str
    metric: str
    judge_model: str
    prompt_version: str
    status: str
    requests: int
    input_file_id: str
    submitted_at: datetime
    output_file_id: str | None = None
    error_file_id: str | None = None
    finished_at: datetime | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost: float | None = None
    run_id: str | None = None
    answered: int | None = None
    failed: int | None = None
    #: the model the requests name (None: ``judge_model``); prices the batch
    model: str | None = None


def record_batch(engine: Engine, table: Table, record: BatchRecord) -> None:
    with write_transaction(engine) as conn:
        upsert(conn, table, [dict(record.__dict__)])


def update_batch(engine: Engine, table: Table, batch_id: str, **values: Any) -> None:
    with write_transaction(engine) as conn:
        conn.execute(table.update().where(table.c.batch_id == batch_id).values(**values))


def _where(table: Table, key: ScoringKey, partition_key: str) -> Any:
    return (
        (table.c.partition_key == partition_key)
        & (table.c.metric == key.metric)
        & (table.c.judge_model == key.judge_model)
        & (table.c.prompt_version == key.prompt_version)
    )


def partition_batches(
    engine: Engine, table: Table, key: ScoringKey, partition_key: str, open_only: bool = False
) -> list[BatchRecord]:
    """The batches of a partition's scoring configuration, oldest first."""
    cond = _where(table, key, partition_key)
    if open_only:
        cond = cond & table.c.finished_at.is_(None)
    return _records(engine, select(table).where(cond).order_by(table.c.submitted_at, table.c.batch_id))


def open_batches(engine: Engine, table: Table, key: ScoringKey, partition_key: str) -> list[BatchRecord]:
    return partition_batches(engine, table, key, partition_key, open_only=True)


def _records(engine: Engine, stmt: Any) -> list[BatchRecord]:
    with read_connection(engine) as conn:
        rows = conn.execute(stmt).mappings()
        out = []
        for r in rows:
            values: dict[str, Any] = {str(k): _utc(v) if isinstance(v, datetime) else v for k, v in r.items()}
            out.append(BatchRecord(**values))
        return out


def other_open_batches(engine: Engine, table: Table, key: ScoringKey, partition_key: str) -> list[BatchRecord]:
    """Open batches of the partition and metric under another judge model or prompt version."""
    c = table.c
    same = (c.judge_model == key.judge_model) & (c.prompt_version == key.prompt_version)
    cond = (c.partition_key == partition_key) & (c.metric == key.metric) & c.finished_at.is_(None) & ~same
    return _records(engine, select(table).where(cond).order_by(c.submitted_at, c.batch_id))


def list_batches(
    engine: Engine, table: Table, *, open_only: bool = False, limit: int = 200, columns: set[str] | None = None
) -> list[BatchRecord]:
    """The most recent batches of every partition and configuration, newest first (``columns``:
    those the stored table has, when it may be an older version's)."""
    stmt = select(*(c for c in table.c if columns is None or c.name in columns))
    if open_only:
        stmt = stmt.where(table.c.finished_at.is_(None))
    return _records(engine, stmt.order_by(table.c.submitted_at.desc(), table.c.batch_id).limit(limit))


def get_batch(engine: Engine, table: Table, batch_id: str) -> BatchRecord | None:
    found = _records(engine, select(table).where(table.c.batch_id == batch_id))
    return found[0] if found else None


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
