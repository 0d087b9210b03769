"""Load per-partition figures from the warehouse output tables (read-only, SQLAlchemy Core).

Tables are reflected, so this module depends only on the public column names of
``ctxprec_scores``, ``ctxprec_failures`` and ``ctxprec_runs`` (DESIGN.md), not on how the
pipeline declares them. ``ctxprec_failures`` and ``ctxprec_runs`` are optional.

**Population.** Scores from different judges or prompt versions are different measurements;
pooling them would turn a judge change into a fake regression. Scores of two input tables are
different populations too (their ids may overlap). Every figure is therefore computed for one
``(source_table, judge_model, prompt_version)``: by default that of the most recently scored row
(for ``check``: the most recent in the checked partition, falling back to the most recent before
it); each part can be given. **Volume** (rows seen by a partition) is judge-independent: the
distinct ``log_id`` of the population's input table scored for the metric by any judge or
recorded in ``ctxprec_failures``. **Failed rows**
are those of the population (a failed run of another judge or prompt does not make the compared
scores' failure rate; that run's own status and outcome report it).

Only grouped index scans touch the whole history (which partitions have data); per-case scores
are read for the checked partitions and their baselines only.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..cases.contexts import display_nodes
from ..secrets import redact_url
from ..warehouse.engine import get_engine
from ..warehouse.identifiers import split_table_name
from ..warehouse.schema import ExistingTables, MissingScoresTableError, existing_output_tables
from ..warehouse.source import parse_partition_key

__all__ = [
    "Population",
    "PartitionData",
    "History",
    "engine_scope",
    "MissingScoresTableError",
    "load_history",
    "load_worst_cases",
    "partition_range",
]

log = logging.getLogger(__name__)


@contextlib.contextmanager
def engine_scope(engine_or_url: Engine | str) -> Iterator[Engine]:
    """Yield an Engine for an Engine or a URL (``warehouse.engine.get_engine``: cached per URL)."""
    if isinstance(engine_or_url, Engine):
        yield engine_or_url
        return
    if not isinstance(engine_or_url, str) or not engine_or_url.strip():
        raise ValueError("a warehouse URL is required (--warehouse or CTXPREC_WAREHOUSE_URL)")
    try:
        engine = get_engine(engine_or_url)
    except ValueError:
        raise
    except Exception as exc:  # missing driver etc.: say which (without the password)
        raise ValueError(f"cannot open warehouse {redact_url(engine_or_url)}: {type(exc).__name__}: {exc}") from None
    yield engine


@dataclass(frozen=True)
class Population:
    """The (judge_model, prompt_version) pair whose scores are compared, and the input table
    they came from (None: any table, for output tables written before ``source_table``)."""

    judge_model: str | None
    prompt_version: str | None
    source_table: str | None = None

    def label(self) -> str:
        table = f" of {self.source_table}" if self.source_table else ""
        return f"{self.judge_model or '?'} / prompt {self.prompt_version or '?'}{table}"


@dataclass
class PartitionData:
    """Raw material of one partition: per-case scores of the population and the volume."""

    partition_key: str
    scores: np.ndarray = field(default_factory=lambda: np.empty(0))
    passed: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=bool))
    rows: int = 0  # rows seen: scored (any judge) + failed
    rows_failed: int = 0
    run: dict[str, Any] | None = None  # latest ctxprec_runs row, if any
    #: every row of the partition when its latest run scored a sample (``rows_total`` of that run)
    rows_total: int | None = None

    @property
    def volume(self) -> int:
        """Rows of the partition for the volume rule: all rows, not the sample scored."""
        return max(self.rows, self.rows_total or 0)


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


def _eq(col: sa.ColumnElement, value: Any) -> sa.ColumnElement[bool]:
    return col.is_(None) if value is None else col == value


def _population_filter(t: sa.Table, pop: Population) -> sa.ColumnElement[bool]:
    conds = [_eq(t.c.judge_model, pop.judge_model), _eq(t.c.prompt_version, pop.prompt_version)]
    if pop.source_table is not None:
        conds.append(t.c.source_table == pop.source_table)
    return sa.and_(*conds)


def _table_filter(t: sa.Table, source_table: str | None) -> list[sa.ColumnElement[bool]]:
    return [] if source_table is None else [t.c.source_table == source_table]


def resolve_population(
    conn: sa.Connection,
    tables: ExistingTables,
    metric: str,
    *,
    partition_key: str | None = None,
    up_to: str | None = None,
    judge_model: str | None = None,
    prompt_version: str | None = None,
    source_table: str | None = None,
) -> Population | None:
    """The population of the most recently scored row matching the given constraints (None: no
    rows). ``source_table`` is ignored on output tables written before the column existed."""
    t = tables.scores
    keyed = tables.source_keyed
    source_table = source_table if keyed else None
    base = [t.c.metric == metric, *_table_filter(t, source_table)]
    if judge_model is not None:
        base.append(t.c.judge_model == judge_model)
    if prompt_version is not None:
        base.append(t.c.prompt_version == prompt_version)
    attempts = []
    if partition_key is not None:
        attempts.append(base + [t.c.partition_key == partition_key])
    attempts.append(base + ([t.c.partition_key <= up_to] if up_to else []))
    for where in attempts:
        row = conn.execute(
            sa.select(t.c.judge_model, t.c.prompt_version, t.c.source_table if keyed else sa.null())
            .where(*where)
            .order_by(t.c.scored_at.desc().nulls_last(), t.c.partition_key.desc())
            .limit(1)
        ).first()
        if row is not None:
            return Population(row[0], row[1], row[2])
    if judge_model is not None or prompt_version is not None:
        return Population(judge_model, prompt_version, source_table)  # explicit, even with no rows yet
    return None


def _scored_keys(conn: sa.Connection, tables: ExistingTables, metric: str, pop: Population | None) -> list[str]:
    if pop is None:
        return []
    t = tables.scores
    q = sa.select(t.c.partition_key).where(t.c.metric == metric, _population_filter(t, pop)).group_by(t.c.partition_key)
    return sorted(str(k) for (k,) in conn.execute(q) if k is not None)


def _seen_keys(conn: sa.Connection, tables: ExistingTables, metric: str, source_table: str | None) -> list[str]:
    """Partitions with any row of the input table (scored by any judge, or failed): grouped
    index scans only."""
    keys: set[str] = set()
    for t in (tables.scores, tables.failures):
        if t is not None:
            q = (
                sa.select(t.c.partition_key)
                .where(t.c.metric == metric, *_table_filter(t, source_table))
                .group_by(t.c.partition_key)
            )
            keys.update(str(k) for (k,) in conn.execute(q) if k is not None)
    return sorted(keys)


def _volumes(
    conn: sa.Connection,
    tables: ExistingTables,
    metric: str,
    pop: Population | None,
    keys: Sequence[str],
    table: str | None = None,
) -> tuple[dict[str, int], dict[str, int]]:
    """Rows seen (distinct log_id, scored by any judge or failed) and rows failed, for ``keys``.

    Failed rows are those of the compared population (its judge model and prompt version): a
    failed run of another judge is not a failure of the scores being compared. With no
    population yet (nothing scored), every failure counts.
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
    u = sa.union(*parts).subquery() if len(parts) > 1 else parts[0].distinct().subquery()
    rows = {
        str(k): int(n)
        for k, n in conn.execute(sa.select(u.c.partition_key, sa.func.count()).group_by(u.c.partition_key))
        if k is not None
    }
    failed: dict[str, int] = {}
    if f is not None:
        where = [f.c.metric == metric, f.c.partition_key.in_(wanted)]
        if pop is not None:
            where.append(_population_filter(f, pop))
        q = (
            sa.select(f.c.partition_key, sa.func.count(sa.distinct(f.c.log_id)))
            .where(*where)
            .group_by(f.c.partition_key)
        )
        failed = {str(k): int(n) for k, n in conn.execute(q) if k is not None}
    return rows, failed


