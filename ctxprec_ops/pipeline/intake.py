"""A chunk's intake: read its rows (the sampled ones), skip those already scored, turn the rest
into cases or ``invalid_input`` failures, claim the cases' rows (``warehouse/claims.py``: rows
another run is judging are left to it), and preload the judgment cache for the cases."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import compress
from typing import Any

from sqlalchemy import select
from sqlalchemy.engine import Connection

from ..errors import InvalidTestCaseError
from ..judge.budget import Budget
from ..judge.cache import DictVerdictCache, remembered_keys
from ..secrets import redact
from ..warehouse.claims import Claim, RowClaims
from ..warehouse.engine import read_connection, read_retrying
from ..warehouse.holders import ClaimHolder
from ..warehouse.partition_rows import partitions_of
from ..warehouse.scoring_key import ScoringKey
from ..warehouse.segments import segment_column, segment_state, segment_value
from ..warehouse.source import recordable_id
from ..warehouse.store import load_judgments, run_spend, scored_ids
from .context import PipelineContext
from .records import Chunk
from .rows import case_or_failure
from .sampling import takes_every_row

__all__ = ["Intake", "failure_row", "read_intake", "remaining_budget"]


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class Intake:
    """A chunk's rows sorted into: already scored, to judge (as cases), failed on their content."""

    rows: list[dict[str, Any]]  # the rows in the sample (all rows without sampling)
    done_ids: set[str]
    cases: list[Any] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)
    all_rows: int = 0  # every row of the chunk, sampled or not
    unsampled_ids: list[str] = field(default_factory=list)
    #: per-case figures of metrics that have them (``MetricResult.figures``), as rows to write
    figures: list[dict[str, Any]] = field(default_factory=list)
    #: the judgment cache preloaded for ``cases`` (None for offline judges)
    cache: DictVerdictCache | None = None
    #: the cases' judgment keys by ``judgment_keys`` arguments (computed once, see ``remembered_keys``)
    key_memo: dict[tuple, list[bytes]] = field(default_factory=dict)
    #: ``str(row["id"])`` of each of ``rows``, in order
    log_ids: list[str] = field(default_factory=list)
    #: segment values by log id (``ctx.segments`` only) and the ids scored before in another
    #: partition, whose segment rows there are replaced
    segment_values: dict[str, dict[str, Any]] = field(default_factory=dict)
    moved: list[str] = field(default_factory=list)
    #: the chunk's partition
    partition_key: str = ""
    #: rows scored before whose segment values changed at the source: ``{log_id: {name: text}}``
    segment_refresh: dict[str, dict[str, str | None]] = field(default_factory=dict)
    #: log id -> the reader's extra columns of its row (``SourceReader.extra_columns``: a span's
    #: trace id, ...), added to its score or failure row
    extras: dict[str, dict[str, Any]] = field(default_factory=dict)
    #: the cases' claim (deleted with the chunk's write), and the rows another live holder is
    #: judging (log id -> that holder): neither cases nor done, left for a later visit
    claim: Claim | None = None
    held: dict[str, ClaimHolder] = field(default_factory=dict)
    #: ids scored in this partition while they were unique, now shared by several rows: their
    #: score is deleted with the chunk's write, which records their "not unique" failure instead
    unscored: list[str] = field(default_factory=list)


def failure_row(
    log_id: str,
    pk: str,
    key: ScoringKey,
    error_type: str,
    message: str,
    attempts: int,
    run_id: str,
    at: datetime,
    chunk_index: int,
) -> dict[str, Any]:
    """A ``ctxprec_failures`` row of ``log_id`` under ``key``."""
    return {
        "log_id": log_id,
        "partition_key": pk,
        **key.values(),
        "error_type": error_type,
        "error_message": message[:4000],
        "attempts": int(attempts or 0),
        "run_id": run_id,
        "failed_at": at,
        "chunk_index": chunk_index,
    }


#: what a chunk's read gives: its rows, the ids already scored, the rows read, the ids that fit a
#: log id, the sampled ones, the scored ids whose segment values moved, their recorded values, the
#: scored ids that are no longer unique
_Read = tuple[
    list[dict[str, Any]], set[str], int, list[str], list[str], list[str], dict[str, dict[str, str | None]], list[str]
]


