"""How a run's judge requests are sent and answered: the one thing a batch-mode run does
differently from a sync one.

``score_partition`` scores a partition in *passes* of the same stream (plan, intake, judging,
writes); a transport decides what a judge call does inside a pass and what happens between passes:

- ``SyncTransport`` (``judge_mode="sync"``): every call goes to the endpoint at once; one pass.
- a deferred transport (``judge_mode="batch"``: ``ctxprec_ops.batch.transport.BatchTransport``)
  answers a call from work it already has back, else records the request and raises
  ``JudgeDeferredError`` (the case is written neither as a score nor as a failure). After the pass
  it submits what it recorded (``flush``); the run waits for it (``pending``/``wait``), takes the
  answers in (``collect``), and runs the next pass, which writes the now-answered cases.

Transports other than ``sync`` are found by name through the ``ctxprec_ops.transports`` entry-point
group (the package declares ``batch``), so the pipeline imports none of them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import JudgeConfigurationError

if TYPE_CHECKING:
    from ..judge.models.base import JudgeModel
    from .context import PipelineContext
    from .records import ProgressCallback

__all__ = ["JudgeTransport", "SyncTransport", "transport_for", "transport_metric", "ENTRY_POINT_GROUP"]

ENTRY_POINT_GROUP = "ctxprec_ops.transports"


class JudgeTransport(Protocol):
    """What ``score_partition`` asks of a transport (see the module docstring for the order)."""

    #: ``judge_mode`` value it implements
    name: str
    #: whether chunks may be scored in worker processes (``workers=N``) with it
    allows_workers: bool

    def open(self, ctx: PipelineContext, partition_key: str, run_id: str, state: dict[str, Any] | None) -> None:
        """Bind to a run (``state``: what ``state()`` returned before a wait in another process)."""

    def judge(self) -> JudgeModel | None:
        """The judge the metric calls during a pass."""

    def pending(self) -> list[str]:
        """Ids of submitted work that has not ended (checked once; empty = nothing to wait for)."""

    def wait(self, progress: ProgressCallback | None) -> None:
        """Block until every pending piece of work has ended."""

    def collect(self) -> None:
        """Take in the answers of ended work before the next pass."""

    def settle(self) -> None:
        """After a pass's writes: record that the collected work has been used."""

    def flush(self, progress: ProgressCallback | None) -> bool:
        """Submit the requests the pass deferred; True when it did (another pass will follow)."""

    def poll_seconds(self) -> float:
        """How often a scheduler that waits outside this process should poll."""

    def state(self) -> dict[str, Any]:
        """JSON-safe state to resume with in another process after a wait."""

    def notes(self) -> list[str]:
        """What the run's output and row should say about the transport (one line each)."""

    def close(self) -> None: ...


class SyncTransport:
    """Every judge call goes to the endpoint when it is made: one pass, nothing to wait for."""

    name = "sync"
    allows_workers = True

    def __init__(self) -> None:
        self._judge: JudgeModel | None = None

    def open(self, ctx: PipelineContext, partition_key: str, run_id: str, state: dict[str, Any] | None) -> None:
        self._judge = ctx.judge

    def judge(self) -> JudgeModel | None:
        return self._judge

    def pending(self) -> list[str]:
        return []

    def wait(self, progress: ProgressCallback | None) -> None:
        pass

    def collect(self) -> None:
        pass

    def settle(self) -> None:
        pass

    def flush(self, progress: ProgressCallback | None) -> bool:
        return False

    def poll_seconds(self) -> float:
        return 0.0

    def state(self) -> dict[str, Any]:
        return {}

    def notes(self) -> list[str]:
        return []

    def close(self) -> None:
        pass


def transport_metric(config: Any, judge: JudgeModel | None, transport: Any, like: Any = None) -> Any:
    """The run's metric calling ``judge`` (the transport's); a cascade's strong judge is answered
    by the transport too (``judge_for``), so both stages go through it, with the threshold of the
    metric it replaces (``like``)."""
    metric = config.kind.build(config, judge)
    cascade = getattr(metric, "cascade", None)
    if cascade is not None:
        wrap = getattr(transport, "judge_for", None)
        if callable(wrap):
            cascade.strong = wrap(cascade.strong)
        before = getattr(like, "cascade", None)
        if before is not None and before.calibrated:
            metric.set_threshold(before.escalate_below, before.calibration)
    return metric


def _entry_point(name: str) -> Callable[..., JudgeTransport]:
    from importlib.metadata import entry_points

    found = [ep for ep in entry_points(group=ENTRY_POINT_GROUP) if ep.name == name]
    if not found:
        known = sorted({"sync", *(ep.name for ep in entry_points(group=ENTRY_POINT_GROUP))})
        raise JudgeConfigurationError(
            f"judge_mode {name!r} has no transport installed (known: {', '.join(known)}); "
            "reinstall ctxprec-ops so its entry points are registered"
        )
    factory: Callable[..., JudgeTransport] = found[0].load()
    return factory


def transport_for(judge_mode: str) -> JudgeTransport:
    """The transport of ``judge_mode`` (``sync`` built in, others by entry point)."""
    if judge_mode == "sync":
        return SyncTransport()
    return _entry_point(judge_mode)()