def _latest_runs(
    conn: sa.Connection, tables: ExistingTables, metric: str, pop: Population | None, keys: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """The latest ``ctxprec_runs`` row per partition, of the population when there is one."""
    r = tables.runs
    if r is None or not keys:
        return {}
    out: dict[str, dict[str, Any]] = {}
    q = sa.select(*(c for c in r.c if c.name in tables.runs_columns)).where(
        r.c.metric == metric, r.c.partition_key.in_(list(keys))
    )
    if pop is not None:
        q = q.where(_population_filter(r, pop))
    for row in conn.execute(q).mappings():
        rec = dict(row)
        key = str(rec["partition_key"])
        stamp = str(rec.get("finished_at") or rec.get("started_at") or "")
        prev = out.get(key)
        if prev is None or stamp >= str(prev.get("finished_at") or prev.get("started_at") or ""):
            out[key] = rec
    return out


def _run_keys(conn: sa.Connection, tables: ExistingTables, metric: str, source_table: str | None) -> list[str]:
    r = tables.runs
    if r is None:
        return []
    q = (
        sa.select(r.c.partition_key)
        .where(r.c.metric == metric, *_table_filter(r, source_table))
        .group_by(r.c.partition_key)
    )
    return sorted(str(k) for (k,) in conn.execute(q) if k is not None)


def _case_scores(
    conn: sa.Connection, tables: ExistingTables, metric: str, pop: Population | None, keys: Sequence[str]
) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    if pop is None or not keys:
        return {}
    t = tables.scores
    q = sa.select(t.c.score, t.c.success).where(
        t.c.metric == metric, _population_filter(t, pop), t.c.score.is_not(None)
    )
    out: dict[str, tuple[np.ndarray, np.ndarray]] = {}
    for key in keys:  # one query per partition: uses the (partition_key, metric) index
        rows = conn.execute(q.where(t.c.partition_key == key)).all()
        if rows:
            scores = np.fromiter((r[0] for r in rows), dtype=float, count=len(rows))
            passed = np.fromiter((bool(r[1]) for r in rows), dtype=bool, count=len(rows))
            out[str(key)] = (scores, passed)
    return out


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
    lookback: int | None = None,
) -> History:
    """Load the partitions ``keys`` plus the baselines (previous partitions) of ``baseline_for``.

    ``lookback`` (default ``baseline_partitions``) scored partitions before each of
    ``baseline_for`` are loaded: more than the baseline when regressed partitions are to be left
    out of it. ``keys=None`` loads nothing but the index; zero-volume partitions are kept (rows = 0).
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
        )
        scored_keys = _scored_keys(conn, tables, metric, pop)
        seen_in = pop.source_table if pop is not None else (source_table if tables.source_keyed else None)
        hist = History(
            metric,
            pop,
            {},
            scored_keys,
            _seen_keys(conn, tables, metric, seen_in),
            _run_keys(conn, tables, metric, seen_in),
        )
        wanted = set(keys or ())
        for key in baseline_for:
            wanted.update(hist.scored_before(key, max(lookback or 0, baseline_partitions)))
            wanted.update(hist.seen_before(key, baseline_partitions))
        ordered = sorted(wanted)
        rows, failed = _volumes(conn, tables, metric, pop, ordered, seen_in)
        cases = _case_scores(conn, tables, metric, pop, ordered)
        runs = _latest_runs(conn, tables, metric, pop, ordered)
    for key in ordered:
        s, p = cases.get(key, (np.empty(0), np.empty(0, dtype=bool)))
        run = runs.get(key)
        hist.partitions[key] = PartitionData(key, s, p, rows.get(key, 0), failed.get(key, 0), run, _sampled_total(run))
    return hist


def _sampled_total(run: dict[str, Any] | None) -> int | None:
    """``rows_total`` of a run that scored a sample (rate < 1 or fewer rows sampled than total)."""
    if not run or run.get("rows_total") is None:
        return None
    rate, sampled, total = run.get("sample_rate"), run.get("rows_sampled"), int(run["rows_total"])
    if (rate is not None and float(rate) < 1.0) or (sampled is not None and int(sampled) < total):
        return total
    return None


def _json_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, (bytes, bytearray)):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return []
    return list(value) if isinstance(value, (list, tuple)) else []


def load_worst_cases(
    engine: Engine,
    metric: str,
    population: Population | None,
    partition_key: str,
    *,
    limit: int = 10,
    source_table: str | None = None,
    columns: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The lowest-scoring cases of a partition with their node verdicts (best rank first).

    When the metric's source table exists (default: the metric kind's table, may be
    ``schema.table``; ``columns`` maps logical column names as for scoring) the query, the
    expected output and the node texts are attached; otherwise only the verdicts. A source table
    name that is not an identifier raises ``IdentifierError``.
    """
    from ..pipeline.kinds import metric_kind

    kind = metric_kind(metric)
    mapped = kind.columns.from_mapping(columns).as_dict()
    tables = existing_output_tables(engine)
    t = tables.scores
    where = [t.c.metric == metric, t.c.partition_key == partition_key, t.c.score.is_not(None)]
    if population is not None:
        where.append(_population_filter(t, population))
    q = sa.select(t.c.log_id, t.c.score, t.c.success, t.c.reason, t.c.verdicts).where(*where)
    q = q.order_by(t.c.score.asc(), t.c.log_id.asc()).limit(limit)
    with engine.connect() as conn:
        cases = []
        for log_id, score, success, reason, verdicts in conn.execute(q):
            nodes = []
            for i, v in enumerate(_json_list(verdicts)):
                if isinstance(v, dict):
                    node = {
                        "node": int(v.get("node") or i + 1),
                        "relevant": bool(v.get("relevant")),
                        "reason": v.get("reason"),
                    }
                    if v.get("agreement") is not None:  # a majority of sampled answers
                        node["agreement"] = v["agreement"]
                    nodes.append(node)
            groups = _split_windows(nodes)
            cases.append(
                {
                    "log_id": log_id,
                    "score": float(score),
                    "success": bool(success),
                    "reason": reason,
                    "verdicts": [n for g in groups for n in g],
                    "groups": groups,
                }
            )
        table = source_table or (population.source_table if population is not None else None)
        _attach_source(
            conn,
            table or kind.default_table,
            cases,
            {
                "id": mapped["id"],
                "query": mapped[kind.query_column],
                "expected": mapped[kind.expected_column],
                "nodes": mapped[kind.nodes_column],
            },
        )
    return cases


