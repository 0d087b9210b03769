"""The store's dialect registry (issue 30.2): what differs between database families, in one
place per family, so adding a dialect means adding one module here and one line in ``_MODULES``.

``for_dialect(name)`` returns the family's :class:`Dialect`. A name no module claims gets the
generic family, with a warning that names the dialect. What each family declares: the facts the write path,
the claims, the reflection and the DDL branch on.
"""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any, Literal

log = logging.getLogger(__name__)


#: a family's native insert-or-update: (table, key columns, columns to update) -> the statement;
#: with no columns to update it leaves an existing row as it is
NativeInsert = Callable[[Any, list[str], list[str]], Any]


def on_conflict(insert: Callable[[Any], Any]) -> NativeInsert:
    """The ``INSERT ... ON CONFLICT (keys) DO UPDATE / DO NOTHING`` builder for a dialect's
    ``insert`` construct (SQLite's and PostgreSQL's take the same arguments)."""

    def build(table: Any, keys: list[str], others: list[str]) -> Any:
        stmt = insert(table)
        if others:
            return stmt.on_conflict_do_update(index_elements=keys, set_={c: stmt.excluded[c] for c in others})
        return stmt.on_conflict_do_nothing(index_elements=keys)

    return build


@dataclass(frozen=True)
class Dialect:
    """One dialect family's strategies."""

    name: str
    # the native INSERT ... ON CONFLICT (or the family's equivalent); None: the generic path
    native_insert: NativeInsert | None
    # how a list of ids is bound in reads: "any_array" (= ANY(:ids), PostgreSQL) or "expanding"
    in_list: Literal["any_array", "expanding"]
    # how chunk claims are held (``warehouse/claims.py``): "advisory" (PostgreSQL session locks),
    # "named_lock" (MySQL's GET_LOCK, also held by the session), "lease" (a row of the
    # ctxprec_claims table renewed while held, ``warehouse/lease_claims.py``: DuckDB, Snowflake)
    # or "none" (every claim succeeds: SQLite's one writer)
    claims: Literal["advisory", "named_lock", "lease", "none"]
    # keyword arguments for ``create_engine`` (``warehouse/engine.py``)
    engine_options: Mapping[str, Any] = field(default_factory=dict)
    # how tables are read (``warehouse/reflect.py``): SQLAlchemy's inspector, or
    # ``information_schema`` where the dialect's inspector fails (duckdb-engine)
    reflection: Literal["inspector", "information_schema"] = "inspector"
    # whether the output tables get their secondary indexes (``schema.py``): not on Snowflake
    # (standard tables take none) nor DuckDB (zone maps instead; ON CONFLICT cannot update an
    # indexed column there)
    secondary_indexes: bool = True
    # whether the database enforces primary keys; where it does not (Snowflake, BigQuery, ...),
    # the writer dedupes and MERGEs, and readers keep the latest row of a key
    keys_enforced: bool = True
    # the MERGE family (``warehouse/merge_write.py``): stage the chunk in a temporary table, then
    # one MERGE; taken instead of ``native_insert``
    merge: bool = False
    # whether writes go as a registered DataFrame scanned by one INSERT ... SELECT ... ON CONFLICT
    # (``warehouse/duckdb_write.py``): DuckDB runs an executemany as one statement per row
    frame_write: bool = False
    # whether an error is a write conflict with a concurrent transaction that the same
    # (idempotent) write transaction, run again, gets past (DuckDB's optimistic concurrency)
    write_conflict: Callable[[BaseException], bool] | None = None

    @property
    def native_upsert(self) -> bool:
        return self.native_insert is not None or self.merge or self.frame_write


# dialect name (SQLAlchemy's ``dialect.name``) -> the module under this package defining DIALECT
_MODULES = {
    "sqlite": "sqlite",
    "postgresql": "postgresql",
    "mysql": "mysql",
    "mariadb": "mysql",
    "duckdb": "duckdb",
    "snowflake": "snowflake",
}


@cache
def for_dialect(name: str) -> Dialect:
    module = _MODULES.get(name)
    if module is None:
        log.warning("warehouse dialect %r has no dedicated support: using the generic path", name)
        module = "generic"
    found: Dialect = importlib.import_module(f"{__name__}.{module}").DIALECT
    return found
