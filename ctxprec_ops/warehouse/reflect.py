"""Reading a table's shape (names, columns, primary key) the same way on every warehouse.

The family reads it (``Dialect.get_columns`` and the others): SQLAlchemy's inspector for most,
``information_schema`` where the inspector fails on the catalogue (DuckDB). A table is built from
its columns (:func:`reflect_table`), each read as the family reads it (``Dialect.reflected_type``:
a floating-point id as ``float``, never a rounded ``Decimal``), and, where the inspector reads
them, its indexes' columns: the pipeline reads source tables and checks output tables by their
columns and types, and SQLite's partition reads by whether an index starts with ``event_time``;
it never needs their foreign keys (whose reflection fails under fakesnow). The result is what
``autoload_with`` gives minus constraints.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Column, Index, MetaData, Table
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import NoSuchTableError

from .dialects import dialect_of

__all__ = ["get_columns", "table_names", "has_table", "reflect_table"]

Bind = Engine | Connection


def table_names(bind: Bind, schema: str | None = None) -> list[str]:
    return dialect_of(bind).table_names(bind, schema)


def has_table(bind: Bind, name: str, schema: str | None = None) -> bool:
    """Whether the table exists in ``schema`` (None: the connection's default schema)."""
    return dialect_of(bind).has_table(bind, name, schema)


def get_columns(bind: Bind, name: str, schema: str | None = None) -> list[dict[str, Any]]:
    """The columns of ``name`` as ``{"name", "type", "nullable"}`` dicts, in table order; empty
    when there is no such table."""
    return dialect_of(bind).get_columns(bind, name, schema)


def reflect_table(bind: Bind, name: str, schema: str | None = None, metadata: MetaData | None = None) -> Table:
    """``name`` as a ``Table`` of its columns and (inspector families) indexes, no constraints;
    ``NoSuchTableError`` when it does not exist."""
    family = dialect_of(bind)
    cols = family.get_columns(bind, name, schema)
    if not cols:
        raise NoSuchTableError(f"{schema}.{name}" if schema else name)
    md = metadata if metadata is not None else MetaData()
    columns = [Column(c["name"], family.reflected_type(c["type"]), nullable=c.get("nullable", True)) for c in cols]
    table = Table(name, md, *columns, schema=schema)
    # the indexes' columns (SQLite's partition reads ask whether one starts with event_time)
    for ix_name, ix_columns in family.index_columns(bind, name, schema):
        names = [c for c in ix_columns if c is not None and c in table.c]
        if names and len(names) == len(ix_columns):
            Index(ix_name or f"ix_{name}_{'_'.join(names)}", *[table.c[c] for c in names])
    return table
