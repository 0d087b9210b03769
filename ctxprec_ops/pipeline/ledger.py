"""The run ledger: a partition's source rows reconciled with its score and failure rows.

Finalizing a run counts the partition's rows in the source *now* — with the predicate the plan
uses (``SourceReader.iter_ids``: a flat table's rows of that UTC day, a spans table's case spans)
— and checks that every one of them (every one in the sample, when sampling) has exactly one
score or failure row of the run's scoring key under that partition. A row in neither is
*unaccounted for*: a run with unaccounted rows is never ``succeeded`` (``records.run_status``),
and the run row, the CLI and the orchestrators name them.

Before counting, the ledger keeps the output in the day the source says: rows scored under
another day whose ``event_time`` now says this one are moved here, and rows of this day whose
source row left it (another day, or deleted) are removed (``warehouse/partition_rows.py``). An id
whose output row is under another day that still holds a row with that id is not moved: an id
names one row, and two days' rows sharing one would take its output from each other run after
run, each run ``succeeded``. Such a row is counted apart, as one whose id cannot be recorded
(``shared``, with the first few ids and their other day), and the run says why.

Ids are compared as the text stored in ``log_id`` (``str(id)``), through 64-bit hashes held in
sorted numpy arrays and matched by binary search (memory: ~40 bytes per row of the partition at
its peak — the source's hashes, their distinct values, the output's, a search's temporaries — not
the ids themselves); the ids named as unaccounted are read back in a second pass.

A row whose id is longer than ``log_id`` holds on the warehouse (255 characters on MySQL /
MariaDB, whose keys are capped at 3,072 bytes), or is not valid UTF-8 (SQLite stores any bytes as
text), can be neither scored nor recorded as a failure: it is counted apart (``refused``, with the
first few ids), like a row without an id.
"""

from __future__ import annotations

import logging
from array import array
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from itertools import chain
from typing import TYPE_CHECKING, Any

from ..warehouse.engine import read_connection, write_retrying
from ..warehouse.partition_rows import move_to_partition, partition_log_ids, partitions_of, remove_from_partition
from ..warehouse.source import Partition, recordable_id
from .sampling import FULL_CUTOFF, CutoffPlanner, sample_hash

if TYPE_CHECKING:
    import numpy as np

    from .context import PipelineContext

__all__ = ["Ledger", "reconcile", "EXAMPLES"]

log = logging.getLogger("ctxprec_ops.pipeline")

#: unaccounted ids named in the run row and the CLI's message at most
EXAMPLES = 5


@dataclass(frozen=True)
class Ledger:
    """A partition's source rows against its output rows, after moving rows to their day."""

    #: rows of the partition in the source now (with an id; rows without one are counted apart)
    source_rows: int
    #: of those, the rows the run had to account for (all of them without sampling)
    sampled_rows: int
    #: sampled rows in neither ``ctxprec_scores`` nor ``ctxprec_failures`` under this partition
    unaccounted: int
    #: the first few of their ids, in id-text order
    examples: tuple[str, ...] = ()
    #: output rows moved here from another day, and removed from this one (their source row left it)
    moved_in: int = 0
    removed: int = 0
    #: rows whose id ``log_id`` cannot hold (longer than it, or not valid UTF-8; not in
    #: ``source_rows``), the first few ids, and that length
    refused: int = 0
    refused_ids: tuple[str, ...] = ()
    id_limit: int | None = None
    #: ids of this day's rows that are also rows of another day, which holds their output row (not
    #: unaccounted: counted apart), and the first few (id, that day)
    shared: int = 0
    shared_ids: tuple[tuple[str, str], ...] = ()

    def refused_text(self) -> str:
        """One line naming the rows whose id cannot be recorded."""
        shown = ", ".join(_refused(i, self.id_limit) for i in self.refused_ids)
        more = ", ..." if self.refused > len(self.refused_ids) else ""
        return (
            f"{self.refused} row(s) have an id that log_id cannot hold on this warehouse and can be neither scored "
            f"nor recorded ({shown}{more}); fix those ids at the source"
        )

    def shared_text(self) -> str:
        """One line naming the rows whose id is also another day's row (not scored here)."""
        shown = ", ".join(f"{i[:60]!r} (also in {day})" for i, day in self.shared_ids)
        more = ", ..." if self.shared > len(self.shared_ids) else ""
        return (
            f"{self.shared} row(s) share their id with a row of another day, which holds the id's score or failure "
            f"({shown}{more}): an id names one row, so these are not scored in this day; give each row its own id"
        )


