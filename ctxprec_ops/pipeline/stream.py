"""Stream chunks through one judging queue: read ahead, judge continuously, write behind.

The judge sees one queue for all the chunks of a call, kept at ``concurrency`` requests in
flight: a chunk's slow last request no longer drains it before the next chunk starts. Chunks stay
the unit of reading and of the write transaction:

- a reader thread reads the next chunks (rows, already-scored ids, cached judgments) while the
  current ones are judged; at most ``OPEN_CHUNKS`` chunks are read and not yet written;
- the event loop judges every case through one ``JudgeRun`` limiter (and one budget);
- when a chunk's last case is judged, a single writer thread collects and writes it in one
  transaction (scores, failures, judgments), in the order chunks finish — one writer, so SQLite's
  single-writer rule holds and a crash leaves whole chunks only.
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Awaitable, Callable, TypeVar

from sqlalchemy.pool import SingletonThreadPool, StaticPool

from .._async import run_sync
from .._gc import quiet_gc
from ..budget import Budget
from ..cache import DictVerdictCache, remembered_keys
from ..judging import JudgeRun
from ..limiter import AdaptiveLimiter
from ..results import MetricResult
from ..verdicts import NodeVerdict
from .chunk import _Intake, finish_chunk, read_intake, remaining_budget
from .context import PipelineContext
from .records import Chunk, ChunkResult, ProgressCallback, ProgressEvent

__all__ = ["score_chunks", "OPEN_CHUNKS"]

#: chunks read and not yet written (one being written, one draining, one judged, one read ahead)
OPEN_CHUNKS = 4

T = TypeVar("T")


class _RunCache:
    """A chunk's judgment cache that also sees verdicts judged by this run's other chunks and not
    yet known to be written (``recent``), so a node repeated in neighbouring chunks is judged once.
    A verdict taken from ``recent`` is written again with this chunk (an insert-ignore), so every
    chunk's transaction holds the verdicts its scores used."""

    def __init__(self, own: DictVerdictCache, recent: dict[str, NodeVerdict]) -> None:
        self.own, self.recent = own, recent

    def get(self, key: str) -> NodeVerdict | None:
        v = self.own.get(key)
        if v is None and (v := self.recent.get(key)) is not None:
            self.own.put(key, v)
        return v

    def put(self, key: str, verdict: NodeVerdict) -> None:
        self.own.put(key, verdict)
        self.recent[key] = verdict


@dataclass
class _Open:
    """A chunk between its read and its write."""

    chunk: Chunk
    intake: _Intake
    run: JudgeRun
    started: float
    results: list[Any] = field(default_factory=list)
    pending: int = 0
    dispatched: bool = False


class _Progress:
    """Partition-wide settled rows (skipped, failed at intake, or judged): ``rows_done`` at most
    every ``interval`` seconds, and ``chunk_done`` when a chunk is written; never going backwards."""

    def __init__(self, progress: ProgressCallback | None, pk: str, base: int, total: int,
                 interval: float = 0.25) -> None:
        self.progress, self.pk, self.done, self.total, self.interval = progress, pk, base, total, interval
        self.last = 0.0

    def add(self, n: int) -> None:
        self.done += n
        if self.progress is None or n == 0:
            return
        now = time.monotonic()
        if self.done >= self.total or now - self.last >= self.interval:
            self.last = now
            self.progress(ProgressEvent("rows_done", self.pk, self.done, self.total))

    def event(self, kind: str, message: str) -> None:
        if self.progress is not None:
            self.progress(ProgressEvent(kind, self.pk, self.done, self.total, message))  # type: ignore[arg-type]


