"""Bring output tables created by an older version up to the current declaration, in place.

- ``add_missing_columns``: a column the declaration has and the table lacks is added with
  ``ALTER TABLE ... ADD COLUMN`` (nullable, so existing rows keep their values and get NULL).
- ``add_source_table_key``: ``source_table`` joined the primary keys of ``ctxprec_scores``,
  ``ctxprec_failures`` and ``ctxprec_runs``. Existing rows keep the table they came from (the
  input table their metric was configured with, ``legacy_sources``). PostgreSQL (and other
  servers): add the column, fill it, make it NOT NULL, replace the primary key. SQLite cannot
  change a primary key: the table is rebuilt (renamed aside, created anew, rows copied, old copy
  dropped).
- ``binary_judgment_keys``: ``ctxprec_judgments.key`` was 64 hex digits of text and is now the
  23 binary bytes of ``cache.judgment_key``. A key of the former shape (32 hex digits hashing the
  question, 32 hashing the node too) converts exactly: its first 7 bytes and its last 16, so the
  verdicts already paid for stay cached. PostgreSQL: ``ALTER COLUMN ... TYPE bytea USING``;
  SQLite: the table is rebuilt. Rows whose key is not 64 hex digits are dropped (an older,
  never-released format that no current key can match).

All run inside the caller's write transaction (on SQLite ``BEGIN IMMEDIATE``; on PostgreSQL the
table is locked before it is checked again), so concurrent workers migrate once; idempotent.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from sqlalchemy import Table, inspect
from sqlalchemy.engine import Connection
from sqlalchemy.schema import CreateColumn
from sqlalchemy.types import _Binary

from ..judge.cache import KEY_BYTES, KEY_HEAD_BYTES

__all__ = ["default_legacy_sources", "add_missing_columns", "add_source_table_key", "binary_judgment_keys"]


def default_legacy_sources() -> dict[str, str]:
    """metric -> input table for rows written before ``source_table`` existed, when the caller
    gives none: nothing known (old rows then get ``retrieval_logs``). The pipeline passes the
    registry's tables and this run's (``pipeline.context.legacy_sources``)."""
    return {}


SOURCE_TABLE = "source_table"


def _columns(conn: Connection, table: Table) -> set[str]:
    return {c["name"] for c in inspect(conn).get_columns(table.name, schema=table.schema)}


def add_missing_columns(conn: Connection, table: Table) -> list[str]:
    """Add the (nullable) columns of ``table`` its stored version lacks; returns their names."""
    have = _columns(conn, table)
    added = []
    prep = conn.dialect.identifier_preparer
    for col in table.columns:
        if col.name in have or not col.nullable:
            continue
        ddl = CreateColumn(col).compile(dialect=conn.dialect)
        conn.exec_driver_sql(f"ALTER TABLE {prep.format_table(table)} ADD COLUMN {ddl}")
        added.append(col.name)
    return added


def _source_of_metric(conn: Connection, legacy_sources: Mapping[str, str]) -> str:
    """``CASE metric WHEN ... END`` SQL giving an old row's input table (literals are bound
    safely by quoting them as SQL strings: they are validated identifiers anyway)."""

    def q(value: str) -> str:
        return "'" + value.replace("'", "''") + "'"

    default = q(next(iter(legacy_sources.values()), "retrieval_logs"))
    if not legacy_sources:
        return default
    whens = " ".join(f"WHEN {q(m)} THEN {q(t)}" for m, t in sorted(legacy_sources.items()))
    return f"CASE metric {whens} ELSE {default} END"


def add_source_table_key(conn: Connection, table: Table, legacy_sources: Mapping[str, str]) -> bool:
    """Give an older ``table`` its ``source_table`` column and the current primary key; returns
    whether anything was done."""
    if SOURCE_TABLE not in table.c or SOURCE_TABLE in _columns(conn, table):
        return False
    prep = conn.dialect.identifier_preparer
    name = prep.format_table(table)
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"LOCK TABLE {name} IN ACCESS EXCLUSIVE MODE")
        if SOURCE_TABLE in _columns(conn, table):  # a concurrent worker migrated it first
            return False
    fill = _source_of_metric(conn, legacy_sources)
    if conn.dialect.name == "sqlite":
        _rebuild_sqlite(conn, table, fill)
        return True
    new_pk = table.primary_key.name
    if not isinstance(new_pk, str):  # every ctxprec table names its key; the new one is re-created by name
        raise ValueError(f"cannot migrate {table.name}: its primary key constraint has no name")
    col = prep.quote(SOURCE_TABLE)
    pk = inspect(conn).get_pk_constraint(table.name, schema=table.schema)
    conn.exec_driver_sql(f"ALTER TABLE {name} ADD COLUMN {col} {table.c[SOURCE_TABLE].type.compile(conn.dialect)}")
    conn.exec_driver_sql(f"UPDATE {name} SET {col} = {fill}")
    conn.exec_driver_sql(f"ALTER TABLE {name} ALTER COLUMN {col} SET NOT NULL")
    old_pk = pk.get("name")
    if old_pk:
        conn.exec_driver_sql(f"ALTER TABLE {name} DROP CONSTRAINT {prep.quote(old_pk)}")
    key = ", ".join(prep.quote(c.name) for c in table.primary_key.columns)
    conn.exec_driver_sql(f"ALTER TABLE {name} ADD CONSTRAINT {prep.quote(new_pk)} PRIMARY KEY ({key})")
    return True


def _rebuild_sqlite(conn: Connection, table: Table, fill: str) -> None:
    prep = conn.dialect.identifier_preparer
    schema_name = table.schema
    schema = f"{prep.quote(schema_name)}." if schema_name else ""
    aside = f"{table.name}__before_source_table"
    old_columns = [c["name"] for c in inspect(conn).get_columns(table.name, schema=table.schema)]
    index_names = (i.get("name") for i in inspect(conn).get_indexes(table.name, schema=table.schema))
    old_indexes = [n for n in index_names if n]
    conn.exec_driver_sql(f"ALTER TABLE {schema}{prep.quote(table.name)} RENAME TO {prep.quote(aside)}")
    for index in old_indexes:  # index names are per schema: free them for the new table
        conn.exec_driver_sql(f"DROP INDEX IF EXISTS {schema}{prep.quote(index)}")
    table.create(conn)
    keep = [c for c in old_columns if c in table.c and c != SOURCE_TABLE]
    cols = ", ".join(prep.quote(c) for c in keep)
    conn.exec_driver_sql(
        f"INSERT INTO {schema}{prep.quote(table.name)} ({cols}, {prep.quote(SOURCE_TABLE)}) "
        f"SELECT {cols}, {fill} FROM {schema}{prep.quote(aside)}"
    )
    conn.exec_driver_sql(f"DROP TABLE {schema}{prep.quote(aside)}")


_HEX_KEY = re.compile(r"[0-9a-f]{64}")


def _hex_key_to_binary(key: object) -> bytes | None:
    """A former 64-hex-digit judgment key as the current binary key (None: not that shape). A
    key that is binary already is kept: SQLite stores values by their own type, so a table whose
    column lost its BLOB declaration (copied with ``CREATE TABLE ... AS SELECT``, say) may hold
    current keys."""
    if isinstance(key, bytes) and len(key) == KEY_BYTES:
        return key
    if not isinstance(key, str) or not _HEX_KEY.fullmatch(key):
        return None
    return bytes.fromhex(key[: 2 * KEY_HEAD_BYTES] + key[64 - 2 * (KEY_BYTES - KEY_HEAD_BYTES) :])


def binary_judgment_keys(conn: Connection, table: Table) -> bool:
    """Convert a judgments ``table`` whose stored ``key`` is text to binary keys; returns whether
    anything was done."""
    key = table.c["key"]
    if _key_is_binary(conn, table):
        return False
    prep = conn.dialect.identifier_preparer
    name = prep.format_table(table)
    col = prep.quote(key.name)
    if conn.dialect.name == "sqlite":
        _rebuild_sqlite_judgments(conn, table)
        return True
    if conn.dialect.name != "postgresql":  # no portable conversion: start the cache afresh
        conn.exec_driver_sql(f"DELETE FROM {name}")
        conn.exec_driver_sql(f"ALTER TABLE {name} ALTER COLUMN {col} TYPE {key.type.compile(conn.dialect)}")
        return True
    conn.exec_driver_sql(f"LOCK TABLE {name} IN ACCESS EXCLUSIVE MODE")
    if _key_is_binary(conn, table):  # another worker converted it while we waited
        return False
    tail = 2 * (KEY_BYTES - KEY_HEAD_BYTES)
    conn.exec_driver_sql(f"DELETE FROM {name} WHERE {col} !~ '^[0-9a-f]{{64}}$'")
    conn.exec_driver_sql(
        f"ALTER TABLE {name} ALTER COLUMN {col} TYPE bytea USING "
        f"decode(substr({col}, 1, {2 * KEY_HEAD_BYTES}), 'hex') || decode(substr({col}, {65 - tail}, {tail}), 'hex')"
    )
    return True


def _key_is_binary(conn: Connection, table: Table) -> bool:
    for c in inspect(conn).get_columns(table.name, schema=table.schema):
        if c["name"] == "key":
            return isinstance(c["type"], _Binary)
    return True  # no such table (nothing to convert)


def _rebuild_sqlite_judgments(conn: Connection, table: Table) -> None:
    """SQLite cannot change a column's type: the table is renamed aside, created anew and the
    convertible rows copied over in SQL (keys converted by a Python function registered on the
    connection: ``unhex`` needs SQLite 3.41)."""
    prep = conn.dialect.identifier_preparer
    schema = f"{prep.quote(table.schema)}." if table.schema else ""
    aside = f"{table.name}__before_binary_keys"
    old_columns = {c["name"] for c in inspect(conn).get_columns(table.name, schema=table.schema)}
    driver = conn.connection.driver_connection
    if driver is None:  # SQLAlchemy's handle lost its DBAPI connection (invalidated)
        raise RuntimeError(f"cannot migrate {table.name}: the connection is no longer usable")
    driver.create_function("ctxprec_binary_key", 1, _hex_key_to_binary, deterministic=True)
    conn.exec_driver_sql(f"ALTER TABLE {schema}{prep.quote(table.name)} RENAME TO {prep.quote(aside)}")
    table.create(conn)
    keep = [c.name for c in table.columns if c.name in old_columns]
    cols = ", ".join(prep.quote(c) for c in keep)
    values = ", ".join("ctxprec_binary_key(key)" if c == "key" else prep.quote(c) for c in keep)
    conn.exec_driver_sql(
        f"INSERT OR IGNORE INTO {schema}{prep.quote(table.name)} ({cols}) SELECT {values} "
        f"FROM {schema}{prep.quote(aside)} WHERE ctxprec_binary_key(key) IS NOT NULL"
    )
    conn.exec_driver_sql(f"DROP TABLE {schema}{prep.quote(aside)}")
