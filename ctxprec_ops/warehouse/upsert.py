"""Idempotent writes: insert-or-update (and insert-or-ignore) keyed by a table's primary key.

SQLite and PostgreSQL use their native ``INSERT ... ON CONFLICT``. On SQLite that is a few
driver-level multi-row statements (``INSERT ... VALUES (...), (...) ON CONFLICT``, up to
``SQLITE_ROWS_PER_STATEMENT`` rows each). On PostgreSQL several rows go in bulk: ``COPY`` into a
session-local temporary staging table shaped like the target (``ON COMMIT DELETE ROWS``), then one
``INSERT ... SELECT ... ORDER BY key ON CONFLICT`` (``copy_upsert``) — three round trips per table
instead of one statement per row, inside the caller's transaction. Every other dialect takes
the generic path: ``UPDATE`` by key and ``INSERT`` the rows the update did not match, inside the
caller's transaction (correct for one writer per key; concurrent writers of the same key on such
a dialect may see a unique-key error and should retry the chunk).
"""

from __future__ import annotations

import functools
import json
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from itertools import chain, repeat
from operator import is_, itemgetter
from typing import Any

from sqlalchemy import JSON, Boolean, LargeBinary, PrimaryKeyConstraint, Table, and_, bindparam, insert, select, update
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import Connection
from sqlalchemy.sql.dml import Insert

from ..json_text import JSONText

__all__ = ["upsert", "insert_ignore", "native_upsert_supported", "copy_upsert", "ColumnRows"]

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

    def __len__(self) -> int:
        return len(next(iter(self.columns.values()), ()))

    def as_dicts(self) -> list[dict[str, Any]]:
        names = [*self.columns, *self.shared]
        shared = tuple(self.shared.values())
        return [dict(zip(names, (*values, *shared))) for values in zip(*self.columns.values())]


def native_upsert_supported(conn: Connection) -> bool:
    from ctxprec_ops.warehouse.dialects import for_dialect

    return for_dialect(conn.dialect.name).native_upsert


def _native_insert(conn: Connection, table: Table, keys: list[str], others: list[str]) -> Insert:
    """The dialect's ``INSERT ... ON CONFLICT (keys)``: update ``others`` from the new row, or (no
    ``others``) do nothing. SQLite's form on SQLite, PostgreSQL's on every other dialect."""
    if conn.dialect.name == "sqlite":
        from sqlalchemy.dialects.sqlite import insert as sqlite_insert

        lite = sqlite_insert(table)
        if others:
            return lite.on_conflict_do_update(index_elements=keys, set_={c: lite.excluded[c] for c in others})
        return lite.on_conflict_do_nothing(index_elements=keys)
    from sqlalchemy.dialects.postgresql import insert as pg_insert

    pg = pg_insert(table)
    if others:
        return pg.on_conflict_do_update(index_elements=keys, set_={c: pg.excluded[c] for c in others})
    return pg.on_conflict_do_nothing(index_elements=keys)


def _key_columns(table: Table) -> list[str]:
    return [c.name for c in table.primary_key.columns]


def _batches(rows: Sequence[dict[str, Any]]) -> Iterable[Sequence[dict[str, Any]]]:
    for i in range(0, len(rows), BATCH):
        yield rows[i : i + BATCH]


def _dedupe(rows: Sequence[dict[str, Any]], keys: list[str], *, ordered: bool = True) -> list[dict[str, Any]]:
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


def upsert(conn: Connection, table: Table, rows: Sequence[dict[str, Any]], *, native: bool | None = None) -> int:
    """Insert ``rows`` or, where the primary key exists, overwrite the other columns.

    Every row must carry the same keys. Returns the number of rows given (a key given twice is
    written once, with its last row).
    ``native=False`` forces the generic path (used by the tests on SQLite).
    """
    if not rows:
        return 0
    keys = _key_columns(table)
    cols = list(rows[0].keys())
    missing = [k for k in keys if k not in cols]
    if missing:
        raise ValueError(f"upsert into {table.name}: rows lack key column(s) {missing}")
    others = [c for c in cols if c not in keys]
    use_native = native_upsert_supported(conn) if native is None else native
    if use_native and conn.dialect.name == "postgresql" and len(rows) > 1:
        return copy_upsert(conn, table, rows, update=True)
    if use_native and conn.dialect.name == "sqlite":
        # multi-row statements apply the rows in order: a key given twice ends with its last row,
        # as deduplication would leave it (and SQLite locks the whole database, so no key order)
        _sqlite_upsert(conn, table, cols, keys, others, rows)
        return len(rows)
    rows = _dedupe(rows, keys, ordered=conn.dialect.name != "sqlite")
    rows = _decoded(rows)
    if use_native:
        stmt = _native_insert(conn, table, keys, others)
        for batch in _batches(rows):
            conn.execute(stmt, list(batch))
        return len(rows)
    return _generic_upsert(conn, table, rows, keys, others)


