"""Which judge errors are worth retrying, and how long to wait (honouring ``Retry-After``)."""

from __future__ import annotations

import random
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from . import defaults

__all__ = [
    "RetryWaits",
    "TransientJudgeError",
    "is_transient",
    "is_rate_limit",
    "retry_after_seconds",
    "backoff_seconds",
]


@dataclass(frozen=True)
class RetryWaits:
    """How long to wait before retrying a judge call: ``initial`` seconds before the first retry,
    doubling (with full jitter) up to ``maximum``, which also caps a server's ``Retry-After`` (a
    ``Retry-After: 99999`` does not stall a run)."""

    initial: float = defaults.RETRY_INITIAL_WAIT
    maximum: float = defaults.RETRY_MAX_WAIT

    def __post_init__(self) -> None:
        if not (self.initial >= 0 and self.maximum >= 0):
            raise ValueError(f"retry waits must be >= 0 seconds, got {self.initial!r} and {self.maximum!r}")

    def cap(self, seconds: float | None) -> float | None:
        """``seconds`` (a server's ``Retry-After``), at most ``maximum``."""
        return None if seconds is None else min(seconds, self.maximum)


class TransientJudgeError(Exception):
    """Raise from a custom ``JudgeModel`` to ask for a retry (optionally after ``retry_after`` s)."""

    def __init__(
        self, message: str = "transient judge error", retry_after: float | None = None, rate_limited: bool = False
    ) -> None:
        super().__init__(message)
        self.retry_after = retry_after
        self.rate_limited = rate_limited


def _status(exc: BaseException) -> int | None:
    status = getattr(exc, "status_code", None)
    return status if isinstance(status, int) else None


def is_rate_limit(exc: BaseException) -> bool:
    if isinstance(exc, TransientJudgeError):
        return exc.rate_limited
    return _status(exc) == 429


def is_transient(exc: BaseException) -> bool:
    """429, 408/409, 5xx, timeouts and connection errors are retried; anything else is not."""
    if isinstance(exc, (TransientJudgeError, TimeoutError, ConnectionError)):
        return True
    try:
        import openai

        if isinstance(exc, (openai.APITimeoutError, openai.APIConnectionError)):
            return True
    except ImportError:  # pragma: no cover
        pass
    try:
        import httpx

        if isinstance(exc, (httpx.TimeoutException, httpx.TransportError)):
            return True
    except ImportError:  # pragma: no cover
        pass
    status = _status(exc)
    return status is not None and (status in (408, 409, 429) or status >= 500)


def retry_after_seconds(exc: BaseException) -> float | None:
    """Seconds the server asked us to wait (``retry-after-ms`` / ``retry-after``), if any."""
    if isinstance(exc, TransientJudgeError):
        return exc.retry_after
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000.0)
        except ValueError:
            pass
    raw = headers.get("retry-after")
    if not raw:
        return None
    try:
        return max(0.0, float(raw))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(raw)
        return max(0.0, (when - datetime.now(UTC)).total_seconds())
    except (TypeError, ValueError):
        return None


def backoff_seconds(attempt: int, exc: BaseException | None = None, waits: RetryWaits = RetryWaits()) -> float:
    """Exponential backoff with full jitter from ``waits.initial``; a server's ``Retry-After``
    wins when present; never more than ``waits.maximum``."""
    if exc is not None:
        ra = waits.cap(retry_after_seconds(exc))
        if ra is not None:
            return ra
    ceiling = min(waits.maximum, waits.initial * (2 ** max(0, attempt - 1)))
    return ceiling / 2 + random.uniform(0, ceiling / 2)
