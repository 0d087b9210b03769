"""The generic behaviour of a warehouse family in writes: a chunk's insert-or-update and
insert-if-absent, and the clean-up of failure records whose row now has a score.

A family with a native ``INSERT ... ON CONFLICT`` (or its equivalent) returns it from
``native_insert`` and gets batched executemany writes; one without any gets the generic path:
``UPDATE`` by key and ``INSERT`` of the rows the update did not match (correct for one writer per
key; concurrent writers of one key may see a unique-key error and retry the chunk). Every write
runs inside the caller's transaction.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Table, and_, bindparam, delete, exists, insert, select, update
from sqlalchemy.engine import Connection

from ..write_rows import ColumnRows, batches, decoded, dedupe
from .reads import Reads

__all__ = ["Writes", "generic_upsert", "generic_insert_ignore", "on_conflict", "conflict_action"]


class Writes(Reads):
    def native_insert(self, table: Table, keys: list[str], others: list[str]) -> Any | None:
        """The family's ``INSERT ... ON CONFLICT (keys)`` statement: update ``others`` from the new
        row, or (no ``others``) leave an existing row as it is. None: no native statement."""
        return None

    def upsert(self, conn: Connection, table: Table, rows: Sequence[dict[str, Any]], keys: list[str]) -> int:
        """Insert ``rows`` (the same columns each) or, where the key exists, overwrite the other
        columns; a key given twice is written once, with its last row."""
        others = [c for c in rows[0] if c not in keys]
        ordered = decoded(dedupe(rows, keys))
        stmt = self.native_insert(table, keys, others)
        if stmt is None:
            return generic_upsert(conn, table, ordered, keys, others)
        for batch in batches(ordered):
            conn.execute(stmt, list(batch))
        return len(ordered)

    def insert_ignore(
        self, conn: Connection, table: Table, rows: Sequence[dict[str, Any]] | ColumnRows, keys: list[str]
    ) -> int:
        """Insert the ``rows`` whose key is not present yet; existing rows are left untouched."""
        dicts = rows.as_dicts() if isinstance(rows, ColumnRows) else rows
        ordered = decoded(dedupe(dicts, keys))
        stmt = self.native_insert(table, keys, [])
        if stmt is None:
            return generic_insert_ignore(conn, table, ordered, keys)
        for batch in batches(ordered):
            conn.execute(stmt, list(batch))
        return len(ordered)

    def delete_scored_failures(
        self,
        conn: Connection,
        failures: Table,
        scores: Table,
        equal: Sequence[tuple[str, Any]],
        log_ids: Sequence[str],
    ) -> None:
        """Delete the failure records of ``log_ids`` (those matching ``equal``: column, value) that
        have a score under the same key (the scores' primary key)."""
        f, s = failures, scores
        scored = exists().where(*(s.c[c.name] == f.c[c.name] for c in s.primary_key.columns))
        where = [f.c[name] == value for name, value in equal]
        for cond in self.id_in(conn, f.c.log_id, log_ids):
            conn.execute(delete(f).where(*where, cond, scored))


def generic_upsert(
    conn: Connection, table: Table, rows: Sequence[dict[str, Any]], keys: list[str], others: list[str]
) -> int:
    """Per row: ``UPDATE`` by key, ``INSERT`` when it matched nothing."""
    # bind names must not clash with column names in UPDATE ... SET
    where = and_(*[table.c[k] == bindparam(f"k_{k}") for k in keys])
    upd = update(table).where(where).values({c: bindparam(f"v_{c}") for c in others}) if others else None
    found = select(*[table.c[k] for k in keys]).where(where)
    for row in rows:
        params = {f"k_{k}": row[k] for k in keys}
        if upd is not None:
            params.update({f"v_{c}": row[c] for c in others})
            matched = conn.execute(upd, params).rowcount
        else:
            matched = 1 if conn.execute(found, params).first() is not None else 0
        if not matched:
            conn.execute(insert(table), [row])
    return len(rows)


def generic_insert_ignore(conn: Connection, table: Table, rows: Sequence[dict[str, Any]], keys: list[str]) -> int:
    """Per row: ``INSERT`` unless a row of the key exists."""
    found = select(*[table.c[k] for k in keys]).where(and_(*[table.c[k] == bindparam(f"k_{k}") for k in keys]))
    for row in rows:
        if conn.execute(found, {f"k_{k}": row[k] for k in keys}).first() is None:
            conn.execute(insert(table), [row])
    return len(rows)


def conflict_action(preparer: Any, others: Sequence[str]) -> str:
    """What ``ON CONFLICT`` does, as text (PostgreSQL's and DuckDB's statements written as text):
    set ``others`` from the new row, or (none) ``DO NOTHING``."""
    if not others:
        return "DO NOTHING"
    return "DO UPDATE SET " + ", ".join(f"{preparer.quote(c)} = EXCLUDED.{preparer.quote(c)}" for c in others)


def on_conflict(insert_construct: Any, table: Table, keys: list[str], others: list[str]) -> Any:
    """``INSERT ... ON CONFLICT (keys) DO UPDATE SET others`` (no ``others``: ``DO NOTHING``) for
    a dialect's ``insert`` construct (SQLite's and PostgreSQL's take the same arguments)."""
    stmt = insert_construct(table)
    if others:
        return stmt.on_conflict_do_update(index_elements=keys, set_={c: stmt.excluded[c] for c in others})
    return stmt.on_conflict_do_nothing(index_elements=keys)
