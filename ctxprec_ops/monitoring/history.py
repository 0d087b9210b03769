"""Load per-partition figures from the warehouse output tables (read-only, SQLAlchemy Core).

Tables are reflected, so this module depends only on the public column names of
``ctxprec_scores``, ``ctxprec_failures`` and ``ctxprec_runs`` (public, never renamed), not on how the
pipeline declares them. ``ctxprec_failures`` and ``ctxprec_runs`` are optional.

Whose scores: one ``Population`` (``population.py``). **Volume** (rows seen by a partition) is
judge-independent: the distinct ``log_id`` of the population's input table scored for the metric
by any judge or recorded in ``ctxprec_failures``. **Failed rows** are those of the population's
whole scoring key (a failed run of another judge, prompt or column mapping does not make the
compared scores' failure rate; that run's own status and outcome report it), also before the
population has any score: then those of the key's given parts (input table, column mapping).

**What is read.** Loose index scans (two probes per partition) find which partitions have data; the figures of the
partitions shown and of their baselines are SQL aggregates (count, sum, sum of squares, min, max,
passed: ``stats.Moments``), one ``GROUP BY`` for all of them, never the rows themselves. The median
of a partition that is shown is read as its middle value(s) (``ORDER BY score LIMIT 2 OFFSET``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..warehouse.schema import ExistingTables, existing_output_tables
from ..warehouse.source import parse_partition_key
from .population import Population, resolve_population
from .stats import Moments

__all__ = [
    "PartitionData",
    "History",
    "load_history",
    "partition_range",
    "moments_by",
    "sampled_total",
]


@dataclass
class PartitionData:
    """Raw material of one partition: the moments of the population's per-case scores and the volume."""

    partition_key: str
    moments: Moments = field(default_factory=Moments)
    median: float | None = None  # read for the partitions shown only
    rows: int = 0  # rows seen: scored (any judge) + failed
    rows_failed: int = 0
    run: dict[str, Any] | None = None  # latest ctxprec_runs row, if any
    #: every row of the partition when its latest run scored a sample (``rows_total`` of that run)
    rows_total: int | None = None

    @property
    def volume(self) -> int:
        """Rows of the partition for the volume rule: all rows, not the sample scored."""
        return max(self.rows, self.rows_total or 0)

    @property
    def sample_rate(self) -> float | None:
        """The sampling rate of the latest run when it scored a sample (None: every row)."""
        if self.rows_total is None or not self.run:
            return None
        rate = self.run.get("sample_rate")
        return float(rate) if rate is not None else None


@dataclass
class History:
    """What the rules need: the loaded partitions plus the index of every partition with data."""

    metric: str
    population: Population | None
    partitions: dict[str, PartitionData]
    scored_keys: list[str]  # partitions with scores of the population (sorted, all history)
    seen_keys: list[str]  # partitions with any row (scored by any judge, or failed)
    run_keys: list[str] = field(default_factory=list)  # partitions with a ctxprec_runs row (sorted)
    #: memo of the partitions that fired the regression rule (see ``check.regressed_partitions``)
    regressed_cache: dict[Any, frozenset[str]] = field(default_factory=dict, repr=False)

    def get(self, key: str) -> PartitionData:
        return self.partitions.get(key) or PartitionData(key)

    def scored_before(self, key: str, limit: int) -> list[str]:
        return [k for k in self.scored_keys if k < key][-limit:] if limit > 0 else []

    def seen_before(self, key: str, limit: int) -> list[str]:
        return [k for k in self.seen_keys if k < key][-limit:] if limit > 0 else []


def _table_filter(t: sa.FromClause, source_table: str | None) -> list[sa.ColumnElement[bool]]:
    return [] if source_table is None else [t.c.source_table == source_table]


def _grouped_keys(conn: sa.Connection, t: sa.FromClause, where: Sequence[sa.ColumnElement[bool]]) -> set[str]:
    """The partitions of ``t`` with a row matching ``where``, read as a loose index scan of the
    ``(partition_key, metric)`` index: one seek for the next partition key, one for a matching row
    in it — two index probes per partition instead of a pass over every row of the history."""
    pk = t.c.partition_key
    out: set[str] = set()
    last: Any = None
    while True:
        nxt = sa.select(sa.func.min(pk))
        if last is not None:
            nxt = nxt.where(pk > last)
        key = conn.execute(nxt).scalar()
        if key is None:
            return out
        hit = conn.execute(sa.select(sa.literal(1)).where(pk == key, *where).limit(1)).first()
        if hit is not None:
            out.add(str(key))
        last = key


def _seen_keys(conn: sa.Connection, tables: ExistingTables, metric: str, source_table: str | None) -> list[str]:
    """Partitions with any row of the input table (scored by any judge, or failed): grouped
    index scans only."""
    keys: set[str] = set()
    for t in (tables.scores, tables.failures):
        if t is not None:
            keys |= _grouped_keys(conn, t, [t.c.metric == metric, *_table_filter(t, source_table)])
    return sorted(keys)


