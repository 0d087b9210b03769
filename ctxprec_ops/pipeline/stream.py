"""Stream chunks through one judging queue: read ahead, judge continuously, write behind.

The judge sees one queue for all the chunks of a call, kept at ``concurrency`` requests in
flight: a chunk's slow last request no longer drains it before the next chunk starts. Chunks stay
the unit of reading and of the write transaction:

- a reader thread claims (``warehouse.claims``) and reads the next chunks (rows, already-scored
  ids, cached judgments) while the current ones are judged; at most ``OPEN_CHUNKS`` chunks are
  claimed and not yet written. A chunk another process holds is skipped and, after the free ones,
  waited for (then its rows are found scored) — or left out with ``wait_taken=False``;
- the event loop judges every case through one ``JudgeRun`` limiter (and one budget, and the
  context's circuit breaker and request quota); a kind that needs no judge is computed in place,
  and the cases of a judge that answers inline (``JudgeModel.answers_inline``) are judged one
  after another by the dispatcher itself (nothing to wait for: no task per case);
- when a chunk's last case is judged, a single writer thread collects and writes it in one
  transaction (scores, failures, judgments), in the order chunks finish — one writer, so SQLite's
  single-writer rule holds and a crash leaves whole chunks only. A chunk's claim is released
  once its write has committed.

A stream with nothing to wait for — on SQLite, a kind that needs no judge or a judge that answers
inline — reads, judges and writes on the event loop's own thread, one step after another (the same
steps in the same order, chunk by chunk). All of its work is this process's CPU (SQLite runs in
process), so reader and writer threads could only trade the GIL with it: that cost ~20 % more CPU
per row and made the run slower, not faster (bench/README.md).
"""

from __future__ import annotations

import asyncio
import dataclasses
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import ExitStack, nullcontext
from dataclasses import dataclass, field
from typing import Any, TypeVar

from sqlalchemy.pool import SingletonThreadPool, StaticPool

from .._async import run_sync
from .._gc import quiet_gc
from ..cases.results import MetricResult
from ..judge.budget import Budget
from ..judge.cache import DictVerdictCache, remembered_keys
from ..judge.calls import CaseRef, JudgeRun, answers_inline_in, current_case, use_guards
from ..judge.limiter import AdaptiveLimiter
from ..judge.retry import RetryWaits
from ..scoring.verdicts import NodeVerdict
from ..warehouse.claims import chunk_claim
from ..warehouse.dialects import dialect_of
from .cascade import ensure_cascade
from .chunk import chunk_claim_name, finish_chunk
from .config import PipelineConfig
from .context import PipelineContext, prepare
from .intake import Intake, read_intake, remaining_budget
from .records import Chunk, ChunkResult, ProgressCallback
from .stream_progress import Progress, breaker_progress

__all__ = ["score_chunks", "score_chunk", "score_chunk_if_free", "OPEN_CHUNKS"]

#: chunks claimed and not yet written (one being written, one draining, one judged, one read ahead)
OPEN_CHUNKS = 4

T = TypeVar("T")


class _RunCache:
    """A chunk's judgment cache that also sees verdicts judged by this run's other chunks and not
    yet known to be written (``recent``), so a node repeated in neighbouring chunks is judged once.
    A verdict taken from ``recent`` is written again with this chunk (an insert-ignore), so every
    chunk's transaction holds the verdicts its scores used."""

    def __init__(self, own: DictVerdictCache, recent: dict[bytes, NodeVerdict]) -> None:
        self.own, self.recent = own, recent

    def get(self, key: bytes) -> NodeVerdict | None:
        v = self.own.get(key)
        if v is None and (v := self.recent.get(key)) is not None:
            self.own.put(key, v)
        return v

    def put(self, key: bytes, verdict: NodeVerdict) -> None:
        self.own.put(key, verdict)
        self.recent[key] = verdict


