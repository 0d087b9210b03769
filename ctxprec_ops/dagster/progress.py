"""Forward the pipeline's progress events to a Dagster run's log, without flooding it."""

import time
from typing import Any

from ctxprec_ops.pipeline import ProgressEvent
from ctxprec_ops.secrets import redact

__all__ = ["RunLogProgress"]


class RunLogProgress:
    """A ``progress`` callback for ``score_partition``: milestones at INFO, row counts every few seconds."""

    def __init__(self, log: Any, every_seconds: float = 5.0) -> None:
        self._log = log
        self._every = every_seconds
        self._last = 0.0

    def __call__(self, event: ProgressEvent) -> None:
        total = f"/{event.total}" if event.total is not None else ""
        text = f"[{event.partition_key}] {event.kind} {event.done}{total}"
        if event.message:
            text += f": {redact(event.message)}"
        if event.kind == "rows_done":
            now = time.monotonic()
            if now - self._last < self._every:
                self._log.debug(text)
                return
            self._last = now
        self._log.info(text)
