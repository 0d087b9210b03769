"""SQLite: INSERT ... ON CONFLICT, expanding IN binds, no claims (one writer per file)."""

from __future__ import annotations

from typing import Any

from ctxprec_ops.warehouse.dialects import Dialect


def native_insert(table: Any, keys: list[str], others: list[str]) -> Any:
    from sqlalchemy.dialects.sqlite import insert

    stmt = insert(table)
    if others:
        return stmt.on_conflict_do_update(index_elements=keys, set_={c: stmt.excluded[c] for c in others})
    return stmt.on_conflict_do_nothing(index_elements=keys)


DIALECT = Dialect(name="sqlite", native_insert=native_insert, in_list="expanding", claims="none")