class _SnapshotCache:
    """A chunk's judgment cache for a judge that answers by prompt (``stable_prompts``: a deferred
    transport matching answers to the requests it recorded): lookups see the verdicts the chunk's
    read found, never ones judged during this pass, so a case asks exactly the prompt it asked when
    its request was recorded. New verdicts are still kept for the chunk's write."""

    def __init__(self, own: DictVerdictCache) -> None:
        self.own = own

    def get(self, key: bytes) -> NodeVerdict | None:
        return None if key in self.own.added else self.own.get(key)

    def put(self, key: bytes, verdict: NodeVerdict) -> None:
        self.own.put(key, verdict)


@dataclass
class _Open:
    """A chunk between its read and its write."""

    chunk: Chunk
    intake: Intake
    run: JudgeRun
    started: float
    claim: ExitStack
    results: list[Any] = field(default_factory=list)
    pending: int = 0
    dispatched: bool = False


class _Stream:
    def __init__(
        self, ctx: PipelineContext, run_id: str, budget: Budget | None, progress: Progress, wait_taken: bool
    ) -> None:
        cfg = ctx.config
        self.ctx, self.run_id, self.progress, self.wait_taken = ctx, run_id, progress, wait_taken
        self.base = JudgeRun(
            limiter=AdaptiveLimiter(cfg.concurrency),
            budget=budget,
            max_retries=cfg.max_retries,
            waits=RetryWaits(cfg.retry_initial_wait, cfg.retry_max_wait),
            breaker=ctx.guards.breaker,
            quota=ctx.guards.quota,
        )
        self.claims: set[ExitStack] = set()  # claimed chunks not yet written (released on any exit)
        self.gate = asyncio.Semaphore(max(cfg.concurrency * 4, 8))  # live case coroutines
        #: the judge answers inline (``JudgeModel.answers_inline``): no task per case
        self.inline = answers_inline_in(getattr(ctx.metric, "model", None), self.base)
        #: the judge wants to know which case each call is for (``judge.calls.current_case``)
        self.tag_cases = bool(getattr(getattr(ctx.metric, "model", None), "tags_cases", False))
        #: the judge answers by prompt identity (``_SnapshotCache``)
        self.stable_prompts = bool(getattr(getattr(ctx.metric, "model", None), "stable_prompts", False))
        self.slots = asyncio.Semaphore(OPEN_CHUNKS)
        self.recent: dict[bytes, NodeVerdict] = {}
        self.evictions: list[tuple[int, list[bytes]]] = []  # (reads started at the write, keys written)
        self.reads_started = self.dispatched = 0
        self.results: list[ChunkResult] = []
        #: nothing to wait for: every step is this process's CPU (SQLite runs in process, the judge
        #: answers inline or is not needed), so reads and writes run on the event loop's thread
        self.serial = dialect_of(ctx.engine).serial_in_process and (self.inline or not cfg.kind.needs_judge)
        self.reader = ThreadPoolExecutor(1, thread_name_prefix="ctxprec-read")
        # reads and writes take turns on the reader's thread when one connection is shared by every
        # thread (in-memory SQLite)
        shared = isinstance(ctx.engine.pool, (StaticPool, SingletonThreadPool))
        self.writer = self.reader if shared else ThreadPoolExecutor(1, thread_name_prefix="ctxprec-write")

    async def _in(self, pool: ThreadPoolExecutor, fn: Callable[..., T], *args: Any) -> T:
        if self.serial:
            return fn(*args)
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)

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
            for claim in list(self.claims):  # an aborted stream: its chunks are not written
                _release(claim)
        return sorted(self.results, key=lambda r: r.index)

    async def _read_all(self, chunks: list[Chunk], queue: asyncio.Queue[_Open | None]) -> None:
        taken = [c for c in chunks if not await self._read(c, queue, wait=False)]  # another process has it
        if self.wait_taken:
            for chunk in taken:  # free chunks first, then wait for the taken ones
                await self._read(chunk, queue, wait=True)
        await queue.put(None)

    async def _read(self, chunk: Chunk, queue: asyncio.Queue[_Open | None], *, wait: bool) -> bool:
        """Claim and read ``chunk`` into the queue; False (nothing read) when another process holds it."""
        await self.slots.acquire()
        started = time.perf_counter()
        claim = ExitStack()
        self.claims.add(claim)
        got = await self._in(self.reader, _claim, claim, self.ctx, chunk, wait)
        if not got:
            self.claims.discard(claim)
            await self._in(self.reader, _release, claim)
            self.slots.release()
            return False
        self.reads_started += 1
        intake = await self._in(self.reader, read_intake, self.ctx, chunk, self.run_id)
        cache: _RunCache | _SnapshotCache | None = None
        if intake.cache is not None:
            cache = _SnapshotCache(intake.cache) if self.stable_prompts else _RunCache(intake.cache, self.recent)
        run = dataclasses.replace(self.base, cache=cache)  # shared limiter, budget, guards and stats
        await queue.put(_Open(chunk, intake, run, started, claim, [None] * len(intake.cases), len(intake.cases)))
        return True

    async def _dispatch_all(self, queue: asyncio.Queue[_Open | None], tg: asyncio.TaskGroup) -> None:
        while (op := await queue.get()) is not None:
            self.progress.event("chunk_started", f"chunk {op.chunk.index}")
            self.progress.add(op.intake.all_rows - len(op.intake.cases))
            if not self.ctx.config.kind.needs_judge:  # pure computation: the writer computes and writes
                self.progress.add(op.pending)
                op.pending = 0
            elif self.inline:  # nothing to wait for: judge the cases here, one after another
                with remembered_keys(op.intake.key_memo):
                    for i, case in enumerate(op.intake.cases):
                        await self._judge(op, i, case, tg)
            else:
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
        """One case as its own task (a judge that is waited for); frees its ``gate`` slot."""
        try:
            await self._judge(op, i, case, tg)
        finally:
            self.gate.release()

    async def _judge(self, op: _Open, i: int, case: Any, tg: asyncio.TaskGroup) -> None:
        if self.tag_cases:  # a transport that collects requests labels them by case
            token = current_case.set(CaseRef(str(case.id), (op.chunk.index, i)))
            try:
                r: MetricResult = await self.ctx.metric.score_case(case, op.run, i)
            finally:
                current_case.reset(token)
        else:
            r = await self.ctx.metric.score_case(case, op.run, i)
        op.results[i] = r
        op.pending -= 1
        self.progress.add(1)
        if op.pending == 0 and op.dispatched:
            tg.create_task(self._write(op))

    async def _write(self, op: _Open) -> None:
        result = await self._in(self.writer, self._finish, op)
        self.slots.release()
        self.results.append(result)
        if op.intake.cache is not None and op.intake.cache.added:
            self.evictions.append((self.reads_started, list(op.intake.cache.added)))
        self.progress.event(
            "chunk_done", f"chunk {result.index}: {result.rows_scored} scored, {result.rows_failed} failed"
        )

    def _finish(self, op: _Open) -> ChunkResult:
        """Write the chunk, then release its claim (in the writer thread)."""
        result = finish_chunk(self.ctx, op.chunk, op.intake, op.results, self.run_id, op.started)
        self.claims.discard(op.claim)
        _release(op.claim)
        return result

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


