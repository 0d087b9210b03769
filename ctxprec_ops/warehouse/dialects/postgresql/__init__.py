"""PostgreSQL (psycopg 3): ``COPY`` into a session-local stage then one ``INSERT ... SELECT ...
ON CONFLICT`` per table (``copy``), ``= ANY(:array)`` id binds, the judgment cache probed per
question (``lookups``), a session advisory lock as a claim holder's sign of life, planner statistics refreshed as a
run grows the output tables (``analyze``), sessions in UTC."""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from sqlalchemy import LargeBinary, String, Table, Text, any_, bindparam, cast, func, null, select
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, insert
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.types import TypeEngine

from ....judge.cache import KEY_BYTES, KEY_HEAD_BYTES
from ...holders import ClaimHolder
from ...write_rows import ColumnRows
from ..base import Dialect, Lineage
from ..writes import on_conflict
from . import lookups
from .analyze import analyze_if_grown
from .arrays import text_array
from .copy import copy_upsert

__all__ = ["PostgreSQLDialect"]


def _holder_key(holder: str) -> int:
    """The advisory-lock key of a claim holder (a signed 64-bit hash of its id)."""
    from ...claims import claim_key

    return claim_key(f"ctxprec-claim-holder:{holder}")


class PostgreSQLDialect(Dialect):
    names = ("postgresql",)
    family = "PostgreSQL"
    write_path = (
        "each column one array parameter of one `INSERT … SELECT … FROM unnest` per table (else `COPY` "
        "into a temporary stage), plain under a savepoint, `ON CONFLICT` when a key exists"
    )
    native_upsert = True
    id_binding = "any_array"
    claims = "advisory"
    utc_session = ("SET TIME ZONE 'UTC'",)
    snapshot_isolation = "REPEATABLE READ"

    def normalize_url(self, url: URL) -> URL:
        """``postgresql://`` and ``postgres://`` without a driver: psycopg 3."""
        if url.drivername in ("postgresql", "postgres"):
            return url.set(drivername="postgresql+psycopg")
        return url

    def lineage(self, url: URL, table: str) -> Lineage:
        """The postgres provider's form: ``postgres://host:5432`` / ``database.schema.table``."""
        host = url.host if url.host and "/" not in url.host else "localhost"
        namespace = f"postgres://{host}:{url.port or 5432}"
        schema = (url.query.get("schema") if isinstance(url.query.get("schema"), str) else None) or "public"
        database = url.database or "postgres"
        return Lineage(namespace, f"{database}.{schema}.{table}", f"{namespace}/{database}/{schema}/{table}")

    @contextmanager
    def claim_liveness(self, engine: Engine, holder: str) -> Iterator[None]:
        """A session-level advisory lock named by the holder, on a connection of its own, for as
        long as the holder runs: a killed process's session ends, and its lock with it. The
        connection is in autocommit mode: no transaction is ever open on it."""
        key = _holder_key(holder)
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            conn.execute(select(func.pg_advisory_lock(key)))
            try:
                yield
            finally:
                conn.execute(select(func.pg_advisory_unlock(key)))

    def claim_holder_gone(self, engine: Engine, holder: ClaimHolder) -> str | None:
        """Gone when its advisory lock is free: its session has ended (a lock taken to find out
        is released at once)."""
        key = _holder_key(holder.holder)
        with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
            if not conn.execute(select(func.pg_try_advisory_lock(key))).scalar_one():
                return None
            conn.execute(select(func.pg_advisory_unlock(key)))
        return "its PostgreSQL session has ended"

    def analyze_if_grown(self, engine: Engine, tables: Any, written: Mapping[str, int]) -> list[str]:
        return analyze_if_grown(engine, tables, written)

    # --- tables ----------------------------------------------------------------------------------

    def key_text_type(self, length: int | None) -> TypeEngine[Any]:
        return Text() if length is None else String(length)

    def json_type(self) -> TypeEngine[Any]:
        return JSONB()

    def binary_key_type(self, size: int) -> TypeEngine[Any]:
        return LargeBinary()  # bytea: a 32-byte key-index entry instead of the 80 bytes of 64 hex digits

    def lock_for_migration(self, conn: Connection, table: Table) -> None:
        conn.exec_driver_sql(
            f"LOCK TABLE {conn.dialect.identifier_preparer.format_table(table)} IN ACCESS EXCLUSIVE MODE"
        )

    def convert_judgment_keys(self, conn: Connection, table: Table) -> None:
        """In place: a former key (32 hex digits hashing the question, 32 hashing the node too)
        converts exactly to its first 7 bytes and its last 16, so the verdicts already paid for
        stay cached; rows of another shape (an older, never-released format) are dropped."""
        prep = conn.dialect.identifier_preparer
        name = prep.format_table(table)
        col = prep.quote(table.c["key"].name)
        head, tail = 2 * KEY_HEAD_BYTES, 2 * (KEY_BYTES - KEY_HEAD_BYTES)
        conn.exec_driver_sql(f"DELETE FROM {name} WHERE {col} !~ '^[0-9a-f]{{64}}$'")
        conn.exec_driver_sql(
            f"ALTER TABLE {name} ALTER COLUMN {col} TYPE bytea USING "
            f"decode(substr({col}, 1, {head}), 'hex') || decode(substr({col}, {65 - tail}, {tail}), 'hex')"
        )

    # --- reads -----------------------------------------------------------------------------------

    def id_in(self, conn: Connection, column: Any, values: Sequence[Any]) -> Iterator[ColumnElement[bool]]:
        """One ``= ANY(:array)`` with the whole list as one text[] parameter: one statement, one
        bound value whatever the length (no per-value binding work in the client, one query text
        for the server)."""
        if not values:
            return
        if all(type(v) is str for v in values):  # as one text the server casts (arrays.text_array)
            array = cast(bindparam("ids", text_array(values), type_=Text()), ARRAY(Text()))
            yield column == any_(array)
        else:
            yield column == any_(bindparam("ids", list(values), type_=ARRAY(Text())))

    def select_in(
        self,
        conn: Connection,
        table: Any,
        columns: Sequence[str | None],
        in_column: str,
        values: Sequence[Any],
        equal: Sequence[tuple[str, Any]] = (),
    ) -> Iterator[Sequence[Any]]:
        """Texts of a primary key's leading column, the rest of the key fixed (a chunk's
        already-scored ids): one index probe per value, whatever the table's statistics
        (``lookups.key_probe``)."""
        if values and all(type(v) is str for v in values) and lookups.probes_primary_key(table, in_column, equal):
            cols = [null().label(f"c{i}") if c is None else table.c[c] for i, c in enumerate(columns)]
            stmt = lookups.key_probe(table, cols, in_column, list(dict.fromkeys(values)), equal)
            yield from conn.execute(stmt)
            return
        yield from super().select_in(conn, table, columns, in_column, values, equal)

    def cached_judgments(
        self, conn: Connection, table: Any, keys: Sequence[bytes], *, agreement: bool
    ) -> Iterator[tuple[bytes, Any, Any, Any]]:
        return lookups.cached_judgments(conn, table, keys, agreement=agreement)

    # --- writes ----------------------------------------------------------------------------------

    def native_insert(self, table: Table, keys: list[str], others: list[str]) -> Any:
        return on_conflict(insert, table, keys, others)

    def upsert(self, conn: Connection, table: Table, rows: Sequence[dict[str, Any]], keys: list[str]) -> int:
        if len(rows) > 1:
            return copy_upsert(conn, table, rows, update=True)
        return super().upsert(conn, table, rows, keys)

    def insert_ignore(
        self, conn: Connection, table: Table, rows: Sequence[dict[str, Any]] | ColumnRows, keys: list[str]
    ) -> int:
        if len(rows) > 1:
            return copy_upsert(conn, table, rows, update=False)
        return super().insert_ignore(conn, table, rows.as_dicts() if isinstance(rows, ColumnRows) else rows, keys)
