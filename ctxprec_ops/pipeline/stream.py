"""Stream chunks through one judging queue: read ahead, judge continuously, write behind.

The judge sees one queue for all the chunks of a call, kept at ``concurrency`` requests in
flight: a chunk's slow last request no longer drains it before the next chunk starts. Chunks stay
the unit of reading and of the write transaction:

- a reader thread reads the next chunks (rows, already-scored ids, cached judgments) and claims
  the rows it will judge (``warehouse/claims.py``) while the current ones are judged; at most
  ``OPEN_CHUNKS`` chunks are read and not yet written. Rows another run is judging are left to
  it; once the free chunks are done the stream waits until they are released (saying which run
  holds them) and reads their chunks again, finding them scored — or leaves them, with
  ``wait_taken=False``;
- the event loop judges every case through one ``JudgeRun`` limiter (and one budget, and the
  context's circuit breaker and request quota); a kind that needs no judge is computed in place,
  and the cases of a judge that answers inline (``JudgeModel.answers_inline``) are judged one
  after another by the dispatcher itself (nothing to wait for: no task per case). A judge that is
  waited for has its new verdicts committed to the judgment cache as they arrive
  (``verdict_flush``): a case counts as judged once they are, and at most ``concurrency`` cases
  are judged or waiting for that commit at a time, so a crash loses only the calls in flight;
- when a chunk's last case is judged, a single writer thread collects and writes it in one
  transaction (scores, failures, judgments not written yet, the end of its claim), in the order
  chunks finish — one writer, so SQLite's single-writer rule holds and a crash leaves whole
  chunks only.

A stream with nothing to wait for — on SQLite, a kind that needs no judge or a judge that answers
inline — reads, judges and writes on the event loop's own thread, one step after another (the same
steps in the same order, chunk by chunk). All of its work is this process's CPU (SQLite runs in
process), so reader and writer threads could only trade the GIL with it: that cost ~20 % more CPU
per row and made the run slower, not faster (bench/README.md). Such a judge costs nothing to ask
again, so its rows are not claimed and its verdicts are written with their chunk.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import random
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import nullcontext
from dataclasses import dataclass, field
from typing import Any, TypeVar

from .._async import run_sync
from .._gc import quiet_gc
from ..cases.results import MetricResult
from ..judge.budget import Budget
from ..judge.cache import remembered_keys
from ..judge.calls import CaseRef, JudgeRun, answers_inline_in, current_case, use_guards
from ..judge.limiter import AdaptiveLimiter
from ..judge.retry import RetryWaits
from ..scoring.verdicts import NodeVerdict
from ..warehouse.claims import RowClaims, claim_scope, waiting_text
from ..warehouse.dialects import dialect_of
from ..warehouse.engine import (
    check_reachable_from_a_thread,
    connections_at_once,
    connections_per_thread,
    in_memory,
    write_retrying,
)
from ..warehouse.upsert import insert_ignore
from .cascade import ensure_cascade
from .chunk import finish_chunk, judgment_rows
from .config import PipelineConfig
from .context import PipelineContext, prepare
from .intake import Intake, read_intake, remaining_budget
from .records import Chunk, ChunkResult, ProgressCallback
from .run_cache import RunCache, SnapshotCache, verdicts_ticket
from .stream_progress import Progress, breaker_progress
from .verdict_flush import VerdictFlush

__all__ = ["score_chunks", "score_chunk", "score_chunk_if_free", "claims_scope", "OPEN_CHUNKS"]

log = logging.getLogger("ctxprec_ops.pipeline")

#: chunks read and not yet written (one being written, one draining, one judged, one read ahead)
OPEN_CHUNKS = 4
#: seconds between two looks at rows another run holds (growing to ``HELD_POLL_MAX``), and between
#: two messages saying what is waited for when nothing changed
HELD_POLL, HELD_POLL_MAX, HELD_REPORT = 0.25, 2.0, 30.0

T = TypeVar("T")


@dataclass
class _Open:
    """A chunk between its read and its write (one visit: a chunk with rows another run held is
    read again once they are released)."""

    chunk: Chunk
    intake: Intake
    run: JudgeRun
    started: float
    results: list[Any] = field(default_factory=list)
    pending: int = 0
    dispatched: bool = False
    #: rows of the chunk an earlier visit settled (counted in progress already)
    counted: int = 0
    #: the flush that commits the last of its cases' new verdicts (``VerdictFlush`` ticket)
    ticket: int = 0
    written: asyncio.Event = field(default_factory=asyncio.Event)


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
        self.gate = asyncio.Semaphore(max(cfg.concurrency * 4, 8))  # live case coroutines
        model = getattr(ctx.metric, "model", None)
        #: the judge answers inline (``JudgeModel.answers_inline``): no task per case
        self.inline = answers_inline_in(model, self.base)
        #: the judge wants to know which case each call is for (``judge.calls.current_case``)
        self.tag_cases = bool(getattr(model, "tags_cases", False))
        #: the judge answers by prompt identity (``SnapshotCache``)
        self.stable_prompts = bool(getattr(model, "stable_prompts", False))
        self.slots = asyncio.Semaphore(OPEN_CHUNKS)
        self.recent: dict[bytes, NodeVerdict] = {}
        self.evictions: list[tuple[int, list[bytes]]] = []  # (reads started at the write, keys written)
        self.reads_started = self.dispatched = 0
        self.results: dict[int, ChunkResult] = {}
        #: chunks read with rows another run held, by index: their latest visit
        self.held: dict[int, _Open] = {}
        #: a connection per thread (SQLAlchemy's ``SingletonThreadPool``, an in-memory DuckDB engine's
        #: default): a thread of ours would open a database of its own, empty, so every read and
        #: write stays on the event loop's thread
        per_thread = connections_per_thread(ctx.engine)
        #: nothing to wait for: every step is this process's CPU (SQLite runs in process, the judge
        #: answers inline or is not needed), so reads and writes run on the event loop's thread —
        #: unless the source's reads wait on the database long enough to overlap (a spans table)
        self.serial = per_thread or (
            dialect_of(ctx.engine).serial_in_process
            and (self.inline or not cfg.kind.needs_judge)
            and not ctx.rows.reads_overlap_judging
        )
        self.reader = ThreadPoolExecutor(1, thread_name_prefix="ctxprec-read")
        # reads and writes take turns on the reader's thread when one connection is shared by every
        # thread (in-memory SQLite)
        shared = not connections_at_once(ctx.engine)
        self.writer = self.reader if shared else ThreadPoolExecutor(1, thread_name_prefix="ctxprec-write")
        #: a judge that is paid for (waited for, not offline): its rows are claimed and its verdicts
        #: committed as they arrive
        paid = cfg.kind.needs_judge and not ctx.judge_is_offline and not self.inline
        self.claims: RowClaims | None = None
        self.flush: VerdictFlush | None = None
        self.saver: ThreadPoolExecutor | None = None
        self.unsaved: asyncio.Semaphore | None = None
        if paid and not in_memory(ctx.engine.url):  # only this process sees an in-memory database
            self.claims = RowClaims(
                ctx.engine,
                claims_scope(ctx, progress.pk),
                run_id=run_id,
                schema=cfg.output_schema,
                lease=cfg.claim_lease_seconds,
            )
        if paid and not self.stable_prompts and not per_thread:  # (per thread: with their chunk)
            self.saver = self.writer if shared else ThreadPoolExecutor(1, thread_name_prefix="ctxprec-verdicts")
            self.flush = VerdictFlush(self._save_verdicts, self.saver)
            self.unsaved = asyncio.Semaphore(cfg.concurrency)

    def _save_verdicts(self, verdicts: dict[bytes, NodeVerdict]) -> None:
        rows = judgment_rows(self.ctx, verdicts)
        write_retrying(self.ctx.engine, lambda conn: insert_ignore(conn, self.ctx.tables.judgments, rows))

    async def _in(self, pool: ThreadPoolExecutor, fn: Callable[..., T], *args: Any) -> T:
        if self.serial:
            return fn(*args)
        return await asyncio.get_running_loop().run_in_executor(pool, fn, *args)

    async def run(self, chunks: list[Chunk]) -> list[ChunkResult]:
        queue: asyncio.Queue[_Open | None] = asyncio.Queue()
        claims = self.claims
        if claims is not None:
            await self._in(self.reader, claims.__enter__)
        try:
            async with asyncio.TaskGroup() as tg:
                tg.create_task(self._read_all(chunks, queue))
                await self._dispatch_all(queue, tg)
            if self.flush is not None:
                await self.flush.drain()
        except BaseExceptionGroup as group:
            raise _first(group) from None
        finally:
            try:
                if claims is not None:  # rows of chunks not written are free again
                    await self._in(self.reader, claims.__exit__, None, None, None)
            finally:
                self.reader.shutdown(wait=True, cancel_futures=True)
                self.writer.shutdown(wait=True, cancel_futures=True)
                if self.saver is not None:
                    self.saver.shutdown(wait=True, cancel_futures=True)
        return [self.results[i] for i in sorted(self.results)]

    async def _read_all(self, chunks: list[Chunk], queue: asyncio.Queue[_Open | None]) -> None:
        for chunk in chunks:
            await self._read(chunk, queue)
        if self.wait_taken:  # free chunks first, then the rows another run held
            while self.held:
                index = min(self.held)
                await self._read(self.held[index].chunk, queue, await self._released(self.held.pop(index)))
        await queue.put(None)

    async def _released(self, op: _Open) -> _Open:
        """Wait until the rows another run held in ``op``'s chunk are released (``op`` written
        first: its own claim is gone); returns ``op``."""
        await op.written.wait()
        assert self.claims is not None
        ids = list(op.intake.held)
        poll, said, told_at = HELD_POLL, "", 0.0
        while held := await self._in(self.reader, self.claims.holders_of, ids):
            text = f"chunk {op.chunk.index}: waiting for {waiting_text(held)}"
            now = time.monotonic()
            if text != said or now - told_at >= HELD_REPORT:
                log.info("partition %s: %s", op.chunk.partition_key, text)
                self.progress.event("claims_waiting", text)
                said, told_at = text, now
            await asyncio.sleep(poll * (1 + random.random() / 4))
            poll = min(poll * 2, HELD_POLL_MAX)
        await asyncio.sleep(random.random() * 0.05)  # two runs that both gave a row up: not in step
        return op

    async def _read(self, chunk: Chunk, queue: asyncio.Queue[_Open | None], before: _Open | None = None) -> None:
        """Read (and claim) ``chunk`` into the queue (``before``: its previous visit)."""
        await self.slots.acquire()
        started = time.perf_counter()
        self.reads_started += 1
        intake = await self._in(self.reader, read_intake, self.ctx, chunk, self.run_id, self.claims)
        cache: RunCache | SnapshotCache | None = None
        if intake.cache is not None:
            own = intake.cache
            cache = SnapshotCache(own) if self.stable_prompts else RunCache(own, self.recent, self.flush)
        run = dataclasses.replace(self.base, cache=cache)  # shared limiter, budget, guards and stats
        n = len(intake.cases)
        op = _Open(chunk, intake, run, started, [None] * n, n)
        if before is not None:
            op.counted = before.intake.all_rows - len(before.intake.held)
        if intake.held:
            self.held[chunk.index] = op
        await queue.put(op)

    async def _dispatch_all(self, queue: asyncio.Queue[_Open | None], tg: asyncio.TaskGroup) -> None:
        while (op := await queue.get()) is not None:
            intake = op.intake
            self.progress.event("chunk_started", f"chunk {op.chunk.index}")
            self.progress.add(max(0, intake.all_rows - len(intake.cases) - len(intake.held) - op.counted))
            if not self.ctx.config.kind.needs_judge:  # pure computation: the writer computes and writes
                self.progress.add(op.pending)
                op.pending = 0
            elif self.inline:  # nothing to wait for: judge the cases here, one after another
                with remembered_keys(intake.key_memo):
                    for i, case in enumerate(intake.cases):
                        await self._judge(op, i, case, tg)
            else:
                with remembered_keys(intake.key_memo):  # the cases' tasks find their keys computed
                    for i, case in enumerate(intake.cases):
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
        flush, unsaved = self.flush, self.unsaved
        if flush is None or unsaved is None:
            r = await self._ask(op, i, case)
        else:
            # while commits are quick compared with judge calls, its new verdicts are committed
            # before its concurrency slot serves another case (a crash then loses only the calls
            # in flight); else in the background, within ``verdict_flush.INTERVAL`` (and before
            # the chunk's write)
            async with unsaved:
                started = time.perf_counter()
                with verdicts_ticket() as ticket:
                    r = await self._ask(op, i, case)
                if r.judge_calls:
                    flush.called(time.perf_counter() - started)
                if ticket[0] and flush.quick:
                    await flush.committed(ticket[0])
                elif ticket[0]:
                    flush.soon()
                op.ticket = max(op.ticket, ticket[0])  # committed before the chunk's write in any case
        op.results[i] = r
        op.pending -= 1
        self.progress.add(1)
        if op.pending == 0 and op.dispatched:
            tg.create_task(self._write(op))

    async def _ask(self, op: _Open, i: int, case: Any) -> MetricResult:
        if not self.tag_cases:
            return await self.ctx.metric.score_case(case, op.run, i)
        # a transport that collects requests labels them by case
        token = current_case.set(CaseRef(str(case.id), (op.chunk.index, i)))
        try:
            return await self.ctx.metric.score_case(case, op.run, i)
        finally:
            current_case.reset(token)

    async def _write(self, op: _Open) -> None:
        """Write a chunk whose every case is judged. When the run ends meanwhile (a case of a
        later chunk failed, or the run was cancelled) the chunk is written still, as a run ending
        between chunks writes it: with its verdicts in its own transaction if their commit was
        not awaited, and the write, once handed to the writer, awaited to its end."""
        cancelled = False
        flushed = True
        if op.ticket and self.flush is not None:
            try:
                await self.flush.committed(op.ticket)
            except asyncio.CancelledError:
                cancelled, flushed = True, False
        if self.serial:
            result = self._finish(op, flushed)
        else:
            done = asyncio.get_running_loop().run_in_executor(self.writer, self._finish, op, flushed)
            try:
                result = await asyncio.shield(done)
            except asyncio.CancelledError:
                cancelled = True
                result = await done
        self.slots.release()
        earlier = self.results.get(result.index)
        self.results[result.index] = result if earlier is None else _merged(earlier, result)
        op.written.set()
        if op.intake.cache is not None and op.intake.cache.added:
            self.evictions.append((self.reads_started, list(op.intake.cache.added)))
        self.progress.event(
            "chunk_done", f"chunk {result.index}: {result.rows_scored} scored, {result.rows_failed} failed"
        )
        if cancelled:
            raise asyncio.CancelledError

    def _finish(self, op: _Open, flushed: bool = True) -> ChunkResult:
        """Write the chunk (in the writer thread); its claim ends with the transaction."""
        saved = flushed and self.flush is not None and not self.flush.broken
        return finish_chunk(
            self.ctx, op.chunk, op.intake, op.results, self.run_id, op.started, claims=self.claims, verdicts_saved=saved
        )

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


def claims_scope(ctx: PipelineContext, partition_key: str) -> str:
    """What the rows a stream claims are rows of: the source table, scoring key and partition."""
    key = ctx.key
    return claim_scope(
        ctx.source.name, key.metric, key.judge_model, key.prompt_version, key.mapping or "", partition_key
    )


def _merged(earlier: ChunkResult, later: ChunkResult) -> ChunkResult:
    """One result for a chunk read twice (rows another run held, read again once released): the
    later visit's counts (it found the first one's rows scored) and both visits' spend."""
    out = dataclasses.replace(later)
    out.judge_calls += earlier.judge_calls
    out.prompt_tokens += earlier.prompt_tokens
    out.completion_tokens += earlier.completion_tokens
    out.cost = None if earlier.cost is None or later.cost is None else earlier.cost + later.cost
    out.seconds += earlier.seconds
    # rows the first visit scored count as cached in the second's figure: they were not
    out.rows_cached = max(0, later.rows_cached - (earlier.rows_scored - earlier.rows_cached))
    out.error_message = later.error_message or earlier.error_message
    return out


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
    counts from ``done_before`` towards ``total`` (default: these chunks' rows). Rows another
    process is judging are waited for after the free chunks and then found scored
    (``wait_taken``), else left to it (``ChunkResult.rows_held``).
    """
    if not chunks:
        return []
    check_reachable_from_a_thread(ctx.engine)  # before a chunk is claimed or read
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
    ``run_id`` has already spent. The rows to judge are claimed first (``warehouse/claims.py``):
    rows another process is judging at the same time are waited for and then found scored, not
    paid twice.
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
    """``score_chunk``; with ``wait=False`` rows another process is judging are left to it, not
    waited for (``ChunkResult.rows_held``). The chunk is a one-chunk stream (``score_chunks``)."""
    if isinstance(chunk, dict):
        chunk = Chunk.from_dict(chunk)
    _ = chunk.partition  # its key parsed: a bad one is refused here, before anything is read
    ctx = context or prepare(config)
    results = score_chunks(ctx, [chunk], run_id=run_id, budget=budget, progress=progress, wait_taken=wait)
    return results[0] if results else None