class _Stream:
    def __init__(self, ctx: PipelineContext, run_id: str, budget: Budget | None, progress: _Progress) -> None:
        cfg = ctx.config
        self.ctx, self.run_id, self.progress = ctx, run_id, progress
        self.base = JudgeRun(limiter=AdaptiveLimiter(cfg.concurrency), budget=budget, max_retries=cfg.max_retries)
        self.gate = asyncio.Semaphore(max(cfg.concurrency * 4, 8))  # live case coroutines
        self.slots = asyncio.Semaphore(OPEN_CHUNKS)
        self.recent: dict[str, NodeVerdict] = {}
        self.evictions: list[tuple[int, list[str]]] = []  # (reads started at the write, keys written)
        self.reads_started = self.dispatched = 0
        self.results: list[ChunkResult] = []
        self.reader = ThreadPoolExecutor(1, thread_name_prefix="ctxprec-read")
        # one connection shared by every thread (in-memory SQLite): reads and writes take turns
        shared = isinstance(ctx.engine.pool, (StaticPool, SingletonThreadPool))
        self.writer = self.reader if shared else ThreadPoolExecutor(1, thread_name_prefix="ctxprec-write")

    def _in(self, pool: ThreadPoolExecutor, fn: Callable[..., T], *args: Any) -> Awaitable[T]:
        return asyncio.get_running_loop().run_in_executor(pool, fn, *args)

    async def run(self, chunks: list[Chunk]) -> list[ChunkResult]:
        queue: asyncio.Queue[_Open | None] = asyncio.Queue()
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self._read_all(chunks, queue))
                await self._dispatch_all(queue, tg)
        except BaseExceptionGroup as group:
            raise _first(group) from None
        finally:
            self.reader.shutdown(wait=True, cancel_futures=True)
            self.writer.shutdown(wait=True, cancel_futures=True)
        return sorted(self.results, key=lambda r: r.index)

    async def _read_all(self, chunks: list[Chunk], queue: asyncio.Queue[_Open | None]) -> None:
        for chunk in chunks:
            await self.slots.acquire()
            self.reads_started += 1
            started = time.perf_counter()
            intake = await self._in(self.reader, read_intake, self.ctx, chunk, self.run_id)
            cache = None if intake.cache is None else _RunCache(intake.cache, self.recent)
            run = dataclasses.replace(self.base, cache=cache)  # shared limiter, budget and stats
            await queue.put(_Open(chunk, intake, run, started, [None] * len(intake.cases), len(intake.cases)))
        await queue.put(None)

    async def _dispatch_all(self, queue: asyncio.Queue[_Open | None], tg: asyncio.TaskGroup) -> None:
        while (op := await queue.get()) is not None:
            self.progress.event("chunk_started", f"chunk {op.chunk.index}")
            self.progress.add(len(op.intake.rows) - len(op.intake.cases))
            with remembered_keys(op.intake.key_memo):  # the cases' tasks find their keys computed
                for i, case in enumerate(op.intake.cases):
                    await self.gate.acquire()
                    tg.create_task(self._score(op, i, case, tg))
            op.dispatched = True
            if op.pending == 0:
                tg.create_task(self._write(op))
            await asyncio.sleep(0)  # the chunk's cases have looked up the cache
            self.dispatched += 1
            self._evict()

    async def _score(self, op: _Open, i: int, case: Any, tg: asyncio.TaskGroup) -> None:
        try:
            r: MetricResult = await self.ctx.metric.score_case(case, op.run, i)
        finally:
            self.gate.release()
        op.results[i] = r
        op.pending -= 1
        self.progress.add(1)
        if op.pending == 0 and op.dispatched:
            tg.create_task(self._write(op))

    async def _write(self, op: _Open) -> None:
        result = await self._in(self.writer, finish_chunk, self.ctx, op.chunk, op.intake, op.results,
                                self.run_id, op.started)
        self.slots.release()
        self.results.append(result)
        if op.intake.cache is not None and op.intake.cache.added:
            self.evictions.append((self.reads_started, list(op.intake.cache.added)))
        self.progress.event("chunk_done", f"chunk {result.index}: {result.rows_scored} scored, "
                                          f"{result.rows_failed} failed")

    def _evict(self) -> None:
        """Forget written verdicts once every chunk read before their write has looked up its cache."""
        keep = []
        for reads, keys in self.evictions:
            if reads <= self.dispatched:
                for k in keys:
                    self.recent.pop(k, None)
            else:
                keep.append((reads, keys))
        self.evictions = keep


def _first(group: BaseExceptionGroup) -> BaseException:
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


async def _stream(ctx: PipelineContext, chunks: list[Chunk], run_id: str, budget: Budget | None,
                  progress: _Progress) -> list[ChunkResult]:
    try:
        return await _Stream(ctx, run_id, budget, progress).run(chunks)
    finally:
        close = getattr(ctx.metric.model, "aclose", None)
        if close is not None:  # its HTTP client belongs to this event loop
            await close()


def score_chunks(ctx: PipelineContext, chunks: list[Chunk], *, run_id: str, budget: Budget | None = None,
                 progress: ProgressCallback | None = None, done_before: int = 0,
                 total: int | None = None) -> list[ChunkResult]:
    """Score ``chunks`` (of one partition) as one stream; returns their results in chunk order.

    ``budget`` defaults to ``config.max_cost`` minus what ``run_id`` has already spent. Progress
    counts from ``done_before`` towards ``total`` (default: these chunks' rows).
    """
    if not chunks:
        return []
    if budget is None:
        budget = remaining_budget(ctx, run_id)
    total = total if total is not None else done_before + sum(c.rows for c in chunks)
    tracker = _Progress(progress, chunks[0].partition_key, done_before, total)
    with quiet_gc():  # ~20-30 % of a fast judge's CPU per row otherwise (bench/README.md)
        return run_sync(lambda: _stream(ctx, chunks, run_id, budget, tracker))