def _own(t: sa.FromClause, pop: Population | None, given: dict[str, str | None]) -> list[sa.ColumnElement[bool]]:
    """The rows of ``t`` (failures, runs) that belong to the compared population: its key; with
    no population yet (nothing of it scored), the parts of the key that were given (the metric's
    configured input table and column mapping, a named judge or prompt) — never another
    configuration's rows."""
    if pop is not None:
        return [pop.where(t)]
    return [t.c[name] == value for name, value in given.items() if value is not None and name in t.c]


def _volumes(
    conn: sa.Connection,
    tables: ExistingTables,
    metric: str,
    pop: Population | None,
    keys: Sequence[str],
    table: str | None = None,
    given: dict[str, str | None] | None = None,
) -> tuple[dict[str, int], dict[str, int]]:
    """Rows seen (distinct log_id, scored by any judge or failed) and rows failed, for ``keys``.

    Failed rows are those of the compared population (its whole scoring key: judge model, prompt
    version, input table, column mapping): a failed run of another judge or column mapping is not
    a failure of the scores being compared. With no population yet (nothing of it scored), the
    failures of the key's given parts (``_own``).
    """
    if not keys:
        return {}, {}
    s, f = tables.scores, tables.failures
    wanted = list(keys)
    table = pop.source_table if pop is not None and pop.source_table is not None else table
    parts: list[sa.Select] = [
        sa.select(s.c.partition_key, s.c.log_id).where(
            s.c.metric == metric, s.c.partition_key.in_(wanted), *_table_filter(s, table)
        )
    ]
    if f is not None:
        parts.append(
            sa.select(f.c.partition_key, f.c.log_id).where(
                f.c.metric == metric, f.c.partition_key.in_(wanted), *_table_filter(f, table)
            )
        )
    if len(parts) > 1:
        u = sa.union(*parts).subquery()
        q = sa.select(u.c.partition_key, sa.func.count()).group_by(u.c.partition_key)
    else:  # one table: its key makes (partition, log_id) distinct per judge; count distinct ids
        q = (
            sa.select(s.c.partition_key, sa.func.count(sa.distinct(s.c.log_id)))
            .where(s.c.metric == metric, s.c.partition_key.in_(wanted), *_table_filter(s, table))
            .group_by(s.c.partition_key)
        )
    rows = {str(k): int(n) for k, n in conn.execute(q) if k is not None}
    failed: dict[str, int] = {}
    if f is not None:
        where = [f.c.metric == metric, f.c.partition_key.in_(wanted), *_own(f, pop, given or {})]
        q = (
            sa.select(f.c.partition_key, sa.func.count(sa.distinct(f.c.log_id)))
            .where(*where)
            .group_by(f.c.partition_key)
        )
        failed = {str(k): int(n) for k, n in conn.execute(q) if k is not None}
    return rows, failed


def _latest_runs(
    conn: sa.Connection,
    tables: ExistingTables,
    metric: str,
    pop: Population | None,
    keys: Sequence[str],
    given: dict[str, str | None] | None = None,
) -> dict[str, dict[str, Any]]:
    """The latest ``ctxprec_runs`` row per partition of the population (``_own``)."""
    r = tables.runs
    if r is None or not keys:
        return {}
    out: dict[str, dict[str, Any]] = {}
    q = sa.select(*(c for c in r.c if c.name in tables.runs_columns)).where(
        r.c.metric == metric, r.c.partition_key.in_(list(keys))
    )
    own = _own(r, pop, given or {})
    if own:
        q = q.where(*own)
    for row in conn.execute(q).mappings():
        rec = dict(row)
        key = str(rec["partition_key"])
        stamp = str(rec.get("finished_at") or rec.get("started_at") or "")
        prev = out.get(key)
        if prev is None or stamp >= str(prev.get("finished_at") or prev.get("started_at") or ""):
            out[key] = rec
    return out


def moments_by(
    conn: sa.Connection,
    t: sa.FromClause,
    where: Sequence[sa.ColumnElement[bool]],
    group: Sequence[sa.ColumnElement[Any]],
) -> list[tuple[tuple[Any, ...], Moments]]:
    """``stats.Moments`` of ``t.score`` per value of ``group`` (one ``GROUP BY`` in SQL), for the
    rows matching ``where``: count, sum, sum of squares, min, max and passed cases (``success``)."""
    score = t.c.score
    passed = sa.func.sum(sa.case((t.c.success.is_(True), 1), else_=0))
    q = (
        sa.select(
            *group,
            sa.func.count(score),
            sa.func.sum(score),
            sa.func.sum(score * score),
            sa.func.min(score),
            sa.func.max(score),
            passed,
        )
        .where(*where, score.is_not(None))
        .group_by(*group)
    )
    out = []
    width = len(group)
    for row in conn.execute(q):
        n, total, total_sq, lo, hi, n_pass = row[width:]
        if n:
            m = Moments(int(n), float(total), float(total_sq), float(lo), float(hi), int(n_pass or 0))
            out.append((tuple(row[:width]), m))
    return out


