"""The claims table, ``ctxprec_claims`` (in the output schema), and its row operations: generic
SQL that works on every warehouse (no advisory or named locks, no enforced keys needed).

A row is one claim: the ids a holder is judging (16 hex digits of a hash per id), what they are
ids of (``scope``: a hash of the source table, scoring key and partition), the holder's id, run
and process (host, pid, start time), when it was claimed and until when its lease runs. The
holder renews the lease of all its rows every third of the lease (one ``UPDATE``); a claim row
is deleted in the transaction that writes its chunk. Every step is a short transaction of its
own, so no transaction is ever held open while a chunk is judged.

Tables an earlier version created (one row per chunk, keyed by its name) get the new columns
(``ALTER TABLE ... ADD COLUMN``); their rows have no scope and are never read as claims.

Times are computed in Python (UTC) and bound as parameters, so leases are measured against the
hosts' clocks: keep them in sync (the default lease, 10 minutes, leaves room). A family whose
timestamps keep whole seconds (MySQL / MariaDB ``DATETIME``) shortens a lease by up to a second.
"""

from __future__ import annotations

import logging
import threading
import time
import weakref
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from typing import Any

from sqlalchemy import Column, Integer, MetaData, String, Table, delete, insert, select, update
from sqlalchemy.engine import Engine

from ..errors import CtxPrecError
from .dialects import dialect_of
from .engine import read_retrying, write_retrying
from .holders import ClaimHolder, Process
from .reflect import get_columns, has_table
from .types import Double, LongText, Timestamp

__all__ = [
    "CLAIMS_TABLE",
    "DEFAULT_LEASE_SECONDS",
    "LeaseSettingError",
    "ClaimRow",
    "claims_table",
    "ensure_claims_table",
    "lease_seconds",
    "insert_claim",
    "claims_of_others",
    "set_ids",
    "delete_claim",
    "delete_holder",
    "renew",
]

log = logging.getLogger(__name__)

CLAIMS_TABLE = "ctxprec_claims"
#: seconds a claim's lease lasts without renewal (the heartbeat renews it every third of that)
DEFAULT_LEASE_SECONDS = 600.0


class LeaseSettingError(CtxPrecError, ValueError):
    """A ``lease`` argument (``CTXPREC_CLAIM_LEASE_SECONDS`` through the pipeline) is not a positive number."""


def lease_seconds(value: float | str | None = None) -> float:
    """The lease length: ``value`` if given, else ``DEFAULT_LEASE_SECONDS``."""
    if value is None:
        return DEFAULT_LEASE_SECONDS
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise LeaseSettingError(f"lease must be a positive number of seconds, got {value!r}") from None
    if not seconds > 0 or seconds == float("inf"):
        raise LeaseSettingError(f"lease must be a positive number of seconds, got {value!r}")
    return seconds


@cache
def claims_table(schema: str | None = None) -> Table:
    """The ``ctxprec_claims`` table of ``schema`` (None: the connection's default schema)."""
    return Table(
        CLAIMS_TABLE,
        MetaData(schema=schema),
        Column("name", String(64), primary_key=True),
        Column("holder", String(64), nullable=False),
        Column("expires_at", Timestamp(), nullable=False),
        Column("claimed_at", Timestamp(), nullable=True),
        *_added_columns(),
    )


def _added_columns() -> list[Column[Any]]:
    """The columns added to the first version's table (nullable: its rows have none)."""
    return [
        Column("scope", String(64), nullable=True),
        Column("run_id", String(255), nullable=True),
        Column("host", String(255), nullable=True),
        Column("pid", Integer, nullable=True),
        Column("process_start", Double(), nullable=True),
        Column("ids", LongText(), nullable=True),
    ]


#: the schemas whose claims table this process has seen complete, per engine (not per URL text:
#: a database file recreated, or a relative path from another directory, is another database)
_ready: weakref.WeakKeyDictionary[Engine, set[str | None]] = weakref.WeakKeyDictionary()
_ready_lock = threading.Lock()


def ensure_claims_table(engine: Engine, schema: str | None = None) -> Table:
    """Create ``ctxprec_claims`` unless it exists, or add the columns an earlier version's lacks;
    a concurrent creator's table (or column) is accepted."""
    table = claims_table(schema)
    with _ready_lock:
        if schema in _ready.get(engine, ()):
            return table
        for attempt in range(5):
            try:
                _create_or_complete(engine, table, schema)
                break
            except Exception:
                # another process or thread created it (or a column) between the check and the
                # DDL ("already exists", "duplicate column", DuckDB's "Catalog write-write conflict")
                if attempt == 4:
                    raise
                time.sleep(0.05 * (attempt + 1))
        _ready.setdefault(engine, set()).add(schema)
    return table


