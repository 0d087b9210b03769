"""MySQL / MariaDB: INSERT ... ON DUPLICATE KEY UPDATE, expanding IN binds, GET_LOCK claims,
READ COMMITTED."""

from __future__ import annotations

from typing import Any

from ctxprec_ops.warehouse.dialects import Dialect


def native_insert(table: Any, keys: list[str], others: list[str]) -> Any:
    """``ON DUPLICATE KEY UPDATE``; an insert that leaves existing rows alone updates a key column
    to itself (``INSERT IGNORE`` would also turn strict mode's errors into warnings)."""
    from sqlalchemy.dialects.mysql import insert

    stmt = insert(table)
    if others:
        return stmt.on_duplicate_key_update({c: stmt.inserted[c] for c in others})
    return stmt.on_duplicate_key_update({keys[0]: table.c[keys[0]]})


DIALECT = Dialect(
    name="mysql",
    native_insert=native_insert,
    in_list="expanding",
    claims="named_lock",
    # InnoDB's default REPEATABLE READ takes gap locks on every searched range: two runs writing
    # their own run rows and chunks then deadlock on each other's gaps. READ COMMITTED
    # (PostgreSQL's default, which the write path is built for) takes none.
    engine_options={"isolation_level": "READ COMMITTED"},
)
