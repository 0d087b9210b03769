"""Reads and writes on the output tables that the pipeline needs, as small functions; how each
runs on a warehouse is the family's (``warehouse/dialects/``: id binding, look-ups, clean-up)."""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator, Sequence
from operator import itemgetter
from typing import Any

from sqlalchemy import and_, case, delete, func, select, update
from sqlalchemy.engine import Connection, Engine

from ..scoring.consistency import node_verdict
from ..scoring.verdicts import NodeVerdict
from .dialects import Dialect, dialect_of
from .dialects.reads import in_parts
from .engine import stream_batches
from .schema import OutputTables, readable
from .scoring_key import ScoringKey
from .upsert import ColumnRows, insert_ignore, upsert

__all__ = [
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
]

log = logging.getLogger("ctxprec_ops.warehouse")

_first = itemgetter(0)


def scored_ids(conn: Connection, t: OutputTables, key: ScoringKey, log_ids: Sequence[str]) -> set[str]:
    """Which of ``log_ids`` already have a score for this configuration.

    The conditions are equalities on all four primary-key columns, so the unique index answers
    it (an index-only scan). On PostgreSQL that plan needs statistics: without them the planner
    guesses that 0.5% of the rows match ``metric`` and prefers the partition index, a plan whose
    cost grows with the table (see ``analyze_if_grown`` and docs/scaling.md).
    """
    ids = list(dict.fromkeys(log_ids))
    rows = dialect_of(conn).select_in(conn, t.scores, ["log_id"], "log_id", ids, key.fields(t.scores))
    return {r[0] for r in rows}


def load_judgments(
    conn: Connection, t: OutputTables, keys: Iterable[bytes], *, agreement: bool = True
) -> dict[bytes, NodeVerdict]:
    """Cached verdicts for ``keys`` (``node`` is 0: the metric re-numbers by rank); a verdict of
    sampled answers comes back as a ``SampledVerdict`` with its agreement. ``agreement=False``
    reads without that column (a reader of a table an older version wrote, not migrated yet).

    How the cache is probed is the family's (``Dialect.cached_judgments``: ``IN`` lists, or
    PostgreSQL's one range per question).
    """
    wanted = list(dict.fromkeys(keys))
    found = dialect_of(conn).cached_judgments(conn, t.judgments, wanted, agreement=agreement)
    return {k: node_verdict(0, bool(relevant), reason or "", agreed) for k, relevant, reason, agreed in found}


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
    family = Dialect() if native is False else dialect_of(conn)
    ids = list(dict.fromkeys(log_ids))
    family.delete_scored_failures(conn, t.failures, t.scores, key.fields(t.failures), ids)


def delete_failures(conn: Connection, t: OutputTables, key: ScoringKey, log_ids: Sequence[str]) -> None:
    """Delete the failure records of ``log_ids`` (rows outside this run's sample)."""
    f = t.failures
    for part in in_parts(list(log_ids)):
        conn.execute(delete(f).where(key.where(f), f.c.log_id.in_(list(part))))


def partition_scores(
    conn: Connection, t: OutputTables, key: ScoringKey, partition_key: str, batch: int = 20_000
) -> Iterator[Any]:
    """The partition's scores in ascending order, streamed from the cursor as float64 numpy
    arrays of up to ``batch`` values (memory: one batch, however many rows the partition has).
    Consume it while ``conn`` is open."""
    import numpy as np

    scores = readable(conn, t.scores)
    c = scores.c
    stmt = select(c.score).where(key.where(scores), c.partition_key == partition_key).order_by(c.score)
    for part in stream_batches(conn, stmt, batch):
        yield np.fromiter(map(_first, part), dtype=np.float64, count=len(part))


def partition_counts(
    conn: Connection, t: OutputTables, key: ScoringKey, partition_key: str, run_id: str
) -> dict[str, Any]:
    """Counts over the partition's scores: total, passed, and those that cost no judge call in
    this run (scored by an earlier run, or answered entirely from the judgment cache)."""
    scores = readable(conn, t.scores)
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
    failures = readable(conn, t.failures)
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


def analyze_if_grown(engine: Engine, t: OutputTables, written: dict[str, int]) -> list[str]:
    """Refresh the planner statistics of output tables this process has grown (``written``:
    table name -> rows), where the family keeps any (PostgreSQL: ``ANALYZE`` a table whose
    statistics describe less than a quarter of it; docs/scaling.md); returns the tables analyzed."""
    return dialect_of(engine).analyze_if_grown(engine, t, written)


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