def _split_windows(nodes: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Turn-metric verdicts are the windows' lists one after the other (ids restart at 1):
    split where an id repeats, and order each window by rank."""
    groups: list[list[dict[str, Any]]] = []
    seen: set[int] = set()
    for n in nodes:
        if not groups or n["node"] in seen:
            groups.append([])
            seen = set()
        groups[-1].append(n)
        seen.add(n["node"])
    return [sorted(g, key=lambda n: n["node"]) for g in groups]


def _attach_source(
    conn: sa.Connection, source_table: str, cases: list[dict[str, Any]], columns: Mapping[str, str]
) -> None:
    """Best effort: add ``input``, ``expected`` and node texts from the source table (never fails
    the caller). ``columns`` maps ``id``/``query``/``expected``/``nodes`` to the table's columns."""
    if not cases:
        return
    schema, name = split_table_name(source_table, None, "source table name")
    try:
        insp = sa.inspect(conn)
        if name not in insp.get_table_names(schema=schema):
            log.warning("report: source table %s not found: cases are shown without their texts", source_table)
            return
        src = sa.Table(name, sa.MetaData(schema=schema), autoload_with=conn)
        have = {logical: src.c[col] for logical, col in columns.items() if col in src.c}
        if "id" not in have:
            log.warning("report: %s has no column %r: cases are shown without their texts", source_table, columns["id"])
            return
        ids: list[Any] = [c["log_id"] for c in cases]
        if isinstance(have["id"].type, sa.Integer):
            ids = [int(i) for i in ids if str(i).lstrip("-").isdigit()]
        else:
            ids = [str(i) for i in ids]
        wanted = [k for k in ("query", "expected", "nodes") if k in have]
        stmt = sa.select(have["id"], *(have[k] for k in wanted)).where(have["id"].in_(ids))
        found = {str(r[0]): dict(zip(wanted, r[1:])) for r in conn.execute(stmt)}
    except Exception as exc:  # the report still renders without texts
        log.warning("could not read %s for the report: %s", source_table, type(exc).__name__)
        return
    single_turn = columns.get("query") != columns.get("nodes")
    for case in cases:
        row = found.get(str(case["log_id"]))
        if row is None:
            continue
        if single_turn and row.get("query") is not None:
            case["input"] = row["query"]
        if row.get("expected") is not None:
            case["expected"] = row["expected"]
        # the judged nodes (items sharing a source are one node; images by name)
        texts = display_nodes(_json_list(row.get("nodes"))) if single_turn and len(case["groups"]) == 1 else []
        for node in case["verdicts"]:
            k = node["node"] - 1
            if 0 <= k < len(texts):
                node["text"] = str(texts[k])


def case_threshold(engine: Engine, metric: str, population: Population | None, partition_key: str) -> float | None:
    """The per-case pass threshold the partition was scored with (the most common one)."""
    t = existing_output_tables(engine).scores
    where = [t.c.metric == metric, t.c.partition_key == partition_key]
    if population is not None:
        where.append(_population_filter(t, population))
    q = (
        sa.select(t.c.threshold, sa.func.count())
        .where(*where)
        .group_by(t.c.threshold)
        .order_by(sa.func.count().desc())
        .limit(1)
    )
    with engine.connect() as conn:
        row = conn.execute(q).first()
    return float(row[0]) if row is not None and row[0] is not None else None