def _create_or_complete(engine: Engine, table: Table, schema: str | None) -> None:
    with engine.connect() as conn:
        exists = has_table(conn, CLAIMS_TABLE, schema)
        have = {c["name"] for c in get_columns(conn, CLAIMS_TABLE, schema)} if exists else set()
    if not exists:
        with engine.begin() as conn:
            dialect_of(conn).create_table(conn, table, checkfirst=False)
        return
    missing = [c for c in _added_columns() if c.name not in have]
    if not missing:
        return
    with engine.begin() as conn:
        prep = conn.dialect.identifier_preparer
        for column in missing:
            ddl = column.type.compile(dialect=conn.dialect)
            conn.exec_driver_sql(f"ALTER TABLE {prep.format_table(table)} ADD COLUMN {prep.quote(column.name)} {ddl}")
    log.info("%s: added the columns %s", CLAIMS_TABLE, ", ".join(c.name for c in missing))


@dataclass(frozen=True)
class ClaimRow:
    """A claim row of another holder, as read."""

    name: str
    holder: ClaimHolder
    #: the claimed ids' hashes
    ids: frozenset[str]


def now() -> datetime:
    return datetime.now(UTC)


def _aware(at: datetime | None) -> datetime | None:
    """A timestamp read back as UTC (a family without time zones returns naive UTC)."""
    if at is None or at.tzinfo is not None:
        return at
    return at.replace(tzinfo=UTC)


def split_ids(text: str | None) -> frozenset[str]:
    """The id hashes of a claim row's ``ids`` text (16 hex digits each)."""
    if not text:
        return frozenset()
    return frozenset(text[i : i + 16] for i in range(0, len(text), 16))


def insert_claim(engine: Engine, table: Table, row: dict[str, Any]) -> None:
    """Insert one claim row (its own short transaction, retried on a write conflict)."""
    write_retrying(engine, lambda conn: conn.execute(insert(table).values(**row)))


def claims_of_others(engine: Engine, table: Table, scope: str, holder: str) -> list[ClaimRow]:
    """The claim rows of ``scope`` held by anyone but ``holder`` (expired ones included: the
    caller decides)."""
    t = table
    stmt = select(
        t.c.name, t.c.holder, t.c.run_id, t.c.host, t.c.pid, t.c.process_start, t.c.claimed_at, t.c.expires_at, t.c.ids
    ).where(t.c.scope == scope, t.c.holder != holder)
    rows = read_retrying(engine, lambda conn: conn.execute(stmt).all())  # a chunk's read: a dropped connection retried
    out = []
    for name, who, run_id, host, pid, started, claimed, expires, ids in rows:
        process = Process(host, int(pid), started) if host is not None and pid is not None else None
        holder_row = ClaimHolder(who, run_id, process, _aware(claimed), _aware(expires) or now())
        out.append(ClaimRow(name, holder_row, split_ids(ids)))
    return out


def set_ids(engine: Engine, table: Table, name: str, ids: Iterable[str]) -> None:
    """Narrow a claim to ``ids`` (hashes)."""
    text = "".join(ids)
    write_retrying(engine, lambda conn: conn.execute(update(table).where(table.c.name == name).values(ids=text)))


def delete_claim(conn: Any, table: Table, name: str) -> None:
    """Delete one claim row (inside the caller's transaction: the chunk's write)."""
    conn.execute(delete(table).where(table.c.name == name))


def delete_holder(engine: Engine, table: Table, holder: str) -> int:
    """Delete every claim row of ``holder`` (one that ended, or is provably dead)."""
    return int(
        write_retrying(engine, lambda conn: conn.execute(delete(table).where(table.c.holder == holder)).rowcount) or 0
    )


def renew(engine: Engine, table: Table, holder: str, until: datetime) -> int:
    """Extend the leases of ``holder``'s rows to ``until``; returns the rows renewed."""
    stmt = update(table).where(table.c.holder == holder).values(expires_at=until)
    return int(write_retrying(engine, lambda conn: conn.execute(stmt).rowcount) or 0)
