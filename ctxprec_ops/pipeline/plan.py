"""Cut a partition into keyset chunks: the only pager over a partition's ids (``estimate`` too)."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

from sqlalchemy.engine import Engine

from ..warehouse.engine import read_connection
from ..warehouse.source import Partition, SourceTable, recordable_id
from .config import PipelineConfig
from .context import PipelineContext, prepare
from .formats import RowsReader, SourceReader
from .records import Chunk
from .sampling import CutoffPlanner, Sample

__all__ = ["plan_source", "plan_chunks", "iter_chunk_rows"]

log = logging.getLogger("ctxprec_ops.pipeline")


def plan_source(
    engine: Engine,
    source: SourceTable,
    partition: Partition,
    size: int,
    sample: Sample | None = None,
    reader: SourceReader | None = None,
) -> list[Chunk]:
    """Cut the partition of ``source`` into chunks of ``size`` rows by keyset on ``id``.

    Streams ids only (memory: the boundaries, not the rows). A chunk is ``(after_id, upto_id]``;
    rows added to the partition later inside a chunk's range are scored with that chunk. Read-only.
    With an active ``sample`` every chunk carries the partition's sampling cutoff (chunks still
    count all their rows). ``reader`` says which of the partition's rows are cases (default:
    all of them; a spans table's: its retriever spans).
    """
    chunks: list[Chunk] = []
    after: Any = None
    last: Any = None  # the last id that can bound a chunk since ``after`` (None: none yet)
    n = 0
    planner = CutoffPlanner(sample) if sample is not None and sample.active else None
    ids: SourceReader = reader if reader is not None else RowsReader(source, None)
    with read_connection(engine) as conn:
        for value in ids.iter_ids(conn, partition):
            n += 1
            if planner is not None:
                planner.add(str(value))
            if type(value) is str and not recordable_id(value, None):
                continue  # no driver can send it back (not UTF-8): inside a chunk, never its bound
            last = value
            if n >= size:
                chunks.append(Chunk.of(partition, len(chunks), after, last, n))
                after, last, n = last, None, 0
        nulls = ids.count_null_ids(conn, partition)
    if nulls:  # no log_id to record them under: say so rather than drop them silently
        log.warning(
            "partition %s of %s: %d row(s) have a NULL %s and cannot be scored or recorded as failures; give them ids",
            partition.key,
            source.name,
            nulls,
            source.id.name,
        )
    if n and last is not None:  # (rows after the last id that can bound a chunk: counted apart)
        chunks.append(Chunk.of(partition, len(chunks), after, last, n))
    if planner is not None:
        cutoff, rows, sampled = planner.result()
        log.info(
            "partition %s: sample of %d of %d rows (rate %g%s)",
            partition.key,
            sampled,
            rows,
            planner.sample.rate,
            f", max_rows {planner.sample.max_rows}" if planner.sample.max_rows is not None else "",
        )
        chunks = [c.with_cutoff(cutoff) for c in chunks]
    return chunks


def plan_chunks(
    config: PipelineConfig, partition_key: str | Partition, *, context: PipelineContext | None = None
) -> list[Chunk]:
    """Cut the partition (a key ``YYYY-MM-DD`` or a ``Partition``) into chunks of
    ``config.chunk_size`` rows (see ``plan_source``)."""
    partition = Partition.of(partition_key)
    if context is None:
        from .staging import stage_source

        stage_source(config, partition)
    ctx = context or prepare(config)
    return plan_source(ctx.engine, ctx.source, partition, config.rows_per_chunk, config.sample, ctx.rows)


def iter_chunk_rows(
    engine: Engine,
    source: SourceTable,
    partition: Partition,
    size: int,
    sample: Sample | None = None,
    reader: SourceReader | None = None,
) -> Iterator[tuple[Chunk, list[dict[str, Any]]]]:
    """Every planned chunk with its rows (logical column names), one chunk in memory at a time;
    with a ``sample``, only the rows in it; ``reader``: the source format's (default: the rows)."""
    rows_of = reader if reader is not None else RowsReader(source, None)
    for chunk in plan_source(engine, source, partition, size, sample, rows_of):
        with read_connection(engine) as conn:
            rows = rows_of.read_rows(conn, partition, chunk.after_id, chunk.upto_id)
        if sample is not None and chunk.sample_cutoff is not None:
            rows = [r for r in rows if sample.contains(str(r["id"]), chunk.sample_cutoff)]
        yield chunk, rows