def median_of(conn: sa.Connection, t: sa.FromClause, where: Sequence[sa.ColumnElement[bool]], n: int) -> float | None:
    """The median of ``t.score`` over ``n`` rows matching ``where``: the middle value(s) in score
    order (the database sorts; one or two values come back)."""
    if n <= 0:
        return None
    q = sa.select(t.c.score).where(*where, t.c.score.is_not(None)).order_by(t.c.score)
    q = q.limit(1 if n % 2 else 2).offset((n - 1) // 2)
    values = [float(v) for (v,) in conn.execute(q)]
    return sum(values) / len(values) if values else None


def _case_moments(
    conn: sa.Connection, tables: ExistingTables, pop: Population | None, keys: Sequence[str]
) -> dict[str, Moments]:
    if pop is None or not keys:
        return {}
    t = tables.scores
    where = [pop.where(t), t.c.partition_key.in_(list(keys))]
    return {str(k[0]): m for k, m in moments_by(conn, t, where, [t.c.partition_key])}


def partition_range(end: str, days: int, *, start: str | None = None) -> list[str]:
    """The ``days`` calendar partition keys ending at ``end`` (not before ``start``), oldest first."""
    end_d = parse_partition_key(end)
    first = end_d - dt.timedelta(days=max(days, 1) - 1)
    if start is not None:
        first = max(first, parse_partition_key(start))
    n = (end_d - first).days + 1
    return [(first + dt.timedelta(days=i)).isoformat() for i in range(max(n, 0))]


def load_history(
    engine: Engine,
    metric: str,
    *,
    keys: Sequence[str] | None = None,
    baseline_for: Sequence[str] = (),
    baseline_partitions: int = 7,
    population: Population | None = None,
    population_partition: str | None = None,
    up_to: str | None = None,
    judge_model: str | None = None,
    prompt_version: str | None = None,
    source_table: str | None = None,
    mapping: str | None = None,
    lookback: int | None = None,
) -> History:
    """Load the partitions ``keys`` plus the baselines (previous partitions) of ``baseline_for``.

    ``lookback`` (default ``baseline_partitions``) scored partitions before each of
    ``baseline_for`` are loaded: more than the baseline when regressed partitions are to be left
    out of it. ``keys=None`` loads nothing but the index; zero-volume partitions are kept (rows = 0).
    The medians of ``keys`` are read (not those of baseline-only partitions).
    """
    tables = existing_output_tables(engine)
    with engine.connect() as conn:
        pop = population or resolve_population(
            conn,
            tables,
            metric,
            partition_key=population_partition,
            up_to=up_to,
            judge_model=judge_model,
            prompt_version=prompt_version,
            source_table=source_table,
            mapping=mapping,
        )
        scored_keys = sorted(_grouped_keys(conn, tables.scores, [pop.where(tables.scores)])) if pop else []
        seen_in = pop.source_table if pop is not None else (source_table if tables.source_keyed else None)
        runs_t = tables.runs
        run_keys = (
            sorted(_grouped_keys(conn, runs_t, [runs_t.c.metric == metric, *_table_filter(runs_t, seen_in)]))
            if runs_t is not None
            else []
        )
        hist = History(metric, pop, {}, scored_keys, _seen_keys(conn, tables, metric, seen_in), run_keys)
        wanted = set(keys or ())
        for key in baseline_for:
            wanted.update(hist.scored_before(key, max(lookback or 0, baseline_partitions)))
            wanted.update(hist.seen_before(key, baseline_partitions))
        ordered = sorted(wanted)
        given = {"judge_model": judge_model, "prompt_version": prompt_version, "source_table": seen_in,
                 "mapping": mapping}  # fmt: skip
        rows, failed = _volumes(conn, tables, metric, pop, ordered, seen_in, given)
        moments = _case_moments(conn, tables, pop, ordered)
        runs = _latest_runs(conn, tables, metric, pop, ordered, given)
        medians: dict[str, float | None] = {}
        if pop is not None:
            t = tables.scores
            for key in keys or ():
                m = moments.get(key)
                if m is not None:
                    medians[key] = median_of(conn, t, [pop.where(t), t.c.partition_key == key], m.n)
    for key in ordered:
        run = runs.get(key)
        hist.partitions[key] = PartitionData(
            key,
            moments.get(key, Moments()),
            medians.get(key),
            rows.get(key, 0),
            failed.get(key, 0),
            run,
            sampled_total(run),
        )
    return hist


def sampled_total(run: dict[str, Any] | None) -> int | None:
    """``rows_total`` of a run that scored a sample (rate < 1 or fewer rows sampled than total)."""
    if not run or run.get("rows_total") is None:
        return None
    rate, sampled, total = run.get("sample_rate"), run.get("rows_sampled"), int(run["rows_total"])
    if (rate is not None and float(rate) < 1.0) or (sampled is not None and int(sampled) < total):
        return total
    return None