def _intake(ctx: PipelineContext, chunk: Chunk, run_id: str) -> Intake:
    """Read the chunk, skip rows already scored, turn the rest into cases or ``invalid_input``."""
    key, pk = ctx.key, chunk.partition_key
    sample, cutoff = ctx.config.sample, chunk.sample_cutoff

    def read(conn: Connection) -> _Read:
        every = ctx.rows.read_rows(conn, chunk.partition, chunk.after_id, chunk.upto_id)
        all_rows = len(every)
        every_id = [str(r["id"]) for r in every]
        limit = ctx.log_id_limit
        fits = [recordable_id(i, limit) for i in every_id]
        if not all(fits):  # no log_id can hold it: counted apart
            every, every_id = list(compress(every, fits)), list(compress(every_id, fits))
        if takes_every_row(cutoff):
            rows, log_ids = every, every_id
        else:
            picked = [sample.contains(i, cutoff) for i in every_id]
            rows = list(compress(every, picked))
            log_ids = list(compress(every_id, picked))
        done_ids = scored_ids(conn, ctx.tables, key, log_ids)
        unscored = _no_longer_unique(conn, ctx, pk, log_ids, done_ids)
        done_ids -= set(unscored)
        moved: list[str] = []
        recorded: dict[str, dict[str, str | None]] = {}
        if ctx.segments and done_ids:
            recorded, moved = _segmented(conn, ctx, pk, done_ids)
            done_ids = set(recorded)
        return rows, done_ids, all_rows, every_id, log_ids, moved, recorded, unscored

    # read again on a new connection if the server dropped the pooled one (warehouse.engine)
    rows, done_ids, all_rows, every_id, log_ids, moved, recorded, unscored = read_retrying(ctx.engine, read)
    intake = Intake(
        rows, done_ids, all_rows=all_rows, log_ids=log_ids, moved=moved, partition_key=pk, unscored=unscored
    )
    if ctx.segments:
        names = [(n, segment_column(n)) for n in ctx.segments]
        intake.segment_values = {i: {n: r.get(c) for n, c in names} for i, r in zip(log_ids, rows)}
        for log_id, was in recorded.items():
            current = {n: segment_value(v) for n, v in intake.segment_values.get(log_id, {}).items()}
            if current and current != was:
                intake.segment_refresh[log_id] = current
    if len(rows) < len(every_id):  # outside the sample: neither scored nor a failure
        intake.unsampled_ids = list(set(every_id) - set(log_ids))
    now = _now()
    to_case = ctx.rows.to_case
    extra = ctx.rows.extra_columns
    if extra:
        intake.extras = {i: {c: r.get(c) for c in extra} for i, r in zip(log_ids, rows)}
    duplicated: set[str] = set()
    if len(set(log_ids)) < len(log_ids):
        for log_id, n in Counter(log_ids).items():
            if n > 1:
                duplicated.add(log_id)
                if log_id in done_ids:
                    continue
                # which of the rows is the real one is unknowable: score none, say why (once per id)
                msg = (
                    f"column {ctx.source.id.name!r} value {log_id[:100]!r} is not unique: {n} rows of partition "
                    f"{pk} share it; none of them is scored until the duplicates are removed"
                )
                intake.failures.append(
                    failure_row(log_id, pk, key, InvalidTestCaseError.error_type, msg, 0, run_id, now, chunk.index)
                )
    skip = done_ids | duplicated if duplicated else done_ids
    # an INTEGER id column may hold text or reals in SQLite (``SourceTable.id_problem``); other
    # columns take any id
    check_id = ctx.source.id_problem if ctx.source.integer_ids else None
    cases, failures = intake.cases, intake.failures
    for log_id, row in zip(log_ids, rows):
        if log_id in skip:
            continue
        if check_id is not None and type(row["id"]) is not int:
            id_problem = check_id(row["id"])
            if id_problem is not None:
                failures.append(
                    failure_row(
                        log_id, pk, key, InvalidTestCaseError.error_type, id_problem, 0, run_id, now, chunk.index
                    )
                )
                continue
        try:
            cases.append(case_or_failure(to_case, row))
        except InvalidTestCaseError as exc:
            failures.append(failure_row(log_id, pk, key, exc.error_type, redact(str(exc)), 0, run_id, now, chunk.index))
    return intake