def _sqlite_upsert(
    conn: Connection, table: Table, cols: list[str], keys: list[str], others: list[str], rows: Sequence[dict[str, Any]]
) -> None:
    """SQLite's ``INSERT ... ON CONFLICT`` for ``rows``, in order (``_sqlite_write_columns``)."""
    _sqlite_write_columns(conn, table, keys, others, {c: list(map(itemgetter(c), rows)) for c in cols}, {})


def _sqlite_write_columns(
    conn: Connection,
    table: Table,
    keys: list[str],
    others: list[str],
    columns: dict[str, list[Any]],
    shared: dict[str, Any],
) -> None:
    """SQLite's ``INSERT ... ON CONFLICT`` for rows given column by column (``shared``: a value
    every row holds), in order, as multi-row ``VALUES`` statements (``_sqlite_multi_row_sql``):
    the columns' own bind processors (the values SQLAlchemy would store) applied once per value,
    without the per-row statement machinery of ``Connection.execute`` (a third of a chunk's write
    time, spent while the database write lock is held). SQLite applies a multi-row insert's rows
    one after another, conflict clause included, as an ``executemany`` of the same rows does;
    fewer statements to run (one per ``_sqlite_rows_per_statement`` rows instead of one per row)
    and a value every row shares bound once."""
    dialect = conn.dialect
    cols = [*columns, *shared]
    n_rows = len(next(iter(columns.values())))
    types = [table.c[c].type.dialect_impl(dialect) for c in cols]
    procs = [_sqlite_native(t, p) for t, p in zip(types, _bind_processors(table, cols, dialect))]
    # a column that is NULL in every row is written as a literal NULL: the driver binds a None
    # through its adapter look-up (~3,000 instructions per value, e.g. every cached verdict's
    # agreement); a column holding one object in every row (a chunk's timestamp, run id, judge
    # model...) is processed once and is one parameter of the statement; the same rows are stored
    kinds: list[str] = []
    bound: list[list[Any]] = []
    for c, p, t in zip(cols, procs, types):
        values = columns[c] if c in columns else [shared[c]]
        first = values[0]
        if c in shared or all(map(is_, values, repeat(first))):
            value = first if p is None else p(first)
            kinds.append("null" if value is None else "same")
            bound.append([value])
        else:
            kinds.append("row")
            bound.append(_sqlite_bind_values(values, p, t))
    same = [col[0] for col, kind in zip(bound, kinds) if kind == "same"]
    varying = [col for col, kind in zip(bound, kinds) if kind == "row"]
    ignore = not others and _sqlite_can_ignore(table, cols, kinds, bound)
    per_stmt = _sqlite_rows_per_statement(conn, len(same), len(varying))
    for start in range(0, n_rows, per_stmt):
        part = [col[start : start + per_stmt] for col in varying]
        n = min(per_stmt, n_rows - start)
        sql = _sqlite_multi_row_sql(table, tuple(cols), tuple(keys), tuple(others), tuple(kinds), n, dialect, ignore)
        conn.exec_driver_sql(sql, (*same, *chain.from_iterable(zip(*part))) if part else tuple(same))


def _sqlite_can_ignore(table: Table, cols: list[str], kinds: list[str], bound: list[list[Any]]) -> bool:
    """Whether an insert-ignore of these rows may be ``INSERT OR IGNORE`` rather than ``ON
    CONFLICT (key) DO NOTHING``: the same rows are stored when the only constraint the rows can
    break is the primary key — no NULL in a NOT NULL column and no such column left out without
    a default (checked here), no other unique or check constraint on the table.

    ``OR IGNORE`` needs no statement journal (a statement that can abort half-way must be able to
    undo its own changes): for a chunk's judgment-cache rows, scattered over the key index, that
    journal spilled to a temporary file, ~190,000 writes of 4 KiB pages and page numbers per
    40,000 rows (bench/README.md, issue 16's seventh pass)."""
    if not _only_key_constraint(table):
        return False
    given = set(cols)
    if any(not c.nullable and c.server_default is None and c.name not in given for c in table.columns):
        return False  # a NOT NULL column left out would be NULL: the ordinary statement's error
    for c, kind, values in zip(cols, kinds, bound):
        if not table.c[c].nullable and (kind == "null" or (kind == "row" and None in values)):
            return False  # the ordinary statement, which raises the database's own error
    return True


