"""Bring output tables created by an older version up to the current declaration, in place.

- ``add_missing_columns``: a column the declaration has and the table lacks is added with
  ``ALTER TABLE ... ADD COLUMN`` (nullable, so existing rows keep their values and get NULL).
- ``add_key_columns``: ``source_table``, then ``mapping`` joined the primary keys of
  ``ctxprec_scores``, ``ctxprec_failures`` and ``ctxprec_runs`` (``mapping`` also that of
  ``ctxprec_segments``). Existing rows keep the table they came from (the input table their
  metric was configured with, ``legacy_sources``) and the column mapping it was read with: the
  fingerprint of the mapping their metric is configured with now (``legacy_mappings``; the run
  that migrates: its own; no configured mapping: ``default``, the default mapping's). That is a
  deliberate assumption, as for ``source_table``: the version before recorded neither, and the
  configuration in force when the tables are upgraded is the best witness of what wrote them.
  PostgreSQL (and other servers): add the columns, fill them, make them NOT NULL, replace the
  primary key. SQLite cannot change a primary key: the table is rebuilt (renamed aside, created
  anew, rows copied, old copy dropped).
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
from .reflect import get_columns, primary_key_columns

__all__ = [
    "default_legacy_sources",
    "add_missing_columns",
    "add_key_columns",
    "binary_judgment_keys",
    "MAPPING",
    "DEFAULT_MAPPING",
    "MAPPING_LENGTH",
]


def default_legacy_sources() -> dict[str, str]:
    """metric -> input table for rows written before ``source_table`` existed, when the caller
    gives none: nothing known (old rows then get ``retrieval_logs``). The pipeline passes the
    registry's tables and this run's (``pipeline.context.legacy_sources``)."""
    return {}


SOURCE_TABLE = "source_table"
#: the column mapping's fingerprint (``pipeline.mapping.mapping_id``): part of a score's key
MAPPING = "mapping"
#: ``mapping`` of rows read with the default column mapping (and of old rows without a configured one)
DEFAULT_MAPPING = "default"
#: characters of a ``mapping`` value (16 hex digits of a sha256; short: keys must fit MySQL's 3,072 bytes)
MAPPING_LENGTH = 16
#: the key columns added after the first version, in the order they are filled
KEY_COLUMNS = (SOURCE_TABLE, MAPPING)


def _columns(conn: Connection, table: Table) -> set[str]:
    return {c["name"] for c in get_columns(conn, table.name, table.schema)}


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


def _by_metric(values: Mapping[str, str], default: str) -> str:
    """``CASE metric WHEN ... END`` SQL giving an old row's value by its metric (literals are
    bound safely by quoting them as SQL strings: they are validated identifiers or hex anyway)."""

    def q(value: str) -> str:
        return "'" + value.replace("'", "''") + "'"

    if not values:
        return q(default)
    whens = " ".join(f"WHEN {q(m)} THEN {q(t)}" for m, t in sorted(values.items()))
    return f"CASE metric {whens} ELSE {q(default)} END"


def _missing_keys(conn: Connection, table: Table) -> list[str]:
    have = _columns(conn, table)
    return [c for c in KEY_COLUMNS if c in table.c and c not in have]


def add_key_columns(
    conn: Connection,
    table: Table,
    legacy_sources: Mapping[str, str],
    legacy_mappings: Mapping[str, str] | None = None,
) -> list[str]:
    """Give an older ``table`` the key columns it lacks (``source_table``, ``mapping``), filled
    for its rows by metric (``legacy_sources``: metric -> input table, the first one for other
    metrics; ``legacy_mappings``: metric -> mapping fingerprint, ``DEFAULT_MAPPING`` for other
    metrics), and the current primary key; returns the columns added."""
    if not _missing_keys(conn, table):
        return []
    prep = conn.dialect.identifier_preparer
    name = prep.format_table(table)
    if conn.dialect.name == "postgresql":
        conn.exec_driver_sql(f"LOCK TABLE {name} IN ACCESS EXCLUSIVE MODE")
    missing = _missing_keys(conn, table)  # a concurrent worker may have migrated it first
    if not missing:
        return []
    fills = {
        SOURCE_TABLE: _by_metric(legacy_sources, next(iter(legacy_sources.values()), "retrieval_logs")),
        MAPPING: _by_metric(legacy_mappings or {}, DEFAULT_MAPPING),
    }
    if conn.dialect.name == "sqlite":
        _rebuild_sqlite(conn, table, {c: fills[c] for c in missing})
        return missing
    new_pk = table.primary_key.name
    if not isinstance(new_pk, str):  # every ctxprec table names its key; the new one is re-created by name
        raise ValueError(f"cannot migrate {table.name}: its primary key constraint has no name")
    _, old_pk = primary_key_columns(conn, table.name, table.schema)
    for column in missing:
        col = prep.quote(column)
        conn.exec_driver_sql(f"ALTER TABLE {name} ADD COLUMN {col} {table.c[column].type.compile(conn.dialect)}")
        conn.exec_driver_sql(f"UPDATE {name} SET {col} = {fills[column]}")
        conn.exec_driver_sql(f"ALTER TABLE {name} ALTER COLUMN {col} SET NOT NULL")
    if old_pk:
        conn.exec_driver_sql(f"ALTER TABLE {name} DROP CONSTRAINT {prep.quote(old_pk)}")
    key = ", ".join(prep.quote(c.name) for c in table.primary_key.columns)
    conn.exec_driver_sql(f"ALTER TABLE {name} ADD CONSTRAINT {prep.quote(new_pk)} PRIMARY KEY ({key})")
    return missing


def _rebuild_sqlite(conn: Connection, table: Table, fills: Mapping[str, str]) -> None:
    """Rename ``table`` aside, create it anew, copy its rows (``fills``: column -> SQL value of
    the columns it lacked), drop the old copy."""
    prep = conn.dialect.identifier_preparer
    schema_name = table.schema
    schema = f"{prep.quote(schema_name)}." if schema_name else ""
    aside = f"{table.name}__before_key_columns"
    old_columns = [c["name"] for c in get_columns(conn, table.name, table.schema)]
    index_names = (i.get("name") for i in inspect(conn).get_indexes(table.name, schema=table.schema))
    old_indexes = [n for n in index_names if n]
    conn.exec_driver_sql(f"ALTER TABLE {schema}{prep.quote(table.name)} RENAME TO {prep.quote(aside)}")
    for index in old_indexes:  # index names are per schema: free them for the new table
        conn.exec_driver_sql(f"DROP INDEX IF EXISTS {schema}{prep.quote(index)}")
    table.create(conn)
    keep = [c for c in old_columns if c in table.c and c not in fills]
    cols = ", ".join([prep.quote(c) for c in keep] + [prep.quote(c) for c in fills])
    values = ", ".join([prep.quote(c) for c in keep] + list(fills.values()))
    conn.exec_driver_sql(
        f"INSERT INTO {schema}{prep.quote(table.name)} ({cols}) SELECT {values} FROM {schema}{prep.quote(aside)}"
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
    for c in get_columns(conn, table.name, table.schema):
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
    old_columns = {c["name"] for c in get_columns(conn, table.name, table.schema)}
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