def _claim(stack: ExitStack, ctx: PipelineContext, chunk: Chunk, wait: bool) -> bool:
    claim = chunk_claim(
        ctx.engine,
        chunk_claim_name(ctx, chunk),
        wait=wait,
        schema=ctx.config.output_schema,
        lease=ctx.config.claim_lease_seconds,
    )
    return bool(stack.enter_context(claim))


def _release(stack: ExitStack) -> None:
    try:
        stack.close()
    except Exception:  # a lost session has dropped its locks already
        pass


def _first(group: BaseExceptionGroup) -> BaseException:
    exc: BaseException = group
    while isinstance(exc, BaseExceptionGroup):
        exc = exc.exceptions[0]
    return exc


async def _stream(
    ctx: PipelineContext, chunks: list[Chunk], run_id: str, budget: Budget | None, progress: Progress, wait_taken: bool
) -> list[ChunkResult]:
    try:
        return await _Stream(ctx, run_id, budget, progress, wait_taken).run(chunks)
    finally:
        close = getattr(getattr(ctx.metric, "model", None), "aclose", None)
        if close is not None:  # its HTTP client belongs to this event loop
            await close()


def score_chunks(
    ctx: PipelineContext,
    chunks: list[Chunk],
    *,
    run_id: str,
    budget: Budget | None = None,
    progress: ProgressCallback | None = None,
    done_before: int = 0,
    total: int | None = None,
    wait_taken: bool = True,
) -> list[ChunkResult]:
    """Score ``chunks`` (of one partition) as one stream; returns their results in chunk order.

    ``budget`` defaults to ``config.max_cost`` minus what ``run_id`` has already spent. Progress
    counts from ``done_before`` towards ``total`` (default: these chunks' rows). A chunk another
    process has claimed is scored after the free ones, once released (``wait_taken``), else left
    out of the results.
    """
    if not chunks:
        return []
    ensure_cascade(ctx, chunks[0].partition)  # a cascade's threshold: the run's, when set apart
    if budget is None:
        budget = remaining_budget(ctx, run_id)
    total = total if total is not None else done_before + sum(c.rows for c in chunks)
    tracker = Progress(progress, chunks[0].partition_key, done_before, total)
    # quiet_gc (opt-in: it changes the whole process's collector): ~20-30 % of a fast judge's CPU
    # per row otherwise (bench/README.md)
    collector = quiet_gc() if ctx.config.quiet_gc else nullcontext()
    with collector, use_guards(ctx.guards), breaker_progress(ctx.guards.breaker, progress, tracker.pk):
        return run_sync(lambda: _stream(ctx, chunks, run_id, budget, tracker, wait_taken))


