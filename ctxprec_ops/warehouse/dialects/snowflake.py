"""Snowflake: the MERGE write path (``warehouse/merge_write.py``), keys not enforced (readers keep
the latest row of a key), lease claims (``warehouse/lease_claims.py``), expanding IN binds, no
secondary indexes (standard tables take none)."""

from __future__ import annotations

from ctxprec_ops.warehouse.dialects import Dialect

#: Snowflake's "statement aborted: the table is locked by another transaction" (lock wait timeout)
_LOCK_TIMEOUT = 625


def write_conflict(exc: BaseException) -> bool:
    """A write another transaction's lock made fail (Snowflake: lock wait timeout), or, under the
    fakesnow emulator, DuckDB's optimistic concurrency (a raw ``TransactionException`` or a
    ``ConstraintException`` on a key the other transaction inserted first); run again, the write
    updates or skips the row."""
    orig = getattr(exc, "orig", None) or exc
    if getattr(orig, "errno", None) == _LOCK_TIMEOUT:
        return True
    emulated = type(orig).__module__.startswith("_duckdb") or type(orig).__module__.startswith("duckdb")
    return emulated and type(orig).__name__ in ("TransactionException", "ConstraintException")


DIALECT = Dialect(
    name="snowflake",
    native_insert=None,
    merge=True,
    in_list="expanding",
    claims="lease",
    secondary_indexes=False,
    keys_enforced=False,
    write_conflict=write_conflict,
)
