"""PostgreSQL: INSERT ... ON CONFLICT (and COPY, ``warehouse/pg_copy.py``), = ANY(array) binds,
advisory-lock claims."""

from __future__ import annotations

from typing import Any

from ctxprec_ops.warehouse.dialects import Dialect


def native_insert(table: Any, keys: list[str], others: list[str]) -> Any:
    from sqlalchemy.dialects.postgresql import insert

    stmt = insert(table)
    if others:
        return stmt.on_conflict_do_update(index_elements=keys, set_={c: stmt.excluded[c] for c in others})
    return stmt.on_conflict_do_nothing(index_elements=keys)


DIALECT = Dialect(name="postgresql", native_insert=native_insert, in_list="any_array", claims="advisory")
