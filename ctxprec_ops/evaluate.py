"""Score many cases with many metrics: bounded concurrency, retries, per-case isolation."""

from __future__ import annotations

import asyncio
import sys
from typing import Any, Callable, Iterable, Sequence

from ._async import run_sync
from .budget import Budget
from .cache import VerdictCache
from .errors import InvalidTestCaseError
from .judging import JudgeRun, active_guards
from .limiter import AdaptiveLimiter
from .metrics.base import BaseRetrievalMetric
from .results import EvaluationResult, MetricResult

__all__ = ["evaluate", "a_evaluate"]

ProgressFn = Callable[[int, int], None]


def _as_list(x: Any) -> list:
    if isinstance(x, (list, tuple)):
        return list(x)
    if isinstance(x, Iterable) and not isinstance(x, (str, bytes)):
        return list(x)
    return [x]


async def a_evaluate(
    cases: Sequence[Any],
    metrics: Sequence[BaseRetrievalMetric] | BaseRetrievalMetric,
    *,
    concurrency: int = 16,
    max_retries: int | None = None,
    show_progress: bool | None = None,
    cache: VerdictCache | None = None,
    budget: Budget | None = None,
    progress_callback: ProgressFn | None = None,
) -> EvaluationResult:
    """Async ``evaluate``. ``concurrency`` caps judge requests in flight (adaptive on 429)."""
    case_list = _as_list(cases)
    metric_list = _as_list(metrics)
    if not metric_list:
        raise ValueError("evaluate() needs at least one metric")
    for m in metric_list:
        if not isinstance(m, BaseRetrievalMetric):
            raise TypeError(f"not a ctxprec metric: {m!r}")
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    retries = max_retries if max_retries is not None else max(m.max_retries for m in metric_list)
    guards = active_guards(concurrency)
    run = JudgeRun(limiter=AdaptiveLimiter(concurrency), budget=budget, cache=cache, max_retries=retries,
                   breaker=guards.breaker, quota=guards.quota)
    total = len(case_list) * len(metric_list)
    results: list[MetricResult | None] = [None] * total
    # bound the number of live case coroutines too, so memory stays flat for huge inputs
    gate = asyncio.Semaphore(max(concurrency * 4, 8))
    done = 0

    bar = _progress_bar(total) if (show_progress if show_progress is not None else sys.stderr.isatty()) else None

    async def one(slot: int, case_index: int, case: Any, metric: BaseRetrievalMetric) -> None:
        nonlocal done
        async with gate:
            if not metric.accepts(case):
                r = MetricResult(case_id=getattr(case, "id", None), metric=metric.metric_name,
                                 threshold=metric.threshold, judge_model=metric.evaluation_model,
                                 prompt_version=metric.prompt_version, case_index=case_index)
                r.error_type = InvalidTestCaseError.error_type
                r.error = f"{type(metric).__name__} does not score a {type(case).__name__}"
                results[slot] = r
            else:
                results[slot] = await metric.score_case(case, run, case_index)
        done += 1
        if bar is not None:
            bar[0].update(bar[1], completed=done)
        if progress_callback is not None:
            progress_callback(done, total)

    try:
        if bar is not None:
            bar[0].start()
        await asyncio.gather(
            *(
                one(i * len(metric_list) + j, i, case, metric)
                for i, case in enumerate(case_list)
                for j, metric in enumerate(metric_list)
            )
        )
    finally:
        if bar is not None:
            bar[0].stop()
        closed: set[int] = set()
        for m in metric_list:
            close = getattr(m.model, "aclose", None)
            if close is not None and id(m.model) not in closed:
                closed.add(id(m.model))
                await close()
    out = EvaluationResult([r for r in results if r is not None])
    out.stats = dict(run.stats, max_in_flight=run.limiter.max_in_flight,  # type: ignore[attr-defined]
                     rate_limited=run.limiter.rate_limited)
    return out


def evaluate(
    cases: Sequence[Any],
    metrics: Sequence[BaseRetrievalMetric] | BaseRetrievalMetric,
    *,
    concurrency: int = 16,
    max_retries: int | None = None,
    show_progress: bool | None = None,
    cache: VerdictCache | None = None,
    budget: Budget | None = None,
    progress_callback: ProgressFn | None = None,
) -> EvaluationResult:
    """Score every (case, metric) pair; one failing case never aborts or drops the others.

    Works from sync code and from inside a running event loop. Results come back in input
    order; ``.to_pandas()`` gives one row per (case, metric).
    """
    return run_sync(
        lambda: a_evaluate(
            cases, metrics, concurrency=concurrency, max_retries=max_retries,
            show_progress=show_progress, cache=cache, budget=budget,
            progress_callback=progress_callback,
        )
    )


def _progress_bar(total: int):
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

    from rich.console import Console

    progress = Progress(
        TextColumn("scoring"), BarColumn(), MofNCompleteColumn(), TimeRemainingColumn(),
        console=Console(stderr=True), transient=True,
    )
    task = progress.add_task("scoring", total=total)
    return progress, task
