"""Reads and writes on the output tables that the pipeline needs, as small functions."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any

from sqlalchemy import LargeBinary, Text, and_, any_, bindparam, case, delete, exists, func, null, select, true, update
from sqlalchemy import column as sql_column
from sqlalchemy import table as sql_table
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Connection
from sqlalchemy.sql.elements import ColumnElement

from ..judge.cache import key_head, key_range
from ..scoring.consistency import node_verdict
from ..scoring.verdicts import NodeVerdict
from .analyze import analyze_if_grown
from .dialects import for_dialect
from .duckdb_write import registered_values
from .engine import stream_batches
from .schema import OutputTables, readable
from .upsert import ColumnRows, insert_ignore, upsert

__all__ = [
    "ScoringKey",
    "scored_ids",
    "load_judgments",
    "write_chunk",
    "delete_failures",
    "partition_scores",
    "partition_counts",
    "failure_counts",
    "run_spend",
    "mark_interrupted_runs",
    "analyze_if_grown",
    "IN_BATCH",
]

#: ids / keys per ``IN (...)`` list (well under every backend's bound-parameter limit)
IN_BATCH = 500

log = logging.getLogger("ctxprec_ops.warehouse")

_first = itemgetter(0)


@dataclass(frozen=True)
class ScoringKey:
    """One scoring configuration: scores and failures are unique per (log_id, *this*)."""

    metric: str
    judge_model: str
    prompt_version: str
    #: the input table (``SourceTable.name``); None only to read tables written before the
    #: column existed
    source_table: str | None = None
    #: the column mapping's fingerprint (``pipeline.mapping.mapping_id``); None: any (readers of
    #: tables written before the column existed). Tables without the column ignore it.
    mapping: str | None = None

    def where(self, table) -> Any:
        return and_(*(table.c[name] == value for name, value in self.fields(table)))

    def fields(self, table) -> list[tuple[str, str]]:
        """The (column, value) equalities that select this key's rows of ``table``."""
        out = [("metric", self.metric), ("judge_model", self.judge_model), ("prompt_version", self.prompt_version)]
        if self.source_table is not None:
            out.append(("source_table", self.source_table))
        if self.mapping is not None and "mapping" in table.c:
            out.append(("mapping", self.mapping))
        return out


def _chunks(items: Sequence[Any], n: int = IN_BATCH) -> Iterable[Sequence[Any]]:
    for i in range(0, len(items), n):
        yield items[i : i + n]


def _id_lists(conn: Connection, column: Any, values: Sequence[Any]) -> Iterator[ColumnElement[bool]]:
    """``column IN values`` in pieces the backend accepts. PostgreSQL: one ``= ANY(:array)``
    with the whole list as one text[] parameter (one statement, one bound value, whatever the
    length: no per-value binding work in the client and one query text for the server)."""
    if for_dialect(conn.dialect.name).in_list == "any_array":
        if values:
            yield column == any_(bindparam("ids", list(values), type_=ARRAY(Text())))
        return
    if for_dialect(conn.dialect.name).frame_write:  # DuckDB: one registered DataFrame
        if values:
            with registered_values(conn, values) as name:
                yield column.in_(select(sql_column("v")).select_from(sql_table(name)))
        return
    for part in _chunks(list(values)):
        yield column.in_(list(part))


def scored_ids(conn: Connection, t: OutputTables, key: ScoringKey, log_ids: Sequence[str]) -> set[str]:
    """Which of ``log_ids`` already have a score for this configuration.

    The conditions are equalities on all four primary-key columns, so the unique index answers
    it (an index-only scan). On PostgreSQL that plan needs statistics: without them the planner
    guesses that 0.5% of the rows match ``metric`` and prefers the partition index, a plan whose
    cost grows with the table (see ``analyze_if_grown`` and docs/scaling.md).
    """
    found: set[str] = set()
    if conn.dialect.name == "sqlite":
        sql, params = _sqlite_key_select(conn, t.scores, key, ["log_id"], "log_id")
        for part in _chunks(list(dict.fromkeys(log_ids))):
            found.update(r[0] for r in _sqlite_in(conn, sql, params, part))
        return found
    for cond in _id_lists(conn, t.scores.c.log_id, list(dict.fromkeys(log_ids))):
        stmt = select(t.scores.c.log_id).where(key.where(t.scores), cond)
        found.update(r[0] for r in conn.execute(stmt))
    return found


