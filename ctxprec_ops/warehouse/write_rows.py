"""What every write path shares: rows given column by column, the table's key, last-row-wins
de-duplication in key order, and the columns' bind processors (the values SQLAlchemy would store)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import repeat
from operator import is_, itemgetter
from typing import Any

from sqlalchemy import JSON, Table

from ..json_text import JSONText
from .types import stored_type

__all__ = [
    "BATCH",
    "ColumnRows",
    "key_columns",
    "keys_and_columns",
    "batches",
    "dedupe",
    "column_processor",
    "bind_processors",
    "decoded",
    "bind_values",
    "same_object",
]

#: rows per statement of the generic and native non-SQLite paths (keeps parameter counts and memory bounded)
BATCH = 500


@dataclass(frozen=True)
class ColumnRows:
    """Rows given column by column, for a writer that has its values in lists already: ``columns``
    maps a column to its values (one per row, all lists as long), ``shared`` a column to the one
    value every row holds. The rows' keys must be distinct. SQLite binds the columns as they are;
    other paths take ``as_dicts()``. (A chunk's ~2,500 judgment-cache rows: building a dict per row
    and reading it back column by column cost ~6 us a case, bench/README.md.)"""

    columns: dict[str, list[Any]]
    shared: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dicts(cls, rows: Sequence[dict[str, Any]], cols: Sequence[str], keep: Sequence[str] = ()) -> ColumnRows:
        """Dict rows (the same keys each) column by column; a column holding the same object in
        every row (a chunk's partition, key, run id, timestamp) becomes one shared value — but not
        one of ``keep`` (a key: a single row's still goes as a column)."""
        columns: dict[str, list[Any]] = {}
        shared: dict[str, Any] = {}
        for c in cols:
            values = [r[c] for r in rows]
            if c not in keep and same_object(values):
                shared[c] = values[0]
            else:
                columns[c] = values
        return cls(columns, shared)

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()), ()))

    def sorted_by(self, column: str) -> ColumnRows:
        """The same rows in the order of ``column``'s values (a key column: distinct values)."""
        values = self.columns[column]
        order = sorted(range(len(values)), key=values.__getitem__)
        return ColumnRows({c: [v[i] for i in order] for c, v in self.columns.items()}, self.shared)

    def as_dicts(self) -> list[dict[str, Any]]:
        names = [*self.columns, *self.shared]
        shared = tuple(self.shared.values())
        return [dict(zip(names, (*values, *shared))) for values in zip(*self.columns.values())]


def key_columns(table: Table) -> list[str]:
    return [c.name for c in table.primary_key.columns]


def keys_and_columns(table: Table, rows: Sequence[dict[str, Any]] | ColumnRows) -> tuple[list[str], list[str]]:
    """The table's key columns and the rows' columns (every row carries the same keys); rows
    without a key column are refused."""
    keys = key_columns(table)
    cols = [*rows.columns, *rows.shared] if isinstance(rows, ColumnRows) else list(rows[0].keys())
    missing = [k for k in keys if k not in cols]
    if missing:
        raise ValueError(f"upsert into {table.name}: rows lack key column(s) {missing}")
    return keys, cols


def batches(rows: Sequence[dict[str, Any]]) -> Iterable[Sequence[dict[str, Any]]]:
    for i in range(0, len(rows), BATCH):
        yield rows[i : i + BATCH]


def dedupe(rows: Sequence[dict[str, Any]], keys: list[str], *, ordered: bool = True) -> list[dict[str, Any]]:
    """Last row wins per key (PostgreSQL refuses to touch one row twice in one statement), in
    key order: concurrent writers then lock rows in the same order and cannot deadlock.
    (SQLite locks the whole database per write transaction: ``ordered=False`` skips the sort.)"""
    if len(keys) == 1:
        by_key = dict(zip(map(itemgetter(keys[0]), rows), rows))
    else:
        by_key = {tuple(r[k] for k in keys): r for r in rows}
    if not ordered:
        return list(by_key.values())
    return [by_key[k] for k in sorted(by_key)]


def column_processor(table: Table, column: str, dialect: Any) -> Any:
    return table.c[column].type.dialect_impl(dialect).bind_processor(dialect)


def bind_processors(table: Table, cols: Sequence[str], dialect: Any) -> list[Any]:
    """The columns' own bind processors (the values SQLAlchemy would store); a JSON column's
    passes ``JSONText`` (JSON serialized already) through as it is."""
    procs = []
    for c in cols:
        proc = column_processor(table, c, dialect)
        if proc is not None and isinstance(stored_type(table.c[c].type, dialect), JSON):
            proc = _passing_json_text(proc)
        procs.append(proc)
    return procs


def _passing_json_text(proc: Any) -> Any:
    def process(value: Any) -> Any:
        return str(value) if type(value) is JSONText else proc(value)

    return process


def decoded(rows: Sequence[dict[str, Any]]) -> Sequence[dict[str, Any]]:
    """Rows for a write path that binds through SQLAlchemy: ``JSONText`` values decoded again."""
    first = rows[0] if rows else {}
    cols = [c for c, v in first.items() if type(v) is JSONText]
    if not cols:
        return rows
    return [{**r, **{c: json.loads(r[c]) if type(r[c]) is JSONText else r[c] for c in cols}} for r in rows]


def bind_values(values: list[Any], process: Any) -> list[Any]:
    """One column's values through its bind processor; a column holding the same object in
    every row (a chunk's timestamp) is processed once. Identity, not equality: ``1 == True``
    but a JSON column stores them differently."""
    if process is None or not values:
        return values
    if same_object(values):
        return [process(values[0])] * len(values)
    return list(map(process, values))


def same_object(values: list[Any]) -> bool:
    """Whether every one of ``values`` (at least one) is the first, by identity."""
    return all(map(is_, values, repeat(values[0])))