def _refused(text: str, limit: int | None) -> str:
    """A refused id as shown (never the text itself: it may not be encodable)."""
    if limit is not None and len(text) > limit:
        return f"{text[:24]!r}... ({len(text):,} characters; log_id holds {limit})"
    return f"{text[:40]!r} (not valid UTF-8)"


def _hashes(values: Iterable[Any]) -> np.ndarray:
    import numpy as np

    return np.fromiter((hash(str(v)) for v in values), dtype=np.int64)


def _distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values of ``values``, sorted (``values`` itself is sorted in place)."""
    import numpy as np

    values.sort()
    if values.size < 2:
        return values.copy()
    keep = np.empty(values.size, dtype=bool)
    keep[0] = True
    np.not_equal(values[1:], values[:-1], out=keep[1:])
    return values[keep]


def _within(distinct: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Which of ``values`` occur in ``distinct`` (sorted, no repeats): one binary search each,
    ~17 bytes a value of temporaries where ``np.isin`` sorts copies of both (~10 arrays' worth)."""
    import numpy as np

    if not distinct.size or not values.size:
        return np.zeros(values.size, dtype=bool)
    at = np.searchsorted(distinct, values)
    np.minimum(at, distinct.size - 1, out=at)
    return distinct[at] == values


def _source(ctx: PipelineContext, partition: Partition, refused: list[str]) -> tuple[np.ndarray, np.ndarray | None]:
    """The partition's ids as hashes, and (sampling) the mask of those in the run's sample; ids
    too long for ``log_id`` are left out and added to ``refused``."""
    import numpy as np

    sample = ctx.config.sample
    limit = ctx.log_id_limit
    with read_connection(ctx.engine) as conn:
        texts: Iterable[str] = _fitting((str(v) for v in ctx.rows.iter_ids(conn, partition)), limit, refused)
        if not sample.active:
            return _hashes(texts), None
        planner = CutoffPlanner(sample)
        ids = array("q")  # 8 bytes a row, where a list of ints holds ~40
        draws = array("Q")
        for text in texts:
            ids.append(hash(text))
            planner.add(text)
            draws.append(sample_hash(text, sample.seed))
    cutoff = planner.result()[0]
    hashes = np.frombuffer(ids, dtype=np.int64).copy()
    if cutoff >= FULL_CUTOFF:
        return hashes, None
    return hashes, np.frombuffer(draws, dtype=np.uint64) < np.uint64(cutoff)


def _fitting(texts: Iterable[str], limit: int | None, refused: list[str]) -> Iterable[str]:
    for text in texts:
        if recordable_id(text, limit):
            yield text
        else:
            refused.append(text)


def _output(ctx: PipelineContext, partition_key: str) -> np.ndarray:
    """Hashes of the log ids of the partition's score and failure rows (this scoring key),
    distinct and sorted."""
    with read_connection(ctx.engine) as conn:
        both = chain(
            partition_log_ids(conn, ctx.tables, ctx.key, partition_key),
            partition_log_ids(conn, ctx.tables, ctx.key, partition_key, failures=True),
        )
        return _distinct(_hashes(both))


def _texts(ctx: PipelineContext, partition: Partition, wanted: np.ndarray, limit: int | None = None) -> list[str]:
    """The source ids of the partition whose hash is in ``wanted`` (sorted; at most ``limit``)."""
    want = set(wanted.tolist())
    found: set[str] = set()
    with read_connection(ctx.engine) as conn:
        for value in ctx.rows.iter_ids(conn, partition):
            text = str(value)
            if hash(text) in want:
                found.add(text)
    return sorted(found)[:limit] if limit is not None else sorted(found)


def _output_texts(ctx: PipelineContext, partition_key: str, wanted: np.ndarray) -> list[str]:
    """The log ids of the partition's output rows whose hash is in ``wanted``."""
    want = set(wanted.tolist())
    found: set[str] = set()
    with read_connection(ctx.engine) as conn:
        for failures in (False, True):
            for log_id in partition_log_ids(conn, ctx.tables, ctx.key, partition_key, failures=failures):
                if hash(log_id) in want:
                    found.add(log_id)
    return sorted(found)