def load_judgments(
    conn: Connection, t: OutputTables, keys: Iterable[bytes], *, agreement: bool = True
) -> dict[bytes, NodeVerdict]:
    """Cached verdicts for ``keys`` (``node`` is 0: the metric re-numbers by rank); a verdict of
    sampled answers comes back as a ``SampledVerdict`` with its agreement. ``agreement=False``
    reads without that column (a reader of a table an older version wrote, not migrated yet).

    PostgreSQL: one statement per call that probes each *question* once instead of each node:
    the keys of one question share their first ``KEY_HEAD_BYTES`` bytes and sit next to each
    other in the key index, so a join of the distinct heads against their key ranges
    (``cache.key_range``) reads one index range per question (a never-judged question costs one
    index descent that finds nothing, ~5x fewer than looking its nodes up one by one). Other
    backends: ``IN`` lists.
    """
    wanted = list(dict.fromkeys(keys))
    out: dict[bytes, NodeVerdict] = {}
    j = t.judgments.c
    cols = [j.key, j.relevant, j.reason, j.agreement if agreement else null()]
    if conn.dialect.name == "postgresql":
        if not wanted:
            return out
        want = set(wanted)
        ranges = [key_range(h) for h in sorted({key_head(k) for k in wanted})]
        bounds = {"lo": [lo for lo, _ in ranges], "hi": [hi for _, hi in ranges]}
        for k, relevant, reason, agreed in conn.execute(_heads_lookup(t, agreement), bounds):
            k = bytes(k)
            if k in want:  # the range also returns the question's other cached nodes
                out[k] = node_verdict(0, bool(relevant), reason or "", agreed)
        return out
    if conn.dialect.name == "sqlite":
        names = ["key", "relevant", "reason", "agreement" if agreement else None]
        sql, params = _sqlite_key_select(conn, t.judgments, None, names, "key")
        for part in _chunks(wanted):  # bytearray: bound as is (bytes go through the driver's adapter look-up)
            for k, relevant, reason, agreed in _sqlite_in(conn, sql, params, [bytearray(k) for k in part]):
                out[k] = node_verdict(0, bool(relevant), reason or "", agreed)
        return out
    for cond in _id_lists(conn, j.key, wanted):
        for k, relevant, reason, agreed in conn.execute(select(*cols).where(cond)):
            out[bytes(k)] = node_verdict(0, bool(relevant), reason or "", agreed)
    return out


def _sqlite_key_select(
    conn: Connection, table: Any, key: ScoringKey | None, columns: Sequence[str | None], in_column: str
) -> tuple[str, tuple[Any, ...]]:
    """SQLite: ``SELECT columns FROM table WHERE <key's columns> = ? ... AND in_column IN`` (the
    list follows, see ``_sqlite_in``; a ``None`` column reads NULL) and the key's parameters. The same query the Core
    statement renders, sent as driver SQL: a chunk's 500-value ``IN`` lists otherwise cost more
    to compile and bind in Python than SQLite takes to answer them."""
    q = conn.dialect.identifier_preparer
    conds, params = _sqlite_key_conds(q, table, key) if key is not None else ([], ())
    conds.append(f"{q.quote(table.c[in_column].name)} IN")
    cols = ", ".join("NULL" if c is None else q.quote(table.c[c].name) for c in columns)
    return f"SELECT {cols} FROM {q.format_table(table)} WHERE {' AND '.join(conds)}", params


def _sqlite_key_conds(q: Any, table: Any, key: ScoringKey) -> tuple[list[str], tuple[Any, ...]]:
    """``key.where(table)`` as driver SQL: ``column = ?`` conditions and their parameters."""
    fields = key.fields(table)
    return [f"{q.quote(table.c[name].name)} = ?" for name, _ in fields], tuple(v for _, v in fields)


