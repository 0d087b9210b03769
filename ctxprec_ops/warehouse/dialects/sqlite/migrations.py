"""SQLite cannot change a table's primary key or a column's type: a table of an older version is
rebuilt (renamed aside, created anew, its rows copied over in SQL, the old copy dropped)."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from sqlalchemy import Table, inspect
from sqlalchemy.engine import Connection

from ....judge.cache import KEY_BYTES, KEY_HEAD_BYTES

__all__ = ["rebuild_with_columns", "rebuild_judgments", "hex_key_to_binary"]


def rebuild_with_columns(conn: Connection, table: Table, old_columns: Sequence[str], fills: Mapping[str, str]) -> None:
    """Rebuild ``table`` as declared; ``fills``: column -> SQL value of the columns it lacked."""
    prep = conn.dialect.identifier_preparer
    schema = f"{prep.quote(table.schema)}." if table.schema else ""
    aside = f"{table.name}__before_key_columns"
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


def hex_key_to_binary(key: object) -> bytes | None:
    """A former 64-hex-digit judgment key as the current binary key (None: not that shape): its
    first 7 bytes and its last 16, so the verdicts already paid for stay cached. A key that is
    binary already is kept: SQLite stores values by their own type, so a table whose column lost
    its BLOB declaration (copied with ``CREATE TABLE ... AS SELECT``, say) may hold current keys."""
    if isinstance(key, bytes) and len(key) == KEY_BYTES:
        return key
    if not isinstance(key, str) or not _HEX_KEY.fullmatch(key):
        return None
    return bytes.fromhex(key[: 2 * KEY_HEAD_BYTES] + key[64 - 2 * (KEY_BYTES - KEY_HEAD_BYTES) :])


def rebuild_judgments(conn: Connection, table: Table, old_columns: Sequence[str]) -> None:
    """Rebuild the judgment cache with binary keys, its convertible rows copied over in SQL (keys
    converted by a Python function registered on the connection: ``unhex`` needs SQLite 3.41)."""
    prep = conn.dialect.identifier_preparer
    schema = f"{prep.quote(table.schema)}." if table.schema else ""
    aside = f"{table.name}__before_binary_keys"
    driver = conn.connection.driver_connection
    if driver is None:  # SQLAlchemy's handle lost its DBAPI connection (invalidated)
        raise RuntimeError(f"cannot migrate {table.name}: the connection is no longer usable")
    driver.create_function("ctxprec_binary_key", 1, hex_key_to_binary, deterministic=True)
    conn.exec_driver_sql(f"ALTER TABLE {schema}{prep.quote(table.name)} RENAME TO {prep.quote(aside)}")
    table.create(conn)
    keep = [c.name for c in table.columns if c.name in set(old_columns)]
    cols = ", ".join(prep.quote(c) for c in keep)
    values = ", ".join("ctxprec_binary_key(key)" if c == "key" else prep.quote(c) for c in keep)
    conn.exec_driver_sql(
        f"INSERT OR IGNORE INTO {schema}{prep.quote(table.name)} ({cols}) SELECT {values} "
        f"FROM {schema}{prep.quote(aside)} WHERE ctxprec_binary_key(key) IS NOT NULL"
    )
    conn.exec_driver_sql(f"DROP TABLE {schema}{prep.quote(aside)}")
