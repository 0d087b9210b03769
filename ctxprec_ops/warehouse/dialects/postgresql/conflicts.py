"""Inserting a chunk's rows plainly first, ``ON CONFLICT`` only when one of its keys exists.

A plain insert checks each key once, while the index is written; ``INSERT ... ON CONFLICT``
probes the index before the heap insert and confirms the speculative tuple after it: 2,500
judgments into a 100,000-row cache, 8.4 instead of 13.4 ms (bench/README.md). The usual chunk's
rows are new (its ids were not scored, its judgments not cached when it was read), so its insert
runs plainly under a savepoint; one that meets an existing key (a re-scored partition, a
concurrent writer) is rolled back to the savepoint — the rows inserted before the duplicate with
it — and written again with ``ON CONFLICT``, and the next ``CONFLICT_SPELL`` writes of that table
on the connection skip the plain try.
"""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Table
from sqlalchemy.engine import Connection

__all__ = ["CONFLICT_SPELL", "SAVEPOINT", "ROLLBACK", "insert_plain_first"]

#: writes of a table straight with ``ON CONFLICT`` after a plain insert met an existing key
CONFLICT_SPELL = 16
SAVEPOINT = "ctxprec_plain_insert"
#: back to the savepoint, which goes too (the transaction carries on)
ROLLBACK = f"ROLLBACK TO SAVEPOINT {SAVEPOINT}; RELEASE SAVEPOINT {SAVEPOINT}"
_UNIQUE_VIOLATION = "23505"


def _spells(conn: Connection) -> dict[str, int]:
    spells: dict[str, int] = conn.info.setdefault("ctxprec_conflict_spells", {})
    return spells


def insert_plain_first(conn: Connection, table: Table, plain: Callable[[], object], back: Callable[[], object]) -> bool:
    """Run ``plain`` (the insert without ``ON CONFLICT``, between ``SAVEPOINT`` and its release);
    True when it inserted, False — ``back`` run to return to the savepoint — when one of the keys
    exists, and False at once while a recent try on this connection met one. Errors other than
    an existing key are raised."""
    if _skip_plain_insert(conn, table):
        return False
    try:
        plain()
    except conn.dialect.loaded_dbapi.IntegrityError as exc:
        if not _met_existing_key(conn, table, exc):
            raise
        back()
        return False
    return True


def _skip_plain_insert(conn: Connection, table: Table) -> bool:
    """Whether to write ``table`` with ``ON CONFLICT`` straight away (a recent plain insert into
    it on this connection met an existing key); counts the write."""
    spells = _spells(conn)
    if spells.get(table.fullname, 0) > 0:
        spells[table.fullname] -= 1
        return True
    return False


def _met_existing_key(conn: Connection, table: Table, exc: BaseException) -> bool:
    """Whether ``exc`` (raised by a plain insert into ``table``) is a key that exists; if so the
    next ``CONFLICT_SPELL`` writes of the table skip the plain try."""
    if getattr(exc, "sqlstate", None) != _UNIQUE_VIOLATION:
        return False
    _spells(conn)[table.fullname] = CONFLICT_SPELL
    return True