def _sqlite_scored_failures_delete(conn: Connection, t: OutputTables, key: ScoringKey) -> tuple[str, tuple[Any, ...]]:
    """SQLite: ``DELETE FROM failures WHERE <key> AND <a score exists for the row> AND log_id IN``
    (the list follows, see ``_sqlite_in``) and its parameters: ``write_chunk``'s Core statement
    as driver SQL, for the reason ``_sqlite_key_select`` gives."""
    q = conn.dialect.identifier_preparer
    f, s = q.format_table(t.failures), q.format_table(t.scores)
    key_cols = ["log_id", "metric", "judge_model", "prompt_version", "source_table", "mapping"]
    same = " AND ".join(f"sc.{q.quote(c)} = {f}.{q.quote(c)}" for c in key_cols)
    conds, params = _sqlite_key_conds(q, t.failures, key)
    conds.append(f"EXISTS (SELECT 1 FROM {s} AS sc WHERE {same})")
    conds.append(f"{q.quote('log_id')} IN")
    return f"DELETE FROM {f} WHERE {' AND '.join(conds)}", params


def _sqlite_in(conn: Connection, sql: str, params: tuple[Any, ...], values: Sequence[Any]) -> Any:
    """Run ``sql`` (ending in ``IN``) with ``values`` as its list."""
    return conn.exec_driver_sql(f"{sql} ({', '.join('?' * len(values))})", (*params, *values))


#: cached nodes read per question at most (a LIMIT that also keeps the per-question lookup a
#: nested loop of index range scans: the planner cannot flatten a LATERAL subquery with a LIMIT)
_NODES_PER_QUESTION = 100_000


def _heads_lookup(t: OutputTables, agreement: bool = True) -> Any:
    """``SELECT key, relevant, reason, agreement FROM unnest(:lo, :hi) h CROSS JOIN LATERAL
    (SELECT ... FROM judgments WHERE key BETWEEN h.lo AND h.hi LIMIT n)``, one (lo, hi) per
    question's key head. The plan is one index range scan per head whatever the table's
    statistics say (a plain join, planned without statistics, became a hash join over the whole
    table)."""
    j = t.judgments
    binary = ARRAY(LargeBinary())
    h = (
        func.unnest(bindparam("lo", type_=binary), bindparam("hi", type_=binary))
        .table_valued("lo", "hi")
        .render_derived(name="h")
    )
    agreed = j.c.agreement if agreement else null().label("agreement")
    per_head = (
        select(j.c.key, j.c.relevant, j.c.reason, agreed)
        .where(j.c.key >= h.c.lo, j.c.key <= h.c.hi)
        .limit(_NODES_PER_QUESTION)
        .lateral("j")
    )
    p = per_head.c
    return select(p.key, p.relevant, p.reason, p.agreement).select_from(h).join(per_head, true())


def write_chunk(
    conn: Connection,
    t: OutputTables,
    key: ScoringKey,
    *,
    log_ids: Sequence[str],
    scores: list[dict[str, Any]],
    failures: list[dict[str, Any]],
    judgments: list[dict[str, Any]] | ColumnRows,
    native: bool | None = None,
) -> None:
    """Write one chunk's outcome (call inside one transaction).

    Upserts scores and failures, inserts new cache entries, then deletes the failure records of
    this chunk's rows that now have a score (this run's or a concurrent worker's), so each row
    ends in exactly one of the two tables.
    """
    upsert(conn, t.scores, scores, native=native)
    upsert(conn, t.failures, failures, native=native)
    insert_ignore(conn, t.judgments, judgments, native=native)
    s, f = t.scores, t.failures
    if conn.dialect.name == "sqlite" and native is not False:
        sql, params = _sqlite_scored_failures_delete(conn, t, key)
        for part in _chunks(list(dict.fromkeys(log_ids))):
            _sqlite_in(conn, sql, params, part)
        return
    scored = exists().where(
        s.c.log_id == f.c.log_id,
        s.c.metric == f.c.metric,
        s.c.judge_model == f.c.judge_model,
        s.c.prompt_version == f.c.prompt_version,
        s.c.source_table == f.c.source_table,
        s.c.mapping == f.c.mapping,
    )
    for cond in _id_lists(conn, f.c.log_id, list(dict.fromkeys(log_ids))):
        conn.execute(delete(f).where(key.where(f), cond, scored))


def delete_failures(conn: Connection, t: OutputTables, key: ScoringKey, log_ids: Sequence[str]) -> None:
    """Delete the failure records of ``log_ids`` (rows outside this run's sample)."""
    f = t.failures
    for part in _chunks(list(log_ids)):
        conn.execute(delete(f).where(key.where(f), f.c.log_id.in_(list(part))))


