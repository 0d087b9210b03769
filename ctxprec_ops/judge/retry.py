"""Which judge errors are worth retrying, and how long to wait (honouring ``Retry-After``)."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime

from ..config import Settings

__all__ = [
    "TransientJudgeError",
    "is_transient",
    "is_rate_limit",
    "retry_after_seconds",
    "backoff_seconds",
    "max_wait_seconds",
]


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


def max_wait_seconds() -> float:
    """``CTXPREC_RETRY_MAX_WAIT`` (default 30 s): the longest single wait before a retry, also the
    cap on a server's ``Retry-After`` (a ``Retry-After: 99999`` does not stall a run)."""
    return max(0.0, float(Settings.read("retry_max_wait")))


def backoff_seconds(attempt: int, exc: BaseException | None = None) -> float:
    """Exponential backoff with full jitter; a server's ``Retry-After`` wins when present, up to
    ``CTXPREC_RETRY_MAX_WAIT``.

    ``CTXPREC_RETRY_INITIAL_WAIT`` (default 0.5 s) and ``CTXPREC_RETRY_MAX_WAIT`` (30 s) tune it.
    """
    cap = max_wait_seconds()
    if exc is not None:
        ra = retry_after_seconds(exc)
        if ra is not None:
            return min(ra, cap)
    initial = float(Settings.read("retry_initial_wait"))
    ceiling = min(cap, initial * (2 ** max(0, attempt - 1)))
    return ceiling / 2 + random.uniform(0, ceiling / 2)
