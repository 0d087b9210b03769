"""The generic behaviour of a warehouse family around tables: the column types it chooses
(``warehouse/types.py``), reading a table's shape, creating tables, and the steps of bringing an
older version's output tables up to date (``warehouse/migrate.py`` orders them)."""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from sqlalchemy import JSON, DateTime, Float, MetaData, String, Table, Text, inspect
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import NoSuchTableError
from sqlalchemy.schema import CreateTable
from sqlalchemy.types import VARBINARY, TypeEngine

from . import information_schema
from .facts import Facts

__all__ = ["Tables"]

Bind = Engine | Connection


class Tables(Facts):
    # --- column types ----------------------------------------------------------------------------

    def key_text_type(self, length: int | None) -> TypeEngine[Any]:
        """Text in a primary key, compared exactly (``length`` None: as long as a key allows)."""
        return String(255 if length is None else length)

    def exact_text_type(self) -> TypeEngine[Any]:
        """Text of any length compared and grouped byte for byte (segment values)."""
        return Text()

    def long_text_type(self) -> TypeEngine[Any]:
        """Machine-made text of any length outside a key (megabytes: a claim's list of ids)."""
        return Text()

    def key_code_type(self, length: int) -> TypeEngine[Any]:
        """Machine-made ASCII text in a key (a partition key, a fingerprint)."""
        return String(length)

    def model_name_type(self) -> TypeEngine[Any]:
        """A judge model's name in a key."""
        return String(255)

    def json_type(self) -> TypeEngine[Any]:
        return JSON()

    def binary_key_type(self, size: int) -> TypeEngine[Any]:
        """The judgment cache's key of ``size`` bytes."""
        return VARBINARY(size)

    def double_type(self) -> TypeEngine[Any]:
        return Float(precision=53)

    def timestamp_type(self) -> TypeEngine[Any]:
        return DateTime(timezone=True)

    def reflected_type(self, type_: TypeEngine[Any]) -> TypeEngine[Any]:
        """How a reflected column is read: a floating-point column as ``float`` (a ``Decimal``
        rounded to 10 places would give two ids one text, ``1.0`` and ``1.0000000000000002``)."""
        if isinstance(type_, Float) and type_.asdecimal:
            as_float = copy.copy(type_)
            as_float.asdecimal = False
            return as_float
        return type_

    # --- a table's shape ---------------------------------------------------------------------------

    def table_names(self, bind: Bind, schema: str | None) -> list[str]:
        return list(inspect(bind).get_table_names(schema=schema))

    def has_table(self, bind: Bind, name: str, schema: str | None) -> bool:
        inspector = inspect(bind)
        if schema is None and self.reflection == "information_schema":
            # duckdb-engine's has_table without a schema answers for a table of that name in any schema
            schema = inspector.default_schema_name
        return bool(inspector.has_table(name, schema=schema))

    def get_columns(self, bind: Bind, name: str, schema: str | None) -> list[dict[str, Any]]:
        """``{"name", "type", "nullable"}`` per column, in table order; empty: no such table."""
        if self.reflection == "information_schema":
            return information_schema.columns(bind, name, schema)
        try:
            return [dict(c) for c in inspect(bind).get_columns(name, schema=schema)]
        except NoSuchTableError:
            return []

    def columns_of(self, bind: Bind, names: list[str], schema: str | None) -> dict[str, list[dict[str, Any]]]:
        """``get_columns`` of each of ``names`` (in one query where the family reads
        ``information_schema``; one a table through the inspector)."""
        if self.reflection == "information_schema":
            return information_schema.columns_of(bind, names, schema)
        return {name: self.get_columns(bind, name, schema) for name in names}

    def primary_key(self, bind: Bind, name: str, schema: str | None) -> tuple[list[str], str | None]:
        """The primary key's columns (in key order) and its constraint name (None: no name or key)."""
        if self.reflection == "information_schema":
            return information_schema.primary_key(bind, name, schema)
        pk = inspect(bind).get_pk_constraint(name, schema=schema)
        return list(pk.get("constrained_columns") or []), pk.get("name")

    def index_columns(self, bind: Bind, name: str, schema: str | None) -> list[tuple[str | None, list[Any]]]:
        """The table's indexes as (name, column names); none where the family takes no indexes or
        reads shapes without the inspector."""
        if not self.secondary_indexes or self.reflection != "inspector":
            return []
        return [(ix.get("name"), list(ix.get("column_names") or [])) for ix in inspect(bind).get_indexes(name, schema)]

    # --- creating tables ---------------------------------------------------------------------------

    def create_table(self, conn: Connection, table: Table, *, checkfirst: bool = True) -> None:
        """Create ``table`` (when missing, with ``checkfirst``), without its secondary indexes
        where the family takes none."""
        if self.secondary_indexes:
            table.create(conn, checkfirst=checkfirst)
            return
        if checkfirst and self.has_table(conn, table.name, table.schema):
            return
        conn.execute(CreateTable(table))

    def create_tables(self, conn: Connection, metadata: MetaData, *, checkfirst: bool = True) -> None:
        if self.secondary_indexes:
            metadata.create_all(conn, checkfirst=checkfirst)
            return
        for table in metadata.sorted_tables:
            self.create_table(conn, table, checkfirst=checkfirst)

    # --- migrations (inside the caller's write transaction) ------------------------------------------

    def lock_for_migration(self, conn: Connection, table: Table) -> None:
        """Keep concurrent migrators of ``table`` apart until the transaction ends (the caller then
        checks again). Generic: the write transaction is enough."""

    def add_key_columns(self, conn: Connection, table: Table, fills: Mapping[str, str]) -> None:
        """Add the key columns ``fills`` names (column -> the SQL value of existing rows), make
        them NOT NULL, and replace the primary key with the declared one."""
        prep = conn.dialect.identifier_preparer
        name = prep.format_table(table)
        new_pk = table.primary_key.name
        if not isinstance(new_pk, str):  # every ctxprec table names its key; the new one is re-created by name
            raise ValueError(f"cannot migrate {table.name}: its primary key constraint has no name")
        _, old_pk = self.primary_key(conn, table.name, table.schema)
        for column, fill in fills.items():
            col = prep.quote(column)
            conn.exec_driver_sql(f"ALTER TABLE {name} ADD COLUMN {col} {table.c[column].type.compile(conn.dialect)}")
            conn.exec_driver_sql(f"UPDATE {name} SET {col} = {fill}")
            conn.exec_driver_sql(f"ALTER TABLE {name} ALTER COLUMN {col} SET NOT NULL")
        if old_pk:
            conn.exec_driver_sql(f"ALTER TABLE {name} DROP CONSTRAINT {prep.quote(old_pk)}")
        key = ", ".join(prep.quote(c.name) for c in table.primary_key.columns)
        conn.exec_driver_sql(f"ALTER TABLE {name} ADD CONSTRAINT {prep.quote(new_pk)} PRIMARY KEY ({key})")

    def convert_judgment_keys(self, conn: Connection, table: Table) -> None:
        """Turn a judgment cache whose ``key`` is text (64 hex digits) into binary keys. Generic:
        no portable conversion, the cache starts afresh."""
        prep = conn.dialect.identifier_preparer
        name = prep.format_table(table)
        key = table.c["key"]
        conn.exec_driver_sql(f"DELETE FROM {name}")
        conn.exec_driver_sql(
            f"ALTER TABLE {name} ALTER COLUMN {prep.quote(key.name)} TYPE {key.type.compile(conn.dialect)}"
        )

    def migrate_table(self, conn: Connection, table: Table) -> list[str]:
        """The family's own steps for an existing ``table`` (after the common ones); returns the
        columns changed. Generic: none."""
        return []
