"""MySQL / MariaDB: ``INSERT ... ON DUPLICATE KEY UPDATE`` as multi-row literal statements through
PyMySQL (``mysql_values``; executemany batches through another driver), ``IN`` lists of up to
5,000 values (written out as literals through PyMySQL: ``mysql_lookups``), a named lock
(``GET_LOCK``) as a claim holder's sign of life, READ COMMITTED, sessions in UTC, key text compared
byte for byte (binary collations)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import Table, func, select, text
from sqlalchemy.dialects.mysql import LONGTEXT, TEXT, VARCHAR, insert
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.types import TypeEngine

from ..holders import ClaimHolder
from ..types import stored_type
from ..write_rows import ColumnRows, dedupe
from . import mysql_lookups
from .base import Dialect
from .mysql_values import literal_insert, pymysql_connection
from .reads import in_parts

__all__ = ["MySQLDialect"]

#: the character set and binary collation of key text (and of machine-made ASCII key text)
_TEXT = ("utf8mb4", "utf8mb4_bin")
_ASCII = ("ascii", "ascii_bin")


def _holder_lock(holder: str) -> str:
    """The named lock of a claim holder (well under the 64-character limit)."""
    return f"ctxprec:holder:{holder[:32]}"


class MySQLDialect(Dialect):
    names = ("mysql", "mariadb")
    family = "MySQL / MariaDB"
    write_path = (
        "`INSERT … ON DUPLICATE KEY UPDATE`, a chunk's rows as multi-row literal statements of up to "
        "1 MiB through PyMySQL (else one executemany per 500 rows); insert-if-absent updates a key "
        "column to itself"
    )
    native_upsert = True
    claims = "named_lock"
    id_binding = "expanding_long"
    # the server's (or the session's) time zone would otherwise shift every TIMESTAMP column, and
    # the partition bounds compared with it, away from UTC ('+00:00' needs no time zone tables)
    utc_session = ("SET time_zone = '+00:00'",)
    # InnoDB's default REPEATABLE READ takes gap locks on every searched range: two runs writing
    # their own run rows and chunks then deadlock on each other's gaps. READ COMMITTED
    # (PostgreSQL's default, which the write path is built for) takes none.
    engine_options = {"isolation_level": "READ COMMITTED"}

    @contextmanager
    def claim_liveness(self, engine: Engine, holder: str) -> Iterator[None]:
        """The server's named lock (``GET_LOCK``) named by the holder, held by a session of its
        own for as long as the holder runs (like PostgreSQL's advisory lock): a killed process's
        session ends, and its lock with it."""
        lock = _holder_lock(holder)
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(select(func.get_lock(lock, 0)))
            try:
                yield
            finally:
                conn.execute(select(func.release_lock(lock)))

    def claim_holder_gone(self, engine: Engine, holder: ClaimHolder) -> str | None:
        """Gone when its named lock is free (``IS_FREE_LOCK``): its session has ended."""
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            free = conn.execute(select(func.is_free_lock(_holder_lock(holder.holder)))).scalar()
        return "its MySQL session has ended" if free == 1 else None

    # --- tables: utf8mb4 counts 4 bytes a character and InnoDB caps a key at 3,072 bytes ---------
    # ctxprec_scores' key: log_id 255 + source_table 255 + judge_model 112 + prompt_version 64 +
    # metric 64 (x 4 bytes) + mapping 16 (ASCII) = 3,016 bytes; ctxprec_segments' adds the
    # partition key, 10 ASCII bytes: 3,026 (docs/warehouses.md)

    def key_text_type(self, length: int | None) -> TypeEngine[Any]:
        charset, collation = _TEXT
        return VARCHAR(255 if length is None else length, charset=charset, collation=collation)

    def exact_text_type(self) -> TypeEngine[Any]:
        charset, collation = _TEXT
        return TEXT(charset=charset, collation=collation)

    def long_text_type(self) -> TypeEngine[Any]:
        charset, collation = _ASCII
        return LONGTEXT(charset=charset, collation=collation)  # TEXT holds 64 KiB

    def key_code_type(self, length: int) -> TypeEngine[Any]:
        charset, collation = _ASCII
        return VARCHAR(length, charset=charset, collation=collation)

    def model_name_type(self) -> TypeEngine[Any]:
        charset, collation = _TEXT
        return VARCHAR(112, charset=charset, collation=collation)

    def migrate_table(self, conn: Connection, table: Table) -> list[str]:
        """Key text of a table an older version created compares as the server's default
        collation does (case- and accent-insensitive: ``abc``, ``ABC`` and ``Abc`` were one key):
        give each such column the declared character set and binary collation, its length and
        nullability kept, in one ``ALTER TABLE``."""
        wanted: dict[str, tuple[str, str]] = {}
        for col in table.columns:
            chosen = stored_type(col.type, conn.dialect)
            charset, collation = getattr(chosen, "charset", None), getattr(chosen, "collation", None)
            if charset and collation:
                wanted[col.name] = (charset, collation)
        if not wanted:
            return []
        rows = conn.execute(
            text(
                "SELECT column_name, column_type, is_nullable, collation_name FROM information_schema.columns "
                "WHERE table_schema = COALESCE(:schema, DATABASE()) AND table_name = :name"
            ),
            {"schema": table.schema, "name": table.name},
        )
        prep = conn.dialect.identifier_preparer
        changed, clauses = [], []
        for name, column_type, nullable, collation in rows:
            want = wanted.get(name)
            if want is None or collation is None or collation == want[1]:
                continue
            null = "NULL" if str(nullable).upper() == "YES" else "NOT NULL"
            clauses.append(
                f"MODIFY COLUMN {prep.quote(name)} {column_type} CHARACTER SET {want[0]} COLLATE {want[1]} {null}"
            )
            changed.append(name)
        if clauses:
            conn.exec_driver_sql(f"ALTER TABLE {prep.format_table(table)} {', '.join(clauses)}")
        return changed

    def id_in(self, conn: Connection, column: Any, values: Sequence[Any]) -> Iterator[Any]:
        """``column IN values``, up to ``mysql_lookups.IN_BATCH`` values a statement: a chunk's ~2,500
        judgment keys in one round trip, not five (the server takes a long list; the packet
        stays well under ``max_allowed_packet``)."""
        for part in in_parts(list(values), mysql_lookups.IN_BATCH):
            yield column.in_(list(part))

    def select_in(
        self,
        conn: Connection,
        table: Any,
        columns: Sequence[str | None],
        in_column: str,
        values: Sequence[Any],
        equal: Sequence[tuple[str, Any]] = (),
    ) -> Iterator[Sequence[Any]]:
        """Through PyMySQL: the ``IN`` list written out as literals (``mysql_lookups``)."""
        raw = pymysql_connection(conn)
        if raw is None:
            return super().select_in(conn, table, columns, in_column, values, equal)
        return mysql_lookups.select_in(conn, raw, table, columns, in_column, values, equal)

    # --- writes ----------------------------------------------------------------------------------

    def delete_scored_failures(
        self,
        conn: Connection,
        failures: Table,
        scores: Table,
        equal: Sequence[tuple[str, Any]],
        log_ids: Sequence[str],
    ) -> None:
        """Through PyMySQL: the ``IN`` list written out as literals (``mysql_lookups``)."""
        raw = pymysql_connection(conn)
        if raw is None:
            super().delete_scored_failures(conn, failures, scores, equal, log_ids)
        else:
            mysql_lookups.delete_scored_failures(conn, raw, failures, scores, equal, log_ids)

    def native_insert(self, table: Table, keys: list[str], others: list[str]) -> Any:
        """``ON DUPLICATE KEY UPDATE``; an insert that leaves existing rows alone updates a key
        column to itself (``INSERT IGNORE`` would also turn strict mode's errors into warnings)."""
        stmt = insert(table)
        if others:
            return stmt.on_duplicate_key_update({c: stmt.inserted[c] for c in others})
        return stmt.on_duplicate_key_update({keys[0]: table.c[keys[0]]})

    def upsert(self, conn: Connection, table: Table, rows: Sequence[dict[str, Any]], keys: list[str]) -> int:
        others = [c for c in rows[0] if c not in keys]
        ordered = dedupe(rows, keys)  # in key order: InnoDB appends to its clustered index
        if literal_insert(conn, self.native_insert(table, keys, others), table, ordered):
            return len(ordered)
        return super().upsert(conn, table, rows, keys)

    def insert_ignore(
        self, conn: Connection, table: Table, rows: Sequence[dict[str, Any]] | ColumnRows, keys: list[str]
    ) -> int:
        stmt = self.native_insert(table, keys, [])
        if isinstance(rows, ColumnRows) and len(keys) == 1 and keys[0] in rows.columns:
            # column by column as given (distinct keys), in key order: no dict per row and back
            if literal_insert(conn, stmt, table, rows.sorted_by(keys[0])):
                return len(rows)
        dicts = rows.as_dicts() if isinstance(rows, ColumnRows) else rows
        ordered = dedupe(dicts, keys)
        if literal_insert(conn, stmt, table, ordered):
            return len(ordered)
        return super().insert_ignore(conn, table, rows, keys)
