"""Which log ids a partition's output rows hold, and keeping them in the day their source row says.

The run ledger (``pipeline/ledger.py``) reconciles a partition's source rows with these rows. A
row counts in the UTC day its ``event_time`` says *now*: when a source row's ``event_time`` is
corrected to another day, its score (or failure) row follows it — ``move_to_partition`` rewrites
the ``partition_key`` of the rows scored under another day, and ``remove_from_partition`` deletes
the rows of ids that are no longer in the partition's source (the judgment cache keeps their
verdicts: scoring them again where they belong costs no judge call).

Every statement is restricted to one scoring key; the tables that carry a partition key per score
(``ctxprec_segments``, ``ctxprec_label_figures``) follow their score rows.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import Table, and_, delete, select, update
from sqlalchemy.engine import Connection

from .dialects import dialect_of
from .engine import stream_batches
from .reflect import has_table
from .schema import OutputTables, readable
from .scoring_key import ScoringKey

__all__ = ["partition_log_ids", "move_to_partition", "remove_from_partition", "partitions_of"]


def partition_log_ids(
    conn: Connection, t: OutputTables, key: ScoringKey, partition_key: str, *, failures: bool = False
) -> Iterator[str]:
    """The log ids of the partition's score rows (``failures=True``: its failure rows), streamed."""
    table = readable(conn, t.failures if failures else t.scores)
    c = table.c
    stmt = select(c.log_id).where(key.where(table), c.partition_key == partition_key)
    for part in stream_batches(conn, stmt, 10_000):
        for (log_id,) in part:
            yield log_id


def partitions_of(conn: Connection, t: OutputTables, key: ScoringKey, log_ids: Sequence[str]) -> dict[str, str]:
    """``{log_id: partition_key}`` of those of ``log_ids`` that have a score or failure row."""
    out: dict[str, str] = {}
    for table in (t.failures, t.scores):  # a score row wins over a stale failure row
        c = table.c
        for cond in dialect_of(conn).id_in(conn, c.log_id, list(dict.fromkeys(log_ids))):
            stmt = select(c.log_id, c.partition_key).where(key.where(table), cond)
            out.update((log_id, pk) for log_id, pk in conn.execute(stmt))
    return out


def _key_where(key: ScoringKey, table: Table) -> Any:
    """``key.where(table)`` over the key columns ``table`` has (the label figures have no
    ``source_table``)."""
    return and_(*(table.c[name] == value for name, value in key.fields(table) if name in table.c))


def _followers(conn: Connection, t: OutputTables) -> list[Table]:
    """The per-score tables that exist besides scores and failures (segments, label figures)."""
    from .label_figures import label_figures_table
    from .segments import existing_segments_table

    out: list[Table] = []
    segments, _names = existing_segments_table(conn, t.scores.schema)
    if segments is not None:
        out.append(segments)
    figures = label_figures_table(t.scores.schema)
    if has_table(conn, figures.name, figures.schema):
        out.append(figures)
    return out


def move_to_partition(
    conn: Connection, t: OutputTables, key: ScoringKey, partition_key: str, log_ids: Sequence[str]
) -> int:
    """Rewrite the ``partition_key`` of ``log_ids``' output rows recorded under another day to
    ``partition_key`` (inside the caller's write transaction); returns the score and failure
    rows moved."""
    moved = 0
    tables = [t.scores, t.failures, *_followers(conn, t)]
    for table in tables:
        c = table.c
        for cond in dialect_of(conn).id_in(conn, c.log_id, list(dict.fromkeys(log_ids))):
            stmt: Any = (
                update(table)
                .where(_key_where(key, table), cond, c.partition_key != partition_key)
                .values(partition_key=partition_key)
            )
            n = int(conn.execute(stmt).rowcount or 0)
            if table is t.scores or table is t.failures:
                moved += n
    return moved


def remove_from_partition(
    conn: Connection, t: OutputTables, key: ScoringKey, partition_key: str, log_ids: Sequence[str]
) -> int:
    """Delete ``log_ids``' output rows recorded under ``partition_key`` (inside the caller's write
    transaction): their source rows are no longer in that day. Returns the score and failure rows
    deleted."""
    removed = 0
    for table in [t.scores, t.failures, *_followers(conn, t)]:
        c = table.c
        for cond in dialect_of(conn).id_in(conn, c.log_id, list(dict.fromkeys(log_ids))):
            stmt: Any = delete(table).where(_key_where(key, table), cond, c.partition_key == partition_key)
            n = int(conn.execute(stmt).rowcount or 0)
            if table is t.scores or table is t.failures:
                removed += n
    return removed
