"""A circuit breaker for the judge endpoint: ride through outages, give up promptly and say why.

When the judge itself is the problem — every recent request failed with a connection error, a
timeout (a call that outlived its whole-call deadline too, however steadily the endpoint was
trickling its answer), a 5xx or a 429 — retrying each row on its own only burns the rows' retries. The breaker
*opens* after ``trip_after`` consecutive such failures (``calls.trip_after_for``: two waves of
the requests in flight, at least 5): no request is sent, callers wait in
``admit()``; one caller at a time is let through as a *probe* (after 0.25 s, then doubling up to
``max_probe_interval``); the first answer *closes* the breaker and everyone resumes. Failures
while the breaker is open do not count against a row's retries.

The breaker gives up when the outage (from its first failure) lasts longer than ``tolerance``
seconds — or ``first_contact_timeout`` (30 s) when the endpoint never answered once since the
breaker was made. From then on ``admit()`` raises ``JudgeUnavailableError`` at once, with a
message naming the cause and the endpoint, e.g.
``judge unreachable: connection refused at http://127.0.0.1:9/v1``. One breaker spans one
partition run (the pipeline keeps it in its context) or one ``evaluate()`` call.

``tolerance`` defaults to ``defaults.OUTAGE_TOLERANCE`` (the pipeline passes its configured one).
"""

from __future__ import annotations

import asyncio
import logging
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from ..errors import JudgeUnavailableError
from ..secrets import redact
from . import defaults
from .retry import is_rate_limit

__all__ = [
    "CircuitBreaker",
    "BreakerEvent",
    "describe_failure",
    "DEFAULT_OUTAGE_TOLERANCE",
    "FIRST_CONTACT_TIMEOUT",
]

log = logging.getLogger("ctxprec_ops.breaker")

DEFAULT_OUTAGE_TOLERANCE = defaults.OUTAGE_TOLERANCE
#: an endpoint that never answered once is given up after this many seconds (or the tolerance)
FIRST_CONTACT_TIMEOUT = 30.0


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    x: BaseException | None = exc
    while x is not None and len(out) < 12 and x not in out:
        out.append(x)
        x = x.__cause__ or x.__context__
    return out


def describe_failure(exc: BaseException) -> tuple[str, str]:
    """``(verb, cause)`` of a judge-level failure: ``("unreachable", "connection refused")``,
    ``("unavailable", "HTTP 503")``, ``("rate limited", "HTTP 429")``, ..."""
    chain = _chain(exc)
    for x in chain:
        if isinstance(x, ConnectionRefusedError):
            return "unreachable", "connection refused"
        if isinstance(x, socket.gaierror):
            return "unreachable", "host name not found"
        if isinstance(x, ConnectionResetError):
            return "unreachable", "connection reset"
    for x in chain:  # a call that outlived its deadline (answering, but too slowly to finish)
        seconds = getattr(x, "seconds", None)
        if isinstance(x, TimeoutError) and isinstance(seconds, (int, float)):
            return "unavailable", f"no complete answer within the {seconds:g} s call deadline (timed out)"
    names = " ".join(type(x).__name__ for x in chain).lower()
    if "timeout" in names or any(isinstance(x, TimeoutError) for x in chain):
        return "unreachable", "no answer (timed out)"
    if is_rate_limit(exc):
        return "rate limited", "HTTP 429 on every request"
    status = getattr(exc, "status_code", None)
    if isinstance(status, int):
        return "unavailable", f"HTTP {status}"
    if "connect" in names or "connection" in names:
        return "unreachable", "connection failed"
    return "unavailable", f"{type(exc).__name__}: {redact(str(exc))[:120]}"


def _clean_endpoint(url: str | None) -> str | None:
    """The endpoint without credentials or query (never a secret in a message)."""
    if not url:
        return None
    try:
        parts = urlsplit(str(url))
    except ValueError:
        return None
    host = parts.hostname or ""
    if parts.port:
        host = f"{host}:{parts.port}"
    return redact(urlunsplit((parts.scheme, host, parts.path.rstrip("/"), "", "")))


@dataclass(frozen=True)
class BreakerEvent:
    """A change of the breaker's state, for progress displays and logs."""

    state: str  # "open" (paused), "probing", "closed" (resumed), "gave_up"
    message: str
    outage_seconds: float = 0.0
    next_probe_in: float | None = None


BreakerListener = Callable[[BreakerEvent], None]


