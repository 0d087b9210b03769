"""Judgments written to the judgment cache as they arrive, not with their chunk.

A verdict paid for is worth keeping the moment it is known: a process killed half-way through a
chunk would otherwise lose every judgment of the chunk's finished cases (the chunk's write never
happens), and the next run would pay for them again. The stream hands each case's new verdicts to
a ``VerdictFlush`` and counts the case as judged only once they are committed.

Commits are grouped: one flush (an insert-if-absent into ``ctxprec_judgments``, a short
transaction of its own on a thread of its own, never the event loop's) takes every verdict that
arrived while the previous one ran. How soon a flush starts is the stream's choice per case: at
once, while the case keeps its concurrency slot (``committed``) — a crash then loses only the
calls in flight — or, when commits are slow compared with judge calls (``quick``), within
``INTERVAL`` seconds in the background (``soon``). A flush that fails is logged and its
verdicts are written with their chunks instead (``broken``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from concurrent.futures import Executor

from ..errors import one_line
from ..scoring.verdicts import NodeVerdict
from ..secrets import redact

__all__ = ["VerdictFlush", "INTERVAL", "QUICK_RATIO"]

log = logging.getLogger("ctxprec_ops.pipeline")

#: seconds a verdict waits at most for a flush that was not asked for at once
INTERVAL = 0.1
#: a commit is quick when it takes at most this share of a judge call (waiting for it then costs
#: the call's slot at most that share of its time)
QUICK_RATIO = 1.0
#: weight of the newest duration in the running averages
_WEIGHT = 0.2


class VerdictFlush:
    """Group-committed writes of new verdicts (``write`` runs in ``pool``)."""

    def __init__(self, write: Callable[[dict[bytes, NodeVerdict]], None], pool: Executor) -> None:
        self._write, self._pool = write, pool
        self._pending: dict[bytes, NodeVerdict] = {}
        self._started = 0  # flushes started
        self._done = 0  # flushes ended (committed or failed)
        self._task: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._ended: asyncio.Event | None = None
        #: running averages: seconds a flush takes, seconds a judged case took
        self.flush_seconds: float | None = None
        self.call_seconds: float | None = None
        #: a flush failed: chunks write their own verdicts again (as before this class)
        self.broken = False

    def add(self, key: bytes, verdict: NodeVerdict) -> int:
        """Queue a verdict; returns the number of the flush that will commit it (a ticket)."""
        self._pending[key] = verdict
        return self._started + 1

    def called(self, seconds: float) -> None:
        """A case was judged in ``seconds`` (its judge calls)."""
        self.call_seconds = _average(self.call_seconds, seconds)

    @property
    def quick(self) -> bool:
        """Whether a commit is quick compared with a judge call (so far; True until measured)."""
        if self.flush_seconds is None or self.call_seconds is None:
            return True
        return self.flush_seconds <= QUICK_RATIO * self.call_seconds

    def soon(self) -> None:
        """Flush what is queued within ``INTERVAL`` seconds (in the background)."""
        if self._timer is None and self._task is None and self._pending:
            self._timer = asyncio.get_running_loop().call_later(INTERVAL, self._kick)

    async def committed(self, ticket: int) -> None:
        """Return once flush ``ticket`` has ended (it starts at once if it has not)."""
        while self._done < ticket:
            self._kick()
            if self._ended is None:
                self._ended = asyncio.Event()
            await self._ended.wait()

    async def drain(self) -> None:
        """Wait for the running flush and write what is still queued."""
        if self._pending or self._task is not None:
            await self.committed(self._started + (1 if self._pending else 0))

    def _kick(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._task is not None or not self._pending:
            return
        batch, self._pending = self._pending, {}
        self._started += 1
        self._task = asyncio.get_running_loop().create_task(self._flush(batch))

    async def _flush(self, batch: dict[bytes, NodeVerdict]) -> None:
        started = time.perf_counter()
        try:
            await asyncio.get_running_loop().run_in_executor(self._pool, self._write, batch)
        except Exception as exc:  # the chunks write them instead
            if not self.broken:
                log.warning(
                    "writing judgments as they arrive failed (%s); they are written with their chunks",
                    redact(one_line(exc)),
                )
            self.broken = True
        finally:
            self.flush_seconds = _average(self.flush_seconds, time.perf_counter() - started)
            self._done += 1
            self._task = None
            ended, self._ended = self._ended, None
            if ended is not None:  # its waiters, and those of what arrived meanwhile (the next group)
                ended.set()
            self.soon()  # what arrived meanwhile and nobody waits for yet


def _average(mean: float | None, value: float) -> float:
    return value if mean is None else mean + _WEIGHT * (value - mean)