def partition_scores(
    conn: Connection, t: OutputTables, key: ScoringKey, partition_key: str, batch: int = 20_000
) -> Iterator[Any]:
    """The partition's scores in ascending order, streamed from the cursor as float64 numpy
    arrays of up to ``batch`` values (memory: one batch, however many rows the partition has).
    Consume it while ``conn`` is open."""
    import numpy as np

    scores = readable(conn.dialect.name, t.scores)
    c = scores.c
    stmt = select(c.score).where(key.where(scores), c.partition_key == partition_key).order_by(c.score)
    for part in stream_batches(conn, stmt, batch):
        yield np.fromiter(map(_first, part), dtype=np.float64, count=len(part))


def partition_counts(
    conn: Connection, t: OutputTables, key: ScoringKey, partition_key: str, run_id: str
) -> dict[str, Any]:
    """Counts over the partition's scores: total, passed, and those that cost no judge call in
    this run (scored by an earlier run, or answered entirely from the judgment cache)."""
    scores = readable(conn.dialect.name, t.scores)
    c = scores.c
    cached = case(
        (c.run_id != run_id, 1),
        (and_(func.coalesce(c.judge_calls, 0) == 0, func.coalesce(c.cached_nodes, 0) > 0), 1),
        else_=0,
    )
    passed = case((c.success.is_(True), 1), else_=0)
    stmt = select(func.count(), func.sum(passed), func.sum(cached)).where(
        key.where(scores), c.partition_key == partition_key
    )
    total, n_pass, n_cached = conn.execute(stmt).one()
    return {"scored": int(total or 0), "passed": int(n_pass or 0), "cached": int(n_cached or 0)}


def failure_counts(conn: Connection, t: OutputTables, key: ScoringKey, partition_key: str) -> dict[str, int]:
    """``{error_type: rows}`` of the partition's failure records."""
    failures = readable(conn.dialect.name, t.failures)
    c = failures.c
    stmt = (
        select(c.error_type, func.count())
        .where(key.where(failures), c.partition_key == partition_key)
        .group_by(c.error_type)
    )
    return {et: int(n) for et, n in conn.execute(stmt)}


def run_spend(
    conn: Connection, t: OutputTables, key: ScoringKey, run_id: str, partition_key: str | None = None
) -> dict[str, Any]:
    """Tokens, cost and judge calls of the scores written by ``run_id``."""
    c = t.scores.c
    conds = [key.where(t.scores), c.run_id == run_id]
    if partition_key is not None:
        conds.append(c.partition_key == partition_key)
    unknown_cost = func.sum(case((c.cost.is_(None), 1), else_=0))
    stmt = select(
        func.sum(c.prompt_tokens),
        func.sum(c.completion_tokens),
        func.sum(c.cost),
        unknown_cost,
        func.sum(c.judge_calls),
    ).where(*conds)
    pt, ct, cost, n_unknown, calls = conn.execute(stmt).one()
    return {
        "prompt_tokens": int(pt or 0),
        "completion_tokens": int(ct or 0),
        "cost": None if (n_unknown or 0) > 0 else float(cost or 0.0),
        "judge_calls": int(calls or 0),
    }


def mark_interrupted_runs(
    conn: Connection,
    t: OutputTables,
    key: ScoringKey,
    partition_key: str,
    run_id: str,
    started_before: Any,
    message: str,
) -> int:
    """Mark this configuration's runs of the partition that are still ``running`` and started
    before ``started_before`` as ``interrupted`` (``finished_at`` stays NULL: they never ended).

    Called when a later run finishes: a run that was killed (SIGKILL, OOM, lost node) never
    updates its own row. A run that is in fact still alive overwrites the mark when it ends.
    Returns the number of rows marked.
    """
    r = t.runs.c
    stmt = (
        update(t.runs)
        .where(
            r.partition_key == partition_key,
            key.where(t.runs),
            r.status == "running",
            r.run_id != run_id,
            r.started_at < started_before,
        )
        .values(status="interrupted", error_message=message)
    )
    return int(conn.execute(stmt).rowcount or 0)
