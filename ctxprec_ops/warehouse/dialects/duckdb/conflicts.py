"""DuckDB: a chunk's rows inserted plainly first, ``ON CONFLICT`` only once a key has existed.

``INSERT ... ON CONFLICT`` into a table with a primary key (an ART index) costs about twice a
plain insert (a 1,000-row scores chunk: ~10 against ~4 ms; bench/README.md), and the usual
chunk's rows are new (its ids were not scored, its judgments not cached when it was read). DuckDB
has no savepoints: a plain insert that meets an existing key aborts the whole transaction. So a
write tries it only where the transaction is run again when given up (``engine.write_retrying``
sets ``RETRIED_OPTION``): the key's ``Duplicate key`` error becomes ``RunAgain``, the work runs
again at once with ``ON CONFLICT``, and so do the next ``CONFLICT_SPELL`` writes of that table in
this process (a re-scored partition gives up one transaction in every 17 writes of a table).
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Table
from sqlalchemy.engine import Connection

from ...write_rows import ColumnRows
from ..connections import RETRIED_OPTION, RunAgain
from .frames import frame_upsert

__all__ = ["CONFLICT_SPELL", "duplicate_key", "upsert_plain_first", "forget_spells"]

#: writes of a table straight with ``ON CONFLICT`` after a plain insert met an existing key
CONFLICT_SPELL = 16

_lock = threading.Lock()
#: (database, table) -> writes left to go straight to ``ON CONFLICT``
_spells: dict[tuple[str, str], int] = {}


def duplicate_key(exc: BaseException) -> bool:
    """Whether ``exc`` (or the driver's error it wraps) is DuckDB's duplicate primary key."""
    orig = getattr(exc, "orig", None) or exc
    return type(orig).__name__ == "ConstraintException" and "Duplicate key" in str(orig)


def upsert_plain_first(
    conn: Connection,
    table: Table,
    rows: Sequence[dict[str, Any]] | ColumnRows,
    keys: list[str],
    others: list[str] | None,
) -> int:
    """``frame_upsert``, plainly where the transaction may be given up (``RunAgain`` when one of the
    keys exists) and no recent write of the table met a key; with ``ON CONFLICT`` otherwise."""
    plain = _plain(conn, table)
    try:
        return frame_upsert(conn, table, rows, keys, others, plain=plain)
    except Exception as exc:
        if not (plain and duplicate_key(exc)):
            raise
        with _lock:  # the write run again, then the next CONFLICT_SPELL ones
            _spells[_where(conn, table)] = CONFLICT_SPELL + 1
        raise RunAgain(f"{table.name}: a key of the rows exists; written with ON CONFLICT next") from exc


def forget_spells() -> None:
    """Every table back to plain inserts first (tests)."""
    with _lock:
        _spells.clear()


def _where(conn: Connection, table: Table) -> tuple[str, str]:
    return (conn.engine.url.database or "", table.fullname)


def _plain(conn: Connection, table: Table) -> bool:
    """Whether to insert plainly: the transaction is run again when given up, and no spell is on
    (a write under a spell counts it down)."""
    if not conn.get_execution_options().get(RETRIED_OPTION):
        return False
    where = _where(conn, table)
    with _lock:
        left = _spells.get(where, 0)
        if left > 0:
            _spells[where] = left - 1
            return False
    return True
