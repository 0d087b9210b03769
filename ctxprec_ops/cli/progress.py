"""Render the pipeline's ``ProgressEvent``s: rich bars on an interactive stderr, plain log
lines otherwise (CI logs, cron mail, Airflow task logs).

Judge retries (``judge.events``) are shown too: while calls are being retried the display says so,
why (rate limit, endpoint unreachable, HTTP status) and for how long the judge has been failing —
as a note on the bars, or as a plain line at most every ``RETRY_LINE_EVERY`` seconds."""

from __future__ import annotations

import time
from collections.abc import Callable
from types import TracebackType

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from ..judge.events import JudgeRetry, add_retry_listener
from ..pipeline import ProgressCallback, ProgressEvent

__all__ = ["ProgressDisplay", "retry_line"]

#: plain mode: at most one "judge retrying" line per this many seconds (many calls retry at once)
RETRY_LINE_EVERY = 10.0


def retry_line(event: JudgeRetry, failing_for: float, retried: int) -> str:
    """The message shown while the judge is being retried."""
    more = f"; {retried} failed call(s) being retried" if retried > 1 else ""
    return (
        f"judge retrying: {event.reason} — retry {event.retry} of {event.max_retries}, next attempt in "
        f"{event.wait_seconds:.0f}s; failing for {failing_for:.0f}s{more} (rows whose calls still fail after "
        f"the last retry are recorded as judge_unavailable failures)"
    )


class ProgressDisplay:
    """A context manager; ``callback(label)`` gives the ``progress=`` argument of one
    partition run. With ``total_runs`` an overall bar counts finished runs (the demo).

    ``interactive=None`` means: bars when stderr is a terminal, log lines otherwise (with
    ``compact``, one line per finished run); ``enabled=False`` prints nothing.
    """

    def __init__(
        self,
        console: Console | None = None,
        *,
        interactive: bool | None = None,
        enabled: bool = True,
        total_runs: int | None = None,
        overall_label: str = "partitions",
        compact: bool = False,
    ) -> None:
        self.console = console or Console(stderr=True)
        self.enabled = enabled
        self.interactive = self.console.is_terminal if interactive is None else interactive
        self.total_runs = total_runs
        self.overall_label = overall_label
        self.compact = compact  # plain mode: one line per finished run only
        self._progress: Progress | None = None
        self._overall: TaskID | None = None
        self._runs_done = 0
        self._unsubscribe: Callable[[], None] | None = None
        self._retry_since: float | None = None  # first retry of the current failing streak
        self._retry_count = 0
        self._retry_logged = 0.0
        self._retry_task: TaskID | None = None

    def __enter__(self) -> ProgressDisplay:
        if self.enabled:
            self._unsubscribe = add_retry_listener(self._on_retry)
        if self.enabled and self.interactive:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn("{task.fields[note]}"),
                TimeElapsedColumn(),
                TimeRemainingColumn(),
                console=self.console,
                transient=True,
            )
            self._progress.start()
            if self.total_runs:
                self._overall = self._progress.add_task(self.overall_label, total=self.total_runs, note="")
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def log(self, message: str) -> None:
        """A plain line above the bars (or on stderr when not interactive)."""
        if self.enabled:
            self.console.print(message, markup=False, highlight=False, soft_wrap=True)

    # -- judge retries -------------------------------------------------------------------------
    def _on_retry(self, event: JudgeRetry) -> None:
        now = time.monotonic()
        if self._retry_since is None:
            self._retry_since = now
        self._retry_count += 1
        message = retry_line(event, now - self._retry_since, self._retry_count)
        progress = self._progress
        if progress is not None:
            if self._retry_task is None:
                self._retry_task = progress.add_task("[yellow]judge", total=None, note=message)
            else:
                progress.update(self._retry_task, note=message)
        elif self._retry_logged == 0.0 or now - self._retry_logged >= RETRY_LINE_EVERY:
            self._retry_logged = now
            self.log(message)

    def _progressed(self) -> None:
        """Rows got done: a failing streak (if any) is over."""
        if self._retry_since is None:
            return
        self._retry_since, self._retry_count, self._retry_logged = None, 0, 0.0
        if self._progress is not None and self._retry_task is not None:
            self._progress.remove_task(self._retry_task)
            self._retry_task = None

    def callback(self, label: str) -> ProgressCallback:
        """The progress callback for one partition run, shown as ``label``."""
        if not self.enabled:
            return lambda ev: None
        if self._progress is None:
            return self._plain(label)
        return self._bar(label)

    # -- interactive ---------------------------------------------------------------------
    def _bar(self, label: str) -> ProgressCallback:
        progress = self._progress
        assert progress is not None
        task: TaskID = progress.add_task(label, total=None, note="")

        def on(ev: ProgressEvent) -> None:
            if ev.kind in ("rows_done", "chunk_done", "finished") and ev.done:
                self._progressed()
            if ev.kind == "planned":
                progress.update(task, total=ev.total or 0, completed=0, note=ev.message)
            elif ev.kind in ("rows_done", "chunk_done"):
                progress.update(task, completed=ev.done, total=ev.total if ev.total is not None else None)
                if ev.kind == "chunk_done" and ev.message:
                    progress.update(task, note=ev.message)
            elif ev.kind in ("judge_outage", "claims_waiting"):
                progress.update(task, note=ev.message)
                self.log(f"{label}: {ev.message}")
            elif ev.kind == "cascade":
                self.log(f"{label}: {ev.message}")
            elif ev.kind == "finished":
                progress.update(task, completed=ev.done, total=max(ev.done, 1), note=ev.message)
                progress.remove_task(task)
                self._run_finished()

        return on

    def _run_finished(self) -> None:
        self._runs_done += 1
        if self._progress is not None and self._overall is not None:
            self._progress.update(self._overall, completed=self._runs_done)

    # -- plain lines -----------------------------------------------------------------------
    def _plain(self, label: str) -> ProgressCallback:
        started = time.perf_counter()
        state = {"chunks": 0}

        def on(ev: ProgressEvent) -> None:
            if ev.kind in ("rows_done", "chunk_done", "finished") and ev.done:
                self._progressed()
            if ev.kind == "planned" and not self.compact:
                self.log(f"{label}: {ev.message or f'{ev.total} rows'}")
            elif ev.kind == "chunk_done":
                state["chunks"] += 1
                last = ev.total is not None and ev.done >= ev.total
                if not self.compact and not (last and state["chunks"] == 1):
                    total = f"/{ev.total}" if ev.total is not None else ""
                    self.log(f"{label}: {ev.done}{total} rows ({ev.message})")
            elif ev.kind in ("judge_outage", "cascade", "claims_waiting"):
                self.log(f"{label}: {ev.message}")
            elif ev.kind == "finished":
                self._runs_done += 1
                of = f" [{self._runs_done}/{self.total_runs}]" if self.total_runs else ""
                self.log(f"{label}: {ev.message}, {ev.done} rows in {time.perf_counter() - started:.1f}s{of}")

        return on
