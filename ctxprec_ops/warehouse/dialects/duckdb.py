"""DuckDB (duckdb-engine): writes and id look-ups through tables registered on the connection
(``warehouse/duckdb_write.py``: one ``INSERT ... SELECT ... ON CONFLICT``, ``IN (SELECT v ...)``),
lease claims (``warehouse/lease_claims.py``), reflection through ``information_schema``, no
secondary indexes, write conflicts retried."""

from __future__ import annotations

from ctxprec_ops.warehouse.dialects import Dialect


def write_conflict(exc: BaseException) -> bool:
    """DuckDB's concurrency is optimistic: of two transactions writing the same row (or inserting
    the same key: a judgment shared by two chunks), the second fails instead of waiting. Its
    transaction, run again once the first committed, finds the row and updates or skips it."""
    orig = getattr(exc, "orig", None) or exc
    kind = type(orig).__name__
    text = str(orig)
    return (
        kind == "TransactionException"
        or "Conflict on" in text
        or (kind == "ConstraintException" and "Duplicate key" in text)
    )


DIALECT = Dialect(
    name="duckdb",
    native_insert=None,  # its writes go as frames (frame_write)
    in_list="expanding",
    claims="lease",
    reflection="information_schema",
    secondary_indexes=False,
    frame_write=True,
    write_conflict=write_conflict,
)