def _held_by_their_day(ctx: PipelineContext, days: dict[str, str]) -> dict[str, str]:
    """Of ``days`` (id -> the other day its output row is under), the ids whose row that day's
    source still holds (a scan of each such day's ids: only when output would move)."""
    wanted: dict[str, set[str]] = defaultdict(set)
    for log_id, day in days.items():
        wanted[day].add(log_id)
    held: dict[str, str] = {}
    with read_connection(ctx.engine) as conn:
        for day, ids in wanted.items():
            try:
                other = Partition.of(day)
            except ValueError:  # no day: nothing there holds it
                continue
            for value in ctx.rows.iter_ids(conn, other):
                text = str(value)
                if text in ids:
                    held[text] = day
    return held


def _keep_in_day(
    ctx: PipelineContext, partition: Partition, source: np.ndarray, expected: np.ndarray, output: np.ndarray
) -> tuple[int, int, dict[str, str]]:
    """Move here the output rows of this day's (sampled) ids recorded under another day — unless
    that day's source still holds a row with the id (returned: id -> that day) — and remove the
    output rows of ids no longer in this day's source; returns (moved in, removed, shared).
    ``source`` and ``output``: distinct and sorted."""
    import numpy as np

    partition_key = partition.key
    missing = np.unique(expected[~_within(output, expected)])
    stale = output[~_within(source, output)]
    moved = removed = 0
    shared: dict[str, str] = {}
    if missing.size:
        ids = _texts(ctx, partition, missing)
        with read_connection(ctx.engine) as conn:
            days = {i: pk for i, pk in partitions_of(conn, ctx.tables, ctx.key, ids).items() if pk != partition_key}
        shared = _held_by_their_day(ctx, days) if days else {}
        elsewhere = [i for i in days if i not in shared]
        if elsewhere:
            moved = write_retrying(
                ctx.engine, lambda conn: move_to_partition(conn, ctx.tables, ctx.key, partition_key, elsewhere)
            )
    if stale.size:
        gone = _output_texts(ctx, partition_key, stale)
        # read the source again: a row inserted (and scored by a concurrent run) after the first
        # read is not stale
        still = set(_texts(ctx, partition, _hashes(gone)))
        gone = [i for i in gone if i not in still]
        if gone:
            removed = write_retrying(
                ctx.engine, lambda conn: remove_from_partition(conn, ctx.tables, ctx.key, partition_key, gone)
            )
    if moved or removed:
        log.warning(
            "partition %s: %d output row(s) moved here from another day and %d removed (their source rows' "
            "event_time now says another day, or they were deleted): a row counts in the day its event_time says",
            partition_key,
            moved,
            removed,
        )
    return moved, removed, shared


def reconcile(ctx: PipelineContext, partition: Partition) -> Ledger:
    """Reconcile the partition's source rows with its output rows (see the module's docstring)."""
    import numpy as np

    refused: list[str] = []
    source, in_sample = _source(ctx, partition, refused)
    source_rows = int(source.size)
    expected = source if in_sample is None else source[in_sample]  # before the sort below
    distinct = _distinct(source)  # sorts ``source``: ``expected`` is then sorted too (no sample)
    output = _output(ctx, partition.key)
    moved, removed, shared = _keep_in_day(ctx, partition, distinct, expected, output)
    del distinct
    if moved or removed:
        output = _output(ctx, partition.key)
    # duplicate ids share one failure row (none of them is scored): each row counts as recorded
    accounted = _within(output, expected)
    if shared:  # counted apart
        accounted |= _within(_distinct(_hashes(shared)), expected)
    unaccounted = int(expected.size - int(accounted.sum()))
    examples: tuple[str, ...] = ()
    if unaccounted:
        examples = tuple(_texts(ctx, partition, np.unique(expected[~accounted]), EXAMPLES))
    return Ledger(
        source_rows=source_rows,
        sampled_rows=int(expected.size),
        unaccounted=unaccounted,
        examples=examples,
        moved_in=moved,
        removed=removed,
        refused=len(refused),
        refused_ids=tuple(sorted(refused)[:EXAMPLES]),
        id_limit=ctx.log_id_limit,
        shared=len(shared),
        shared_ids=tuple(sorted(shared.items())[:EXAMPLES]),
    )
