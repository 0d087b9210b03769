"""Score chunks in spawned worker processes (``score_partition(workers=N)``).

Each task is a contiguous batch of chunks that its worker scores as one stream (``stream``): the
judge queue is drained once per batch, not once per chunk. About four batches per worker keep the
load balanced when chunks differ in cost.
"""

from __future__ import annotations

import logging
import multiprocessing
import pickle
from concurrent.futures import FIRST_EXCEPTION, ProcessPoolExecutor, wait
from typing import Any

from ..warehouse.engine import in_memory
from .config import PipelineConfig
from .context import PipelineContext, prepare
from .records import Chunk, ChunkResult, ProgressCallback, ProgressEvent
from .stream import score_chunks

__all__ = ["can_fork_out", "score_in_processes", "batches"]

log = logging.getLogger("ctxprec_ops.pipeline")

_worker_ctx: PipelineContext | None = None


def can_fork_out(config: PipelineConfig) -> bool:
    """Whether chunks of ``config`` can be scored in other processes: a picklable config with a
    URL (not an ``Engine``), no ``max_cost`` (a budget cannot span processes), not in-memory."""
    if not isinstance(config.warehouse, str) or config.max_cost is not None:
        return False
    if in_memory(config.warehouse):
        return False  # each process would see its own empty in-memory database
    try:
        pickle.dumps(config)
    except Exception:
        log.info("config is not picklable (custom judge?): scoring chunks in this process")
        return False
    return True


def _worker_init(config: PipelineConfig) -> None:
    global _worker_ctx
    _worker_ctx = prepare(config)


def _worker_score(chunks: list[dict[str, Any]], run_id: str) -> list[dict[str, Any]]:
    assert _worker_ctx is not None
    batch = [Chunk.from_dict(c) for c in chunks]
    return [r.to_dict() for r in score_chunks(_worker_ctx, batch, run_id=run_id)]


def batches(chunks: list[Chunk], workers: int, per_worker: int = 4) -> list[list[Chunk]]:
    """``chunks`` cut into up to ``workers * per_worker`` contiguous batches of near-equal size."""
    n = max(1, min(len(chunks), workers * per_worker))
    size, extra = divmod(len(chunks), n)
    out, start = [], 0
    for i in range(n):
        end = start + size + (1 if i < extra else 0)
        out.append(chunks[start:end])
        start = end
    return [b for b in out if b]


def score_in_processes(
    config: PipelineConfig,
    chunks: list[Chunk],
    run_id: str,
    workers: int,
    progress: ProgressCallback | None,
    total: int,
) -> list[ChunkResult]:
    """Score ``chunks`` in a pool of spawned processes; chunk writes are independent upserts."""
    pk = chunks[0].partition_key
    results: list[ChunkResult] = []
    done = 0
    pool = ProcessPoolExecutor(
        max_workers=min(workers, len(chunks)),
        mp_context=multiprocessing.get_context("spawn"),
        initializer=_worker_init,
        initargs=(config,),
    )
    try:
        pending = {pool.submit(_worker_score, [c.to_dict() for c in b], run_id) for b in batches(chunks, workers)}
        while pending:
            finished, pending = wait(pending, return_when=FIRST_EXCEPTION)
            for fut in finished:
                for d in fut.result():  # re-raises a worker's exception
                    r = ChunkResult.from_dict(d)
                    results.append(r)
                    done += r.rows_total
                    if progress is not None:
                        progress(
                            ProgressEvent(
                                "chunk_done",
                                pk,
                                done,
                                total,
                                f"chunk {r.index}: {r.rows_scored} scored, {r.rows_failed} failed",
                            )
                        )
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
    return sorted(results, key=lambda r: r.index)
