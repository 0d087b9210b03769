"""Reads and writes on the output tables that the pipeline needs, as small functions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Iterator, Sequence

from sqlalchemy import and_, case, delete, exists, func, select, update
from sqlalchemy.engine import Connection

from ..verdicts import NodeVerdict
from .schema import OutputTables
from .upsert import insert_ignore, upsert

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
    "IN_BATCH",
]

#: ids / keys per ``IN (...)`` list (well under every backend's bound-parameter limit)
IN_BATCH = 500


@dataclass(frozen=True)
class ScoringKey:
    """One scoring configuration: scores and failures are unique per (log_id, *this*)."""

    metric: str
    judge_model: str
    prompt_version: str

    def where(self, table) -> Any:
        return and_(
            table.c.metric == self.metric,
            table.c.judge_model == self.judge_model,
            table.c.prompt_version == self.prompt_version,
        )


def _chunks(items: Sequence[Any], n: int = IN_BATCH) -> Iterable[Sequence[Any]]:
    for i in range(0, len(items), n):
        yield items[i : i + n]


def scored_ids(conn: Connection, t: OutputTables, key: ScoringKey, log_ids: Sequence[str]) -> set[str]:
    """Which of ``log_ids`` already have a score for this configuration."""
    found: set[str] = set()
    for part in _chunks(list(log_ids)):
        stmt = select(t.scores.c.log_id).where(key.where(t.scores), t.scores.c.log_id.in_(list(part)))
        found.update(r[0] for r in conn.execute(stmt))
    return found


def load_judgments(conn: Connection, t: OutputTables, keys: Iterable[str]) -> dict[str, NodeVerdict]:
    """Cached verdicts for ``keys`` (``node`` is 0: the metric re-numbers by rank)."""
    wanted = list(dict.fromkeys(keys))
    out: dict[str, NodeVerdict] = {}
    j = t.judgments.c
    for part in _chunks(wanted):
        for k, relevant, reason in conn.execute(select(j.key, j.relevant, j.reason).where(j.key.in_(list(part)))):
            out[k] = NodeVerdict(node=0, relevant=bool(relevant), reason=reason or "")
    return out


def write_chunk(
    conn: Connection,
    t: OutputTables,
    key: ScoringKey,
    *,
    log_ids: Sequence[str],
    scores: list[dict[str, Any]],
    failures: list[dict[str, Any]],
    judgments: list[dict[str, Any]],
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
    scored = exists().where(
        s.c.log_id == f.c.log_id,
        s.c.metric == f.c.metric,
        s.c.judge_model == f.c.judge_model,
        s.c.prompt_version == f.c.prompt_version,
    )
    for part in _chunks(list(log_ids)):
        conn.execute(delete(f).where(key.where(f), f.c.log_id.in_(list(part)), scored))


def delete_failures(conn: Connection, t: OutputTables, key: ScoringKey, log_ids: Sequence[str]) -> None:
    """Delete the failure records of ``log_ids`` (rows outside this run's sample)."""
    f = t.failures
    for part in _chunks(list(log_ids)):
        conn.execute(delete(f).where(key.where(f), f.c.log_id.in_(list(part))))


def partition_scores(conn: Connection, t: OutputTables, key: ScoringKey, partition_key: str,
                     batch: int = 20_000) -> Iterator[Any]:
    """The partition's scores in ascending order, streamed from the cursor as float64 numpy
    arrays of up to ``batch`` values (memory: one batch, however many rows the partition has).
    Consume it while ``conn`` is open."""
    import numpy as np

    c = t.scores.c
    stmt = select(c.score).where(key.where(t.scores), c.partition_key == partition_key).order_by(c.score)
    result = conn.execution_options(stream_results=True, yield_per=batch).execute(stmt)
    for part in result.partitions():
        yield np.fromiter((r[0] for r in part), dtype=np.float64, count=len(part))


def partition_counts(conn: Connection, t: OutputTables, key: ScoringKey, partition_key: str, run_id: str) -> dict[str, Any]:
    """Counts over the partition's scores: total, passed, and those that cost no judge call in
    this run (scored by an earlier run, or answered entirely from the judgment cache)."""
    c = t.scores.c
    cached = case(
        (c.run_id != run_id, 1),
        (and_(func.coalesce(c.judge_calls, 0) == 0, func.coalesce(c.cached_nodes, 0) > 0), 1),
        else_=0,
    )
    passed = case((c.success.is_(True), 1), else_=0)
    stmt = select(func.count(), func.sum(passed), func.sum(cached)).where(
        key.where(t.scores), c.partition_key == partition_key
    )
    total, n_pass, n_cached = conn.execute(stmt).one()
    return {"scored": int(total or 0), "passed": int(n_pass or 0), "cached": int(n_cached or 0)}


def failure_counts(conn: Connection, t: OutputTables, key: ScoringKey, partition_key: str) -> dict[str, int]:
    """``{error_type: rows}`` of the partition's failure records."""
    c = t.failures.c
    stmt = (
        select(c.error_type, func.count())
        .where(key.where(t.failures), c.partition_key == partition_key)
        .group_by(c.error_type)
    )
    return {et: int(n) for et, n in conn.execute(stmt)}


def run_spend(conn: Connection, t: OutputTables, key: ScoringKey, run_id: str, partition_key: str | None = None) -> dict[str, Any]:
    """Tokens, cost and judge calls of the scores written by ``run_id``."""
    c = t.scores.c
    conds = [key.where(t.scores), c.run_id == run_id]
    if partition_key is not None:
        conds.append(c.partition_key == partition_key)
    unknown_cost = func.sum(case((c.cost.is_(None), 1), else_=0))
    stmt = select(
        func.sum(c.prompt_tokens), func.sum(c.completion_tokens), func.sum(c.cost), unknown_cost,
        func.sum(c.judge_calls),
    ).where(*conds)
    pt, ct, cost, n_unknown, calls = conn.execute(stmt).one()
    return {
        "prompt_tokens": int(pt or 0),
        "completion_tokens": int(ct or 0),
        "cost": None if (n_unknown or 0) > 0 else float(cost or 0.0),
        "judge_calls": int(calls or 0),
    }


def mark_interrupted_runs(conn: Connection, t: OutputTables, key: ScoringKey, partition_key: str,
                          run_id: str, started_before: Any, message: str) -> int:
    """Mark this configuration's runs of the partition that are still ``running`` and started
    before ``started_before`` as ``interrupted`` (``finished_at`` stays NULL: they never ended).

    Called when a later run finishes: a run that was killed (SIGKILL, OOM, lost node) never
    updates its own row. A run that is in fact still alive overwrites the mark when it ends.
    Returns the number of rows marked.
    """
    r = t.runs.c
    stmt = (
        update(t.runs)
        .where(r.partition_key == partition_key, r.metric == key.metric, r.judge_model == key.judge_model,
               r.prompt_version == key.prompt_version, r.status == "running", r.run_id != run_id,
               r.started_at < started_before)
        .values(status="interrupted", error_message=message)
    )
    return int(conn.execute(stmt).rowcount or 0)
