"""Limits on judge requests: how many are in flight, and how many are sent per minute.

``AdaptiveLimiter``: at most ``limit`` calls are in flight. A 429 cuts the limit by a quarter (at
most once per cool-down) and, when the server sent ``Retry-After``, pauses new calls until then
(capped by the caller: ``RetryWaits.cap``); sustained success raises the limit again by one step at a
time up to the configured maximum (AIMD, as TCP does).

``RequestQuota``: a provider's requests-per-minute and tokens-per-minute quota, kept *before* a
request is sent. Requests are paced evenly (one every ``60 / max_rpm`` s; a request's estimated
tokens — prompt plus completion cap — take ``tokens * 60 / max_tpm`` s of the token schedule), so
no 60-second window, and no shorter window a provider quantizes its limit to, sees more than the
cap. The provider's ``x-ratelimit-remaining-*`` / ``x-ratelimit-reset-*`` headers tighten the
pace further when they say less is left than the configured pace would use.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping

__all__ = ["AdaptiveLimiter", "RequestQuota", "parse_reset_seconds"]


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

    def try_acquire(self) -> bool:
        """``acquire``'s fast path, without a coroutine: take a free slot when there is one and
        nobody waits or is paused (True), else leave everything as it is (False: await
        ``acquire``). Nothing awaits between the check and the increment, so on one event loop
        this cannot race."""
        if self._waiting == 0 and self.in_flight < self.limit and self._pause_until <= time.monotonic():
            self.in_flight += 1
            if self.in_flight > self.max_in_flight:
                self.max_in_flight = self.in_flight
            return True
        return False

    async def acquire(self) -> None:
        if self.try_acquire():
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
                    except TimeoutError:
                        pass
                    continue
                if self.in_flight < self.limit:
                    self.in_flight += 1
                    self.max_in_flight = max(self.max_in_flight, self.in_flight)
                    if self.in_flight < self.limit:  # pass free slots on (e.g. after a pause)
                        cond.notify(self.limit - self.in_flight)
                    return
                await cond.wait()

    def try_release(self) -> bool:
        """``release``'s fast path, without a coroutine: free the slot when nobody waits for one
        (True); False: nothing done, await ``release`` (it wakes the waiters)."""
        if self._waiting == 0:  # nobody to wake
            self.in_flight -= 1
            return True
        return False

    async def release(self) -> None:
        if self.try_release():
            return
        cond = self._condition()
        async with cond:
            self.in_flight -= 1
            # wake only as many waiters as there are free slots (the limit may have grown)
            cond.notify(max(1, self.limit - self.in_flight))

    async def __aenter__(self) -> AdaptiveLimiter:
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
            self._pause_until = max(self._pause_until, now + retry_after)


_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|h|m|s)")


def parse_reset_seconds(raw: str | None) -> float | None:
    """``x-ratelimit-reset-*`` values: ``"1s"``, ``"6m0s"``, ``"20ms"``, ``"1h2m3.5s"`` or plain
    seconds (``"0.5"``). None when absent or unreadable."""
    if raw is None:
        return None
    text = raw.strip().lower()
    if not text:
        return None
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    parts = _DURATION_PART.findall(text)
    if not parts or "".join(n + u for n, u in parts) != text:
        return None
    scale = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}
    return sum(float(n) * scale[u] for n, u in parts)


def _int_header(headers: Mapping[str, str], name: str) -> int | None:
    raw = headers.get(name)
    if raw is None:
        return None
    try:
        return int(float(raw))
    except ValueError:
        return None


class RequestQuota:
    """Pace requests under ``max_rpm`` requests and ``max_tpm`` tokens per minute (either may be
    None: no configured cap, only what the provider's headers say)."""

    def __init__(self, max_rpm: float | None = None, max_tpm: float | None = None) -> None:
        for name, value in (("max_requests_per_minute", max_rpm), ("max_tokens_per_minute", max_tpm)):
            if value is not None and value <= 0:
                raise ValueError(f"{name} must be > 0, got {value}")
        self.max_rpm = max_rpm
        self.max_tpm = max_tpm
        self._next_request = 0.0
        self._next_token = 0.0
        # provider-reported pace: (seconds per request or per token, valid until)
        self._header_request_pace: tuple[float, float] = (0.0, 0.0)
        self._header_token_pace: tuple[float, float] = (0.0, 0.0)
        self.waited_seconds = 0.0
        self.requests = 0
        #: when the last request re-spaced after a stall goes (``wait``)
        self._respaced = 0.0

    @property
    def capped(self) -> bool:
        """Whether a cap is configured (without one, only provider headers pace the requests)."""
        return bool(self.max_rpm or self.max_tpm)

    def _request_interval(self, now: float) -> float:
        base = 60.0 / self.max_rpm if self.max_rpm else 0.0
        pace, until = self._header_request_pace
        return max(base, pace) if now < until else base

    def _token_interval(self, now: float) -> float:
        base = 60.0 / self.max_tpm if self.max_tpm else 0.0
        pace, until = self._header_token_pace
        return max(base, pace) if now < until else base

    def reserve(self, tokens: float) -> float:
        """Book the next send slot for a request of ``tokens`` estimated tokens; returns the
        seconds to wait before sending. Slots are booked in call order (no await in between)."""
        now = time.monotonic()
        start = max(now, self._next_request, self._next_token)
        self._next_request = start + self._request_interval(now)
        self._next_token = start + max(0.0, tokens) * self._token_interval(now)
        self.requests += 1
        return start - now

    async def acquire(self, tokens: float) -> None:
        wait = self.reserve(tokens)
        if wait > 0:
            await self.wait(wait)

    async def wait(self, wait: float) -> None:
        """Wait out a send slot ``reserve`` booked ``wait`` seconds ahead (``acquire``'s second half).

        A stall (the event loop blocked, the host busy) wakes every slot booked within it at once:
        a request woken late by more than half an interval — or before the last one so woken has
        had its interval — is re-spaced one interval after it, and the slots booked later move
        past them, so the requests never go out in a burst."""
        if wait <= 0:
            return
        self.waited_seconds += wait
        due = time.monotonic() + wait
        await asyncio.sleep(wait)
        now = time.monotonic()
        interval = self._request_interval(now)
        slack = interval / 2
        if interval <= 0 or (now - due <= slack and now >= self._respaced + interval - slack):
            return  # on time
        target = max(now, self._respaced + interval)
        self._respaced = target
        self._next_request = max(self._next_request, target + interval)
        if target > now:
            self.waited_seconds += target - now
            await asyncio.sleep(target - now)

    def settle(self, estimated: float, actual: float | None) -> None:
        """Correct the token schedule once a request's real usage is known."""
        if actual is None or not self.max_tpm:
            return
        self._next_token = max(time.monotonic(), self._next_token + (actual - estimated) * 60.0 / self.max_tpm)

    def observe(self, headers: Mapping[str, str] | None) -> None:
        """Tighten the pace from ``x-ratelimit-remaining-{requests,tokens}`` and
        ``x-ratelimit-reset-{requests,tokens}`` (OpenAI's names; Azure and vLLM proxies send the same)."""
        if not headers:
            return
        now = time.monotonic()
        for kind in ("requests", "tokens"):
            remaining = _int_header(headers, f"x-ratelimit-remaining-{kind}")
            reset = parse_reset_seconds(headers.get(f"x-ratelimit-reset-{kind}"))
            if remaining is None or reset is None or reset <= 0:
                continue
            if remaining <= 0:  # nothing left: no request (or token) before the reset
                if kind == "requests":
                    self._next_request = max(self._next_request, now + reset)
                else:
                    self._next_token = max(self._next_token, now + reset)
                continue
            pace = (reset / remaining, now + reset)
            if kind == "requests":
                self._header_request_pace = pace
            else:
                self._header_token_pace = pace
