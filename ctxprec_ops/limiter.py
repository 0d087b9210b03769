"""An adaptive concurrency limiter for judge calls.

At most ``limit`` calls are in flight. A 429 cuts the limit by a quarter (at most once per
cool-down) and,
when the server sent ``Retry-After``, pauses new calls until then; sustained success raises the
limit again by one step at a time up to the configured maximum (AIMD, as TCP does).
"""

from __future__ import annotations

import asyncio
import time

__all__ = ["AdaptiveLimiter"]


class AdaptiveLimiter:
    def __init__(
        self,
        max_concurrency: int,
        *,
        min_concurrency: int = 1,
        increase_after: int = 4,
        decrease_cooldown: float = 1.0,
    ) -> None:
        if max_concurrency < 1:
            raise ValueError("concurrency must be at least 1")
        self.max_concurrency = max_concurrency
        self.min_concurrency = max(1, min(min_concurrency, max_concurrency))
        self.limit = max_concurrency
        self.increase_after = increase_after
        self.decrease_cooldown = decrease_cooldown
        self.in_flight = 0
        self.max_in_flight = 0
        self.rate_limited = 0
        self._successes = 0
        self._last_decrease = -1e9
        self._pause_until = 0.0
        self._cond: asyncio.Condition | None = None
        self._waiting = 0

    def _condition(self) -> asyncio.Condition:
        if self._cond is None:
            self._cond = asyncio.Condition()
        return self._cond

    async def acquire(self) -> None:
        # fast path: a free slot and no pause; nothing awaits between the check and the
        # increment, so on one event loop this cannot race
        if (self._waiting == 0 and self.in_flight < self.limit
                and self._pause_until <= time.monotonic()):
            self.in_flight += 1
            self.max_in_flight = max(self.max_in_flight, self.in_flight)
            return
        cond = self._condition()
        self._waiting += 1
        try:
            await self._acquire_slow(cond)
        finally:
            self._waiting -= 1

    async def _acquire_slow(self, cond: asyncio.Condition) -> None:
        async with cond:
            while True:
                wait = self._pause_until - time.monotonic()
                if wait > 0:
                    try:
                        await asyncio.wait_for(cond.wait(), timeout=wait)
                    except asyncio.TimeoutError:
                        pass
                    continue
                if self.in_flight < self.limit:
                    self.in_flight += 1
                    self.max_in_flight = max(self.max_in_flight, self.in_flight)
                    if self.in_flight < self.limit:  # pass free slots on (e.g. after a pause)
                        cond.notify(self.limit - self.in_flight)
                    return
                await cond.wait()

    async def release(self) -> None:
        if self._waiting == 0:  # nobody to wake
            self.in_flight -= 1
            return
        cond = self._condition()
        async with cond:
            self.in_flight -= 1
            # wake only as many waiters as there are free slots (the limit may have grown)
            cond.notify(max(1, self.limit - self.in_flight))

    async def __aenter__(self) -> "AdaptiveLimiter":
        await self.acquire()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.release()

    def on_success(self) -> None:
        self._successes += 1
        if self._successes >= self.increase_after and self.limit < self.max_concurrency:
            self.limit += 1
            self._successes = 0

    def on_rate_limited(self, retry_after: float | None) -> None:
        self.rate_limited += 1
        self._successes = 0
        now = time.monotonic()
        if now - self._last_decrease >= self.decrease_cooldown:
            self.limit = max(self.min_concurrency, (self.limit * 3) // 4)
            self._last_decrease = now
        if retry_after is not None and retry_after > 0:
            self._pause_until = max(self._pause_until, now + min(retry_after, 120.0))
