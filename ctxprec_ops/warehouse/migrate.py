"""Bring output tables created by an older version up to the current declaration, in place.

- ``add_missing_columns``: a column the declaration has and the table lacks is added with
  ``ALTER TABLE ... ADD COLUMN`` (nullable, so existing rows keep their values and get NULL).
- ``add_source_table_key``: ``source_table`` joined the primary keys of ``ctxprec_scores``,
  ``ctxprec_failures`` and ``ctxprec_runs``. Existing rows keep the table they came from (the
  input table their metric was configured with, ``legacy_sources``). PostgreSQL (and other
  servers): add the column, fill it, make it NOT NULL, replace the primary key. SQLite cannot
  change a primary key: the table is rebuilt (renamed aside, created anew, rows copied, old copy
  dropped).

Both run inside the caller's write transaction (on SQLite ``BEGIN IMMEDIATE``; on PostgreSQL the
table is locked before it is checked again), so concurrent workers migrate once; idempotent.
"""

from __future__ import annotations

from collections.abc import Mapping

from sqlalchemy import Table, inspect
from sqlalchemy.engine import Connection
from sqlalchemy.schema import CreateColumn

__all__ = ["default_legacy_sources", "add_missing_columns", "add_source_table_key"]


def default_legacy_sources() -> dict[str, str]:
    """metric -> its kind's default input table (the registry; imported late: the pipeline
    package imports this one)."""
    from ..pipeline.kinds import METRIC_KINDS

    return {name: kind.default_table for name, kind in METRIC_KINDS.items()}


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

    whens = " ".join(f"WHEN {q(m)} THEN {q(t)}" for m, t in sorted(legacy_sources.items()))
    default = q(next(iter(legacy_sources.values()), "retrieval_logs"))
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