def _no_longer_unique(conn: Connection, ctx: PipelineContext, pk: str, log_ids: list[str], done: set[str]) -> list[str]:
    """The ids several of the chunk's rows share that were scored in this partition (while one row
    had them): which row the score is of is unknowable now, so it gives way to the "not unique"
    failure — none of them is scored until the duplicates are removed. (A score under another day
    is that day's row's: the ledger counts this day's rows apart.)"""
    if not done or len(set(log_ids)) == len(log_ids):
        return []
    shared = [i for i, n in Counter(log_ids).items() if n > 1 and i in done]
    if not shared:
        return []
    return [i for i, day in partitions_of(conn, ctx.tables, ctx.key, shared).items() if day == pk]


def _segmented(
    conn: Any, ctx: PipelineContext, pk: str, done_ids: set[str]
) -> tuple[dict[str, dict[str, str | None]], list[str]]:
    """The segment columns are part of a score's identity: of the rows scored already, those
    whose segment row records exactly ``ctx.segments`` stay done (returned with their recorded
    values); the others are scored again (the judgment cache answers). Also returns the re-scored
    ids whose score sits in another partition."""
    table = ctx.segments_table
    assert table is not None
    complete, present = segment_state(conn, table, ctx.key, pk, list(done_ids), ctx.segments)
    redo = done_ids - set(complete)
    moved: list[str] = []
    if redo - present:  # no segment row in this partition: a first segmentation, or a row that moved
        s = ctx.tables.scores
        for part in _parts(sorted(redo - present)):
            stmt = select(s.c.log_id).where(ctx.key.where(s), s.c.log_id.in_(part), s.c.partition_key != pk)
            moved.extend(r[0] for r in conn.execute(stmt))
    return {i: v for i, v in complete.items() if i in done_ids}, moved


def _parts(items: list[str], n: int = 500) -> list[list[str]]:
    return [items[i : i + n] for i in range(0, len(items), n)]


def remaining_budget(ctx: PipelineContext, run_id: str) -> Budget | None:
    """``max_cost`` minus what this run already spent (chunks scored on other workers)."""
    if ctx.config.max_cost is None:
        return None
    with read_connection(ctx.engine) as conn:
        spent = run_spend(conn, ctx.tables, ctx.key, run_id)["cost"] or 0.0
    return Budget(max(0.0, ctx.config.max_cost - spent))


def read_intake(ctx: PipelineContext, chunk: Chunk, run_id: str, claims: RowClaims | None = None) -> Intake:
    """Intake, its cases claimed (``claims``; ``None``: no claims) and the judgment cache
    preloaded for them (the read side of a chunk)."""
    intake = _intake(ctx, chunk, run_id)
    if claims is not None and intake.cases:
        _claim(intake, claims)
    offline = ctx.judge_is_offline  # offline judges are free and instant: nothing to cache
    if not intake.cases or (offline and intake.claim is None):
        return intake

    def read(conn: Connection) -> None:  # safe to repeat: read_retrying
        if intake.claim is not None:  # scored and released between the first read and the claim
            since = scored_ids(conn, ctx.tables, ctx.key, [str(c.id) for c in intake.cases])
            if since:
                intake.done_ids |= since
                intake.cases = [c for c in intake.cases if str(c.id) not in since]
        if intake.cases and not offline:
            with remembered_keys(intake.key_memo):
                keys = [k for case in intake.cases for k in ctx.metric.judgment_keys(case)]
            intake.cache = DictVerdictCache(load_judgments(conn, ctx.tables, keys))

    read_retrying(ctx.engine, read)
    return intake


def _claim(intake: Intake, claims: RowClaims) -> None:
    """Claim the cases' rows; those a live holder has claimed are left to it (``held``)."""
    claim = claims.claim([str(c.id) for c in intake.cases])
    intake.claim = claim
    if claim.held:
        intake.held = claim.held
        intake.cases = [c for c in intake.cases if str(c.id) not in claim.held]