class CircuitBreaker:
    def __init__(
        self,
        tolerance: float = DEFAULT_OUTAGE_TOLERANCE,
        *,
        trip_after: int = 5,
        first_contact_timeout: float = FIRST_CONTACT_TIMEOUT,
        first_probe_after: float = 0.25,
        max_probe_interval: float = 5.0,
        endpoint: str | None = None,
    ) -> None:
        self.tolerance = float(tolerance)
        if self.tolerance < 0:
            raise ValueError(f"outage_tolerance must be >= 0, got {self.tolerance}")
        self.trip_after = max(1, trip_after)
        self.first_contact_timeout = first_contact_timeout
        self.first_probe_after = first_probe_after
        self.max_probe_interval = max_probe_interval
        self.endpoint = _clean_endpoint(endpoint)
        self.state = "closed"
        self.ever_answered = False
        self.consecutive = 0
        self.outage_started: float | None = None
        self.last_failure: BaseException | None = None
        self.gave_up: str | None = None  # the reason, once given up
        self.trips = 0
        self.probes = 0
        self.paused_seconds = 0.0
        self._probe_interval = first_probe_after
        self._next_probe = 0.0
        self._probe_in_flight = False
        self._opened_at = 0.0
        self._changed: asyncio.Event | None = None
        self._changed_loop: asyncio.AbstractEventLoop | None = None
        self.listeners: list[BreakerListener] = []

    # -- configuration --------------------------------------------------------------------
    def set_endpoint(self, url: str | None) -> None:
        if url and not self.endpoint:
            self.endpoint = _clean_endpoint(url)

    @property
    def deadline_seconds(self) -> float:
        """How long an outage may last before the breaker gives up."""
        return self.tolerance if self.ever_answered else min(self.tolerance, self.first_contact_timeout)

    def reason(self) -> str:
        """One line naming the cause: ``judge unreachable: connection refused at URL``."""
        if self.last_failure is None:
            return "judge unavailable"
        verb, cause = describe_failure(self.last_failure)
        where = f" at {self.endpoint}" if self.endpoint else ""
        return f"judge {verb}: {cause}{where}"

    # -- events ---------------------------------------------------------------------------
    def _emit(self, state: str, message: str, next_probe_in: float | None = None) -> None:
        outage = time.monotonic() - self.outage_started if self.outage_started is not None else 0.0
        event = BreakerEvent(state, message, outage, next_probe_in)
        for listener in list(self.listeners):
            try:
                listener(event)
            except Exception:  # a display problem must not stop judging
                log.debug("breaker listener failed", exc_info=True)

    def _wake(self) -> None:
        if self._changed is not None:
            self._changed.set()
            self._changed = None

    # -- outcomes -------------------------------------------------------------------------
    def on_answer(self) -> None:
        """The endpoint answered (any response that is not a judge-level failure)."""
        self.ever_answered = True
        self.consecutive = 0
        if self.state != "closed":
            outage = time.monotonic() - (self.outage_started or time.monotonic())
            self.paused_seconds += time.monotonic() - self._opened_at
            self.state = "closed"
            self._probe_in_flight = False
            log.warning("judge answering again after %.0f s: resuming", outage)
            self._emit("closed", f"judge answering again after {outage:.0f}s: resuming")
            self._wake()
        self.outage_started = None
        self._probe_interval = self.first_probe_after

    def on_failure(self, exc: BaseException, *, probe: bool = False) -> bool:
        """Record a judge-level failure. True when the breaker is (now) open: the failure is
        the judge's, not the row's, and must not count against the row's retries."""
        now = time.monotonic()
        self.last_failure = exc
        self.consecutive += 1
        if self.outage_started is None:
            self.outage_started = now
        if probe:
            self._probe_in_flight = False
            self._probe_interval = min(self.max_probe_interval, self._probe_interval * 2)
            self._next_probe = now + self._probe_interval
            self._check_deadline(now)
            self._wake()
            return True
        if self.state == "closed" and self.consecutive >= self.trip_after:
            self.state = "open"
            self.trips += 1
            self._opened_at = now
            self._probe_interval = self.first_probe_after
            self._next_probe = now + self._probe_interval
            reason = self.reason()
            log.warning(
                "%s; %d requests in a row failed: pausing judge requests, probing with one (giving up after %.0f s)",
                reason,
                self.consecutive,
                self.deadline_seconds,
            )
            self._emit(
                "open", f"{reason}: paused, probing; giving up after {self.deadline_seconds:.0f}s", self._probe_interval
            )
            self._wake()
        return self.state != "closed"

    def _check_deadline(self, now: float) -> None:
        if (
            self.gave_up is None
            and self.outage_started is not None
            and now - self.outage_started >= self.deadline_seconds
        ):
            self.gave_up = self.reason()
            self.state = "gave_up"
            log.error("%s; no answer for %.0f s: giving up", self.gave_up, now - self.outage_started)
            self._emit("gave_up", f"{self.gave_up}; no answer for {now - self.outage_started:.0f}s: giving up")
            self._wake()

    def _raise_gave_up(self) -> None:
        raise JudgeUnavailableError(self.gave_up or "judge unavailable")

    # -- admission ------------------------------------------------------------------------
    async def admit(self) -> bool:
        """Wait until a request may be sent. Returns True when this request is the probe (its
        outcome must be reported with ``on_answer`` / ``on_failure(probe=True)``). Raises
        ``JudgeUnavailableError`` once the breaker gave up."""
        while True:
            if self.gave_up is not None:
                self._raise_gave_up()
            if self.state == "closed":
                return False
            now = time.monotonic()
            self._check_deadline(now)
            if self.gave_up is not None:
                self._raise_gave_up()
            if not self._probe_in_flight and now >= self._next_probe:
                self._probe_in_flight = True
                self.probes += 1
                self._emit("probing", f"{self.reason()}: probing with one request", None)
                return True
            wake_at = self._next_probe if not self._probe_in_flight else now + self.max_probe_interval
            deadline = (self.outage_started or now) + self.deadline_seconds
            timeout = max(0.01, min(wake_at, deadline) - now)
            loop = asyncio.get_running_loop()
            if self._changed is None or self._changed_loop is not loop:  # one breaker spans chunks' loops
                self._changed, self._changed_loop = asyncio.Event(), loop
            try:
                await asyncio.wait_for(self._changed.wait(), timeout=timeout)
            except TimeoutError:
                pass

    def abandon_probe(self) -> None:
        """The probe ended without an outcome (cancelled, or a non-judge error): let another go."""
        if self._probe_in_flight:
            self._probe_in_flight = False
            self._wake()
