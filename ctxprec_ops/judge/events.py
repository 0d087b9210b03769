"""A hook for watching judge retries: progress displays subscribe, the judging loop notifies.

``JudgeRetry`` says which attempt failed, why (a short, secret-free reason) and how long the call
waits before the next one. Listeners run in the judging loop: they must be quick and never raise
(an exception in a listener is swallowed).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from ..secrets import redact

__all__ = ["JudgeRetry", "add_retry_listener", "notify_retry", "retry_reason"]


@dataclass(frozen=True)
class JudgeRetry:
    """One failed judge call that will be retried."""

    retry: int  # 1 = the first retry
    max_retries: int
    wait_seconds: float  # before the next attempt
    reason: str  # e.g. "rate limited (HTTP 429)", "unreachable: APIConnectionError: Connection error."


_listeners: list[Callable[[JudgeRetry], None]] = []
_lock = threading.Lock()


def add_retry_listener(listener: Callable[[JudgeRetry], None]) -> Callable[[], None]:
    """Subscribe ``listener``; returns the function that unsubscribes it."""
    with _lock:
        _listeners.append(listener)

    def remove() -> None:
        with _lock:
            if listener in _listeners:
                _listeners.remove(listener)

    return remove


def notify_retry(event: JudgeRetry) -> None:
    with _lock:
        listeners = list(_listeners)
    for listener in listeners:
        try:
            listener(event)
        except Exception:  # noqa: BLE001 - a display must never break judging
            pass


def retry_reason(exc: BaseException) -> str:
    """Why a judge call failed, in a few words (no secrets)."""
    from .retry import is_rate_limit

    status = getattr(exc, "status_code", None)
    detail = redact(str(exc)).strip().splitlines()[0][:160] if str(exc).strip() else ""
    name = type(exc).__name__
    if is_rate_limit(exc):
        return f"rate limited (HTTP {status or 429})"
    if "Connection" in name or "Timeout" in name or isinstance(exc, (ConnectionError, TimeoutError)):
        return f"unreachable: {name}" + (f": {detail}" if detail else "")
    if status:
        return f"HTTP {status} from the endpoint: {name}"
    return f"{name}" + (f": {detail}" if detail else "")
