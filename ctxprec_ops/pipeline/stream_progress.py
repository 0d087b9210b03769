"""What a stream reports while it runs: partition-wide ``rows_done``/``chunk_started``/``chunk_done``
events (``Progress``) and the circuit breaker's state changes as ``judge_outage`` events."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from ..judge.breaker import BreakerEvent, CircuitBreaker
from .records import ProgressCallback, ProgressEvent

__all__ = ["Progress", "breaker_progress"]


class Progress:
    """Partition-wide settled rows (skipped, failed at intake, or judged): ``rows_done`` at most
    every ``interval`` seconds, and ``chunk_done`` when a chunk is written; never going backwards."""

    def __init__(
        self, progress: ProgressCallback | None, pk: str, base: int, total: int, interval: float = 0.25
    ) -> None:
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


@contextmanager
def breaker_progress(
    breaker: CircuitBreaker | None, progress: ProgressCallback | None, partition_key: str
) -> Iterator[None]:
    """Forward the breaker's state changes (paused, probing, resumed, gave up) as
    ``judge_outage`` progress events while chunks are judged."""
    if breaker is None or progress is None:
        yield
        return

    def forward(ev: BreakerEvent) -> None:
        progress(ProgressEvent("judge_outage", partition_key, 0, None, ev.message))

    breaker.listeners.append(forward)
    try:
        yield
    finally:
        breaker.listeners.remove(forward)
