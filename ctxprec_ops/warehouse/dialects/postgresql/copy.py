"""PostgreSQL's bulk write: ``COPY`` into a session-local temporary staging table shaped like the
target (``ON COMMIT DELETE ROWS``), then one ``INSERT ... SELECT ... ORDER BY key`` — plain under a
savepoint first, ``ON CONFLICT`` when a key exists (``conflicts``). Rows given column by column
(a chunk's judgments) go as array parameters of one statement instead (``unnest``)."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import Table
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection

from ....json_text import JSONText
from ...write_rows import (
    ColumnRows,
    bind_processors,
    bind_values,
    column_processor,
    dedupe,
    keys_and_columns,
)
from ..writes import conflict_action
from .conflicts import ROLLBACK, SAVEPOINT, insert_plain_first
from .unnest import unnest_insert

__all__ = ["copy_upsert", "binary_copyable"]


def _stage_name(table: Table, cols: Sequence[str]) -> str:
    """The staging table's name: one per (target table, column list), so a session that outlives
    a schema change (a column added by a migration) never copies into a stale shape."""
    import hashlib

    sig = "\x00".join([table.schema or "", table.name, *cols]).encode()
    return f"ctxprec_stage_{table.name[:30]}_{hashlib.sha1(sig).hexdigest()[:10]}"


def copy_upsert(conn: Connection, table: Table, rows: Sequence[dict[str, Any]] | ColumnRows, *, update: bool) -> int:
    """PostgreSQL (psycopg 3): ``rows`` into ``table`` with ``COPY`` to a temporary staging
    table and one ``INSERT ... SELECT``: plain when none of the keys exists, else ``ON CONFLICT
    (primary key) DO UPDATE`` (``update``) or ``DO NOTHING`` (``conflicts``), in the
    caller's transaction (a rollback leaves nothing behind; the staging rows vanish at commit).

    The column list comes from the rows (every row carries the same keys) and the conflict target
    from the table's primary key: nothing about the output tables is spelled out here. Values go
    through the columns' own bind processors (JSON serialised as SQLAlchemy would store it).
    Rows are inserted in primary-key order, so concurrent writers lock keys in the same order and
    cannot deadlock. ``ColumnRows`` (distinct keys) are copied column by column as given, without
    a dict per row. Returns the number of rows written.
    """
    if isinstance(rows, ColumnRows):  # column by column already, keys distinct (a chunk's judgments)
        if not len(rows):
            return 0
        keys, cols = keys_and_columns(table, rows)
        given = rows
    else:
        if not rows:
            return 0
        keys, cols = keys_and_columns(table, rows)
        deduped = dedupe(rows, keys, ordered=False)  # ON CONFLICT cannot touch one row twice; SQL sorts
        given = ColumnRows.from_dicts(deduped, cols, keep=keys)
    n = len(given)
    others = [c for c in cols if c not in keys]
    action = conflict_action(conn.dialect.identifier_preparer, others if update else ())
    if _wrapped(conn, table, lambda: unnest_insert(conn, table, given, action)):
        return n
    cols = [*given.columns, *given.shared]  # the order the staging table's columns follow
    raw = [*given.columns.values(), *([value] * n for value in given.shared.values())]
    dialect = conn.dialect
    q = dialect.identifier_preparer
    target = q.format_table(table)
    stage = q.quote(_stage_name(table, cols))
    col_list = ", ".join(q.quote(c) for c in cols)
    conflict = ", ".join(q.quote(k) for k in keys)
    # the staging table empties itself at commit; a second call for the same table inside one
    # transaction empties it first
    used = _stages_used(conn)
    again = f"DELETE FROM {stage}; " if stage in used else ""
    driver = conn.connection.driver_connection
    if driver is None:  # SQLAlchemy's handle lost its DBAPI connection (invalidated)
        raise sa_exc.InvalidRequestError(f"upsert into {table.name}: the connection is no longer usable")
    cur = driver.cursor()
    try:
        # created once per session (ON COMMIT DELETE ROWS keeps it, empty, for the next chunk);
        # inside the transaction, so a rollback also undoes a first-time CREATE
        cur.execute(
            f"SET LOCAL client_min_messages = warning; "
            f"CREATE TEMP TABLE IF NOT EXISTS {stage} ON COMMIT DELETE ROWS AS "
            f"SELECT {col_list} FROM {target} WITH NO DATA; {again}"
        )
        used.add(stage)
        oids = _stage_types(conn, cur, stage)
        if binary_copyable(oids, raw):
            # binary COPY: psycopg writes each value with its C dumper for the column's type
            # (about a third of the client CPU of the text format; the JSON column still goes
            # through its bind processor, whose wrapper the jsonb dumper unwraps)
            columns = [
                bind_values(v, _binary_json(column_processor(table, c, dialect))) if oid in _JSON_OIDS else v
                for c, oid, v in zip(cols, oids, raw)
            ]
            with cur.copy(f"COPY {stage} ({col_list}) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(oids)
                for values in zip(*columns):
                    copy.write_row(values)
        else:  # a value the binary format would need converting: the values SQLAlchemy would bind, as text
            procs = bind_processors(table, cols, dialect)
            columns = [bind_values(v, p) for v, p in zip(raw, procs)]
            with cur.copy(f"COPY {stage} ({col_list}) FROM STDIN") as copy:
                for values in zip(*columns):
                    copy.write_row(values)
        insert = f"INSERT INTO {target} ({col_list}) SELECT {col_list} FROM {stage} ORDER BY {conflict}"
        plain = f"SAVEPOINT {SAVEPOINT}; {insert}; RELEASE SAVEPOINT {SAVEPOINT}"  # one round trip
        if not insert_plain_first(conn, table, lambda: cur.execute(plain), lambda: cur.execute(ROLLBACK)):
            cur.execute(f"{insert} ON CONFLICT ({conflict}) {action}")
    except conn.dialect.loaded_dbapi.Error as exc:
        raise _warehouse_error(conn, f"COPY upsert into {target}", exc) from None
    finally:
        cur.close()
    return n


def _warehouse_error(conn: Connection, what: str, exc: Exception) -> Exception:
    """The driver's error as SQLAlchemy raises it for its own statements (IntegrityError,
    OperationalError, ...), so callers and the one-line error rule see one kind of warehouse
    error; no row data."""
    dbapi_error = conn.dialect.loaded_dbapi.Error
    return sa_exc.DBAPIError.instance(what, None, exc, dbapi_error, hide_parameters=True, dialect=conn.dialect)


def _wrapped(conn: Connection, table: Table, write: Any) -> Any:
    try:
        return write()
    except conn.dialect.loaded_dbapi.Error as exc:
        raise _warehouse_error(conn, f"insert into {table.name}", exc) from None


def _verbatim(text: str) -> str:
    return text


def _binary_json(proc: Any) -> Any:
    """A JSON column's values for binary COPY: the bind processor's wrapper (psycopg's jsonb
    dumper unwraps and serializes it), and ``JSONText`` wrapped to be written as it is."""
    from psycopg.types.json import Jsonb

    def process(value: Any) -> Any:
        if type(value) is JSONText:
            return Jsonb(str(value), dumps=_verbatim)
        return value if proc is None else proc(value)

    return process


#: PostgreSQL type oids -> the Python types whose values psycopg's binary COPY dumpers write as
#: SQLAlchemy would bind them (text, varchar, bpchar, bytea, boolean, int8/2/4, float8,
#: timestamptz — aware datetimes only; jsonb takes its bind processor's wrapper)
_BINARY_TYPES: dict[int, tuple[type, ...]] = {
    25: (str,),
    1043: (str,),
    1042: (str,),
    17: (bytes, bytearray, memoryview),
    16: (bool,),
    20: (int,),
    21: (int,),
    23: (int,),
    701: (float, int),
    1184: (datetime,),
}
_JSON_OIDS = frozenset({3802})
_NONE = {type(None)}


def binary_copyable(oids: Sequence[int], columns: Sequence[list[Any]]) -> bool:
    """Every value of every column has a binary COPY form equal to what the text path stores."""
    for oid, values in zip(oids, columns):
        if oid in _JSON_OIDS:
            continue
        kinds = _BINARY_TYPES.get(oid)
        if kinds is None:
            return False
        if oid == 1184:
            if not all(v is None or (isinstance(v, datetime) and v.tzinfo is not None) for v in values):
                return False
        elif not all(issubclass(kind, kinds) for kind in set(map(type, values)) - _NONE):
            return False  # the values' few distinct types checked, not each value (~1M a 20k-row run)
        elif oid in _INT_RANGES and not _in_range(values, *_INT_RANGES[oid]):
            return False  # the binary dumper would wrap it silently; the text path is refused by the server
    return True


#: integer column oids -> the values their binary form holds (int2, int4, int8)
_INT_RANGES = {21: (-(1 << 15), (1 << 15) - 1), 23: (-(1 << 31), (1 << 31) - 1), 20: (-(1 << 63), (1 << 63) - 1)}


def _in_range(values: list[Any], low: int, high: int) -> bool:
    present = [v for v in values if v is not None]
    return not present or (low <= min(present) and max(present) <= high)


def _stage_types(conn: Connection, cur: Any, stage: str) -> list[int]:
    """The staging table's column type oids, in column order (looked up once per session)."""
    known: dict[str, list[int]] = conn.info.setdefault("ctxprec_stage_types", {})
    oids = known.get(stage)
    if oids is None:
        cur.execute(
            "SELECT atttypid::int FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attnum > 0 "
            "AND NOT attisdropped ORDER BY attnum",
            (stage,),
        )
        oids = known[stage] = [r[0] for r in cur.fetchall()]
    return oids


def _stages_used(conn: Connection) -> set[str]:
    """Staging tables filled in ``conn``'s current transaction (kept on the DBAPI connection,
    keyed by the transaction object, so a new transaction starts with an empty set)."""
    txn = conn.get_transaction()
    info = conn.info
    held = info.get("ctxprec_stages")
    if held is None or held[0] is not txn:
        held = info["ctxprec_stages"] = (txn, set())
    return held[1]
