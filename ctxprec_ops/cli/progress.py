"""Render the pipeline's ``ProgressEvent``s: rich bars on an interactive stderr, plain log
lines otherwise (CI logs, cron mail, Airflow task logs)."""

from __future__ import annotations

import time
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

from ..pipeline import ProgressCallback, ProgressEvent

__all__ = ["ProgressDisplay"]


class ProgressDisplay:
    """A context manager; ``callback(label)`` gives the ``progress=`` argument of one
    partition run. With ``total_runs`` an overall bar counts finished runs (the demo).

    ``interactive=None`` means: bars when stderr is a terminal, log lines otherwise (with
    ``compact``, one line per finished run); ``enabled=False`` prints nothing.
    """

    def __init__(self, console: Console | None = None, *, interactive: bool | None = None,
                 enabled: bool = True, total_runs: int | None = None, overall_label: str = "partitions",
                 compact: bool = False) -> None:
        self.console = console or Console(stderr=True)
        self.enabled = enabled
        self.interactive = self.console.is_terminal if interactive is None else interactive
        self.total_runs = total_runs
        self.overall_label = overall_label
        self.compact = compact  # plain mode: one line per finished run only
        self._progress: Progress | None = None
        self._overall: TaskID | None = None
        self._runs_done = 0

    def __enter__(self) -> "ProgressDisplay":
        if self.enabled and self.interactive:
            self._progress = Progress(
                TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                TextColumn("{task.fields[note]}"), TimeElapsedColumn(), TimeRemainingColumn(),
                console=self.console, transient=True,
            )
            self._progress.start()
            if self.total_runs:
                self._overall = self._progress.add_task(self.overall_label, total=self.total_runs, note="")
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        if self._progress is not None:
            self._progress.stop()
            self._progress = None

    def log(self, message: str) -> None:
        """A plain line above the bars (or on stderr when not interactive)."""
        if self.enabled:
            self.console.print(message, markup=False, highlight=False, soft_wrap=True)

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
            if ev.kind == "planned":
                progress.update(task, total=ev.total or 0, completed=0, note=ev.message)
            elif ev.kind in ("rows_done", "chunk_done"):
                progress.update(task, completed=ev.done, total=ev.total if ev.total is not None else None)
                if ev.kind == "chunk_done" and ev.message:
                    progress.update(task, note=ev.message)
            elif ev.kind == "judge_outage":
                progress.update(task, note=ev.message)
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
            if ev.kind == "planned" and not self.compact:
                self.log(f"{label}: {ev.message or f'{ev.total} rows'}")
            elif ev.kind == "chunk_done":
                state["chunks"] += 1
                last = ev.total is not None and ev.done >= ev.total
                if not self.compact and not (last and state["chunks"] == 1):
                    total = f"/{ev.total}" if ev.total is not None else ""
                    self.log(f"{label}: {ev.done}{total} rows ({ev.message})")
            elif ev.kind == "judge_outage":
                self.log(f"{label}: {ev.message}")
            elif ev.kind == "finished":
                self._runs_done += 1
                of = f" [{self._runs_done}/{self.total_runs}]" if self.total_runs else ""
                self.log(f"{label}: {ev.message}, {ev.done} rows in {time.perf_counter() - started:.1f}s{of}")

        return on