def score_chunk(
    config: PipelineConfig,
    chunk: Chunk | dict[str, Any],
    *,
    run_id: str,
    progress: ProgressCallback | None = None,
    budget: Budget | None = None,
    context: PipelineContext | None = None,
) -> ChunkResult:
    """Score one chunk and write its outcome in one transaction.

    Rows already scored for this (metric, judge model, prompt version) are not judged again
    (they count as ``rows_scored`` and ``rows_cached``). Bad rows become ``invalid_input``
    failures; errored cases become failures with the core's ``error_type``. A failure record of
    a row that is now scored is deleted. ``budget`` defaults to ``config.max_cost`` minus what
    ``run_id`` has already spent. On PostgreSQL the chunk is claimed first: a process scoring the
    same chunk at the same time is waited for, and its rows are then skipped, not paid twice.
    """
    result = score_chunk_if_free(
        config, chunk, run_id=run_id, progress=progress, budget=budget, context=context, wait=True
    )
    assert result is not None
    return result


def score_chunk_if_free(
    config: PipelineConfig,
    chunk: Chunk | dict[str, Any],
    *,
    run_id: str,
    progress: ProgressCallback | None = None,
    budget: Budget | None = None,
    context: PipelineContext | None = None,
    wait: bool = False,
) -> ChunkResult | None:
    """``score_chunk``, or ``None`` without doing anything when another process holds the
    chunk's claim (``wait=False``). The chunk is a one-chunk stream (``stream.score_chunks``)."""
    if isinstance(chunk, dict):
        chunk = Chunk.from_dict(chunk)
    _ = chunk.partition  # its key parsed: a bad one is refused here, before anything is read
    ctx = context or prepare(config)
    results = score_chunks(ctx, [chunk], run_id=run_id, budget=budget, progress=progress, wait_taken=wait)
    return results[0] if results else None