@functools.lru_cache(maxsize=64)
def _only_key_constraint(table: Table) -> bool:
    """The table's only constraint (unique, check, foreign key) is its primary key."""
    others = [c for c in table.constraints if not isinstance(c, PrimaryKeyConstraint)]
    on_columns = any(col.constraints or col.foreign_keys for col in table.columns)  # e.g. Column(CheckConstraint)
    return not others and not on_columns and not any(ix.unique for ix in table.indexes) and bool(table.primary_key)


#: rows per multi-row ``INSERT`` at most: preparing a statement costs about as much per row as
#: running it, so a chunk's rows go in a few statements of one shape (prepared once per
#: connection) rather than one long statement of each size. 128 rather than 32: a chunk's 2,500
#: judgment-cache rows in 20 statements instead of 79 (~6,800 instructions a case less, each
#: statement's own cost in SQLAlchemy and the driver; bench/README.md, issue 16's sixth pass)
SQLITE_ROWS_PER_STATEMENT = 128


def _sqlite_rows_per_statement(conn: Connection, shared: int, varying: int) -> int:
    """Rows one statement takes: ``SQLITE_ROWS_PER_STATEMENT``, fewer when their parameters would
    pass the connection's limit of bound parameters (999 where it cannot be asked)."""
    limit = 999
    driver = getattr(conn.connection, "driver_connection", None)
    getlimit = getattr(driver, "getlimit", None)
    if getlimit is not None:
        limit = getlimit(sqlite3.SQLITE_LIMIT_VARIABLE_NUMBER)
    return max(1, min(SQLITE_ROWS_PER_STATEMENT, (limit - shared) // max(varying, 1)))


@functools.lru_cache(maxsize=64)
def _sqlite_multi_row_sql(
    table: Table,
    cols: tuple[str, ...],
    keys: tuple[str, ...],
    others: tuple[str, ...],
    kinds: tuple[str, ...],
    rows: int,
    dialect: Any,
    ignore: bool = False,
) -> str:
    """``INSERT INTO table (cols) VALUES (...), ... ON CONFLICT (keys) DO UPDATE SET others`` (or
    ``DO NOTHING``; with ``ignore``, ``INSERT OR IGNORE``: ``_sqlite_can_ignore``) for ``rows``
    rows. Per column (``kinds``): ``null`` a literal NULL, ``same`` one parameter every row
    shares, ``row`` a parameter per row. The shared columns come first in each row as ``?1``,
    ``?2``, ... and the others as plain ``?`` (numbered on from there in order), so the parameters
    are the shared values, then each row's own values row by row (SQLite looks a numbered
    parameter up in a list: only the shared ones are numbered, or preparing a statement of many
    rows took time quadratic in its parameters). One text per shape: the driver's statement
    cache prepares it once."""
    q = dialect.identifier_preparer
    conflict = ", ".join(q.quote(k) for k in keys)
    action = (
        ("DO UPDATE SET " + ", ".join(f"{q.quote(c)} = excluded.{q.quote(c)}" for c in others))
        if others
        else "DO NOTHING"
    )
    order = [i for i, k in enumerate(kinds) if k == "same"] + [i for i, k in enumerate(kinds) if k != "same"]
    slots = []
    for number, i in enumerate(order, start=1):
        kind = kinds[i]
        slots.append(f"?{number}" if kind == "same" else "NULL" if kind == "null" else "?")
    group = f"({', '.join(slots)})"
    head = "INSERT OR IGNORE INTO" if ignore else "INSERT INTO"
    return (
        f"{head} {q.format_table(table)} ({', '.join(q.quote(cols[i]) for i in order)}) "
        f"VALUES {', '.join([group] * rows)}{'' if ignore else f' ON CONFLICT ({conflict}) {action}'}"
    )


def _bind_processors(table: Table, cols: Sequence[str], dialect: Any) -> list[Any]:
    """The columns' own bind processors (the values SQLAlchemy would store); a JSON column's
    passes ``JSONText`` (JSON serialized already) through as it is."""
    procs = []
    for c in cols:
        proc = _processor(table, c, dialect)
        if proc is not None and isinstance(table.c[c].type, JSON):
            proc = _passing_json_text(proc)
        procs.append(proc)
    return procs


def _sqlite_native(type_: Any, proc: Any) -> Any:
    """A SQLite column's bind processor with shortcuts to what it returns for the common values:
    a binary column's ``bytes`` as a ``bytearray`` (the same BLOB, but the driver binds a
    ``bytearray`` directly, where ``bytes`` or the processor's ``memoryview`` go through its
    adapter look-up: two failed attribute look-ups, one raising ``AttributeError``, ~3,000
    instructions per value), a boolean's ``True``/``False`` as the processor's ``1``/``0``
    (without its two Python calls). Anything else goes to the processor."""
    if proc is None:
        return None
    if isinstance(type_, LargeBinary):

        def binary(value: Any) -> Any:
            return bytearray(value) if type(value) is bytes else proc(value)

        return binary
    if isinstance(type_, Boolean):

        def boolean(value: Any) -> Any:
            return 1 if value is True else 0 if value is False else proc(value)

        return boolean
    return proc


def _sqlite_bind_values(values: list[Any], process: Any, type_: Any) -> list[Any]:
    """A column's values through its ``_sqlite_native`` processor, the shortcuts taken for the
    whole column at once where every value is of the usual type (no Python call per value): a
    binary column of ``bytes`` as ``bytearray``s, a boolean column of ``bool``s as ``1``/``0``."""
    if process is None:
        return values
    kinds = set(map(type, values))
    if len(kinds) == 1:
        if bytes in kinds and isinstance(type_, LargeBinary):
            return list(map(bytearray, values))
        if bool in kinds and isinstance(type_, Boolean):
            return list(map(int, values))
    return list(map(process, values))


def _passing_json_text(proc: Any) -> Any:
    def process(value: Any) -> Any:
        return str(value) if type(value) is JSONText else proc(value)

    return process


def _decoded(rows: Sequence[dict[str, Any]]) -> Sequence[dict[str, Any]]:
    """Rows for a write path that binds through SQLAlchemy: ``JSONText`` values decoded again."""
    first = rows[0] if rows else {}
    cols = [c for c, v in first.items() if type(v) is JSONText]
    if not cols:
        return rows
    return [{**r, **{c: json.loads(r[c]) if type(r[c]) is JSONText else r[c] for c in cols}} for r in rows]


def _bind_values(values: list[Any], process: Any) -> list[Any]:
    """One column's values through its bind processor; a column holding the same object in
    every row (a chunk's timestamp) is processed once. Identity, not equality: ``1 == True``
    but a JSON column stores them differently."""
    if process is None or not values:
        return values
    first = values[0]
    if all(map(is_, values, repeat(first))):
        return [process(first)] * len(values)
    return list(map(process, values))


def _generic_upsert(conn: Connection, table: Table, rows, keys: list[str], others: list[str]) -> int:
    # bind names must not clash with column names in UPDATE ... SET
    where = and_(*[table.c[k] == bindparam(f"k_{k}") for k in keys])
    upd = update(table).where(where).values({c: bindparam(f"v_{c}") for c in others}) if others else None
    exists = select(*[table.c[k] for k in keys]).where(where)
    for row in rows:
        params = {f"k_{k}": row[k] for k in keys}
        if upd is not None:
            params.update({f"v_{c}": row[c] for c in others})
            matched = conn.execute(upd, params).rowcount
        else:
            matched = 1 if conn.execute(exists, params).first() is not None else 0
        if not matched:
            conn.execute(insert(table), [row])
    return len(rows)


def insert_ignore(
    conn: Connection, table: Table, rows: Sequence[dict[str, Any]] | ColumnRows, *, native: bool | None = None
) -> int:
    """Insert ``rows`` whose primary key is not present yet; existing rows are left untouched."""
    if not len(rows):
        return 0
    keys = _key_columns(table)
    if isinstance(rows, ColumnRows) and (missing := [k for k in keys if k not in rows.columns]):
        raise ValueError(f"insert into {table.name}: rows lack key column(s) {missing} (a key is not shared)")
    use_native = native_upsert_supported(conn) if native is None else native
    if isinstance(rows, ColumnRows):
        if use_native and conn.dialect.name == "sqlite":  # distinct keys: nothing to de-duplicate
            _sqlite_write_columns(conn, table, keys, [], rows.columns, rows.shared)
            return len(rows)
        rows = rows.as_dicts()
    if use_native and conn.dialect.name == "postgresql" and len(rows) > 1:
        return copy_upsert(conn, table, rows, update=False)
    rows = _dedupe(rows, keys, ordered=conn.dialect.name != "sqlite")
    if use_native and conn.dialect.name == "sqlite":
        _sqlite_upsert(conn, table, list(rows[0].keys()), keys, [], rows)
        return len(rows)
    if use_native:
        stmt = _native_insert(conn, table, keys, [])
        for batch in _batches(rows):
            conn.execute(stmt, list(batch))
        return len(rows)
    exists = select(*[table.c[k] for k in keys]).where(and_(*[table.c[k] == bindparam(f"k_{k}") for k in keys]))
    for row in rows:
        if conn.execute(exists, {f"k_{k}": row[k] for k in keys}).first() is None:
            conn.execute(insert(table), [row])
    return len(rows)


def _stage_name(table: Table, cols: Sequence[str]) -> str:
    """The staging table's name: one per (target table, column list), so a session that outlives
    a schema change (a column added by a migration) never copies into a stale shape."""
    import hashlib

    sig = "\x00".join([table.schema or "", table.name, *cols]).encode()
    return f"ctxprec_stage_{table.name[:30]}_{hashlib.sha1(sig).hexdigest()[:10]}"


def copy_upsert(conn: Connection, table: Table, rows: Sequence[dict[str, Any]], *, update: bool) -> int:
    """PostgreSQL (psycopg 3): ``rows`` into ``table`` with ``COPY`` to a temporary staging
    table and one ``INSERT ... SELECT ... ON CONFLICT (primary key) DO UPDATE`` (``update``) or
    ``DO NOTHING``, in the caller's transaction (a rollback leaves nothing behind; the staging
    rows vanish at commit).

    The column list comes from the rows (every row carries the same keys) and the conflict target
    from the table's primary key: nothing about the output tables is spelled out here. Values go
    through the columns' own bind processors (JSON serialised as SQLAlchemy would store it).
    Rows are inserted in primary-key order, so concurrent writers lock keys in the same order and
    cannot deadlock. Returns the number of rows written.
    """
    if not rows:
        return 0
    keys = _key_columns(table)
    cols = list(rows[0].keys())
    missing = [k for k in keys if k not in cols]
    if missing:
        raise ValueError(f"upsert into {table.name}: rows lack key column(s) {missing}")
    rows = _dedupe(rows, keys, ordered=False)  # ON CONFLICT cannot touch one row twice; SQL sorts
    dialect = conn.dialect
    q = dialect.identifier_preparer
    target = q.format_table(table)
    stage = q.quote(_stage_name(table, cols))
    col_list = ", ".join(q.quote(c) for c in cols)
    others = [c for c in cols if c not in keys]
    conflict = ", ".join(q.quote(k) for k in keys)
    if update and others:
        action = "DO UPDATE SET " + ", ".join(f"{q.quote(c)} = EXCLUDED.{q.quote(c)}" for c in others)
    else:
        action = "DO NOTHING"
    raw = [[r[c] for r in rows] for c in cols]
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
        if _binary_copyable(oids, raw):
            # binary COPY: psycopg writes each value with its C dumper for the column's type
            # (about a third of the client CPU of the text format; the JSON column still goes
            # through its bind processor, whose wrapper the jsonb dumper unwraps)
            columns = [
                _bind_values(v, _binary_json(_processor(table, c, dialect))) if oid in _JSON_OIDS else v
                for c, oid, v in zip(cols, oids, raw)
            ]
            with cur.copy(f"COPY {stage} ({col_list}) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types(oids)
                for values in zip(*columns):
                    copy.write_row(values)
        else:  # a value the binary format would need converting: the values SQLAlchemy would bind, as text
            procs = _bind_processors(table, cols, dialect)
            columns = [_bind_values(v, p) for v, p in zip(raw, procs)]
            with cur.copy(f"COPY {stage} ({col_list}) FROM STDIN") as copy:
                for values in zip(*columns):
                    copy.write_row(values)
        cur.execute(
            f"INSERT INTO {target} ({col_list}) SELECT {col_list} FROM {stage} ORDER BY {conflict} "
            f"ON CONFLICT ({conflict}) {action}"
        )
    except conn.dialect.loaded_dbapi.Error as exc:
        # as SQLAlchemy raises for its own statements (IntegrityError, OperationalError, ...), so
        # callers and the one-line error rule see one kind of warehouse error; no row data
        raise sa_exc.DBAPIError.instance(
            f"COPY upsert into {target}",
            None,
            exc,
            conn.dialect.loaded_dbapi.Error,
            hide_parameters=True,
            dialect=conn.dialect,
        ) from None
    finally:
        cur.close()
    return len(rows)


def _processor(table: Table, column: str, dialect: Any) -> Any:
    return table.c[column].type.dialect_impl(dialect).bind_processor(dialect)


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


def _binary_copyable(oids: Sequence[int], columns: Sequence[list[Any]]) -> bool:
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
        elif not all(v is None or isinstance(v, kinds) for v in values):
            return False
    return True


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
