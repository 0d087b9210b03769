"""Score many cases with many metrics: bounded concurrency, retries, per-case isolation."""

from __future__ import annotations

import asyncio
import sys
import warnings
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pydantic import BaseModel

from .._async import run_sync
from ..cases.results import EvaluationResult, MetricResult
from ..errors import InvalidTestCaseError
from ..judge import defaults
from ..judge.budget import Budget
from ..judge.cache import VerdictCache
from ..judge.calls import JudgeRun, active_guards
from ..judge.limiter import AdaptiveLimiter
from ..judge.retry import RetryWaits
from ..metrics.base import BaseRetrievalMetric

__all__ = ["a_evaluate", "assert_test", "evaluate"]

ProgressFn = Callable[[int, int], None]


def _as_list(x: Any) -> list:
    if isinstance(x, BaseModel) or hasattr(x, "retrieval_context") or hasattr(x, "turns"):
        return [x]  # one case (pydantic models are iterable: never spread one into its fields)
    if isinstance(x, (list, tuple)):
        return list(x)
    if isinstance(x, Iterable) and not isinstance(x, (str, bytes)):
        return list(x)
    return [x]


def _settings(
    cases: Any,
    test_cases: Any,
    metrics: Any,
    concurrency: int | None,
    show_progress: bool | None,
    async_config: Any,
    display_config: Any,
) -> tuple[list, list, int, bool | None]:
    """Fold deepeval's spellings (``test_cases=``, ``async_config``, ``display_config``) into ours."""
    if cases is not None and test_cases is not None:
        raise TypeError("evaluate() got both 'cases' and 'test_cases'; pass one")
    cases = test_cases if cases is None else cases
    if cases is None:
        raise TypeError("evaluate() needs the cases to score: evaluate(test_cases=[...], metrics=[...])")
    if metrics is None:
        raise ValueError("evaluate() needs at least one metric")
    if concurrency is None:
        concurrency = int(getattr(async_config, "max_concurrent", None) or defaults.CONCURRENCY)
    if show_progress is None and display_config is not None:
        show_progress = getattr(display_config, "show_indicator", None)
    return _as_list(cases), _as_list(metrics), concurrency, show_progress


async def a_evaluate(
    cases: Sequence[Any] | None = None,
    metrics: Sequence[BaseRetrievalMetric] | BaseRetrievalMetric | None = None,
    *,
    test_cases: Sequence[Any] | None = None,
    concurrency: int | None = None,
    max_retries: int | None = None,
    retry_waits: RetryWaits | None = None,
    outage_tolerance: float | None = None,
    show_progress: bool | None = None,
    cache: VerdictCache | None = None,
    budget: Budget | None = None,
    progress_callback: ProgressFn | None = None,
    async_config: Any = None,
    display_config: Any = None,
    error_config: Any = None,
    cache_config: Any = None,
    identifier: str | None = None,
    hyperparameters: dict[str, Any] | None = None,
) -> EvaluationResult:
    """Async ``evaluate``. ``concurrency`` caps judge requests in flight (adaptive on 429)."""
    case_list, metric_list, concurrency, show_progress = _settings(
        cases, test_cases, metrics, concurrency, show_progress, async_config, display_config
    )
    if not metric_list:
        raise ValueError("evaluate() needs at least one metric")
    for m in metric_list:
        if not isinstance(m, BaseRetrievalMetric):
            raise TypeError(f"not a ctxprec metric: {m!r}")
    if concurrency < 1:
        raise ValueError("concurrency must be at least 1")
    retries = max_retries if max_retries is not None else max(m.max_retries for m in metric_list)
    guards = active_guards(concurrency, outage_tolerance)
    run = JudgeRun(
        limiter=AdaptiveLimiter(concurrency),
        budget=budget,
        cache=cache,
        max_retries=retries,
        breaker=guards.breaker,
        quota=guards.quota,
        waits=retry_waits or RetryWaits(),
    )
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
                r = MetricResult(
                    case_id=getattr(case, "id", None),
                    metric=metric.metric_name,
                    threshold=metric.threshold,
                    judge_model=metric.evaluation_model,
                    prompt_version=metric.prompt_version,
                    case_index=case_index,
                    applicable=False,
                )
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
        for m in metric_list:  # a cascade with a target agreement: its threshold from these cases first
            if m.cascade is not None and not m.cascade.calibrated:
                from ..metrics.cascade_calibration import calibrate_metric

                await calibrate_metric(m, case_list, run=run)
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
        for judge in (j for m in metric_list for j in (m.model, *((m.cascade.strong,) if m.cascade else ()))):
            close = getattr(judge, "aclose", None)
            if close is not None and id(judge) not in closed:
                closed.add(id(judge))
                await close()
    final = [r for r in results if r is not None]
    if getattr(error_config, "skip_on_missing_params", False):
        for r in final:  # deepeval skips a metric whose case lacks the fields it needs
            if r.error_type == InvalidTestCaseError.error_type:
                r.applicable = False
    out = EvaluationResult(final, cases=case_list, metrics=metric_list)
    out.stats = dict(
        run.stats,
        max_in_flight=run.limiter.max_in_flight,
        rate_limited=run.limiter.rate_limited,
    )
    if display_config is not None and getattr(display_config, "print_results", False):
        _print_results(out)
    return out


def evaluate(
    cases: Sequence[Any] | None = None,
    metrics: Sequence[BaseRetrievalMetric] | BaseRetrievalMetric | None = None,
    *,
    test_cases: Sequence[Any] | None = None,
    concurrency: int | None = None,
    max_retries: int | None = None,
    retry_waits: RetryWaits | None = None,
    outage_tolerance: float | None = None,
    show_progress: bool | None = None,
    cache: VerdictCache | None = None,
    budget: Budget | None = None,
    progress_callback: ProgressFn | None = None,
    async_config: Any = None,
    display_config: Any = None,
    error_config: Any = None,
    cache_config: Any = None,
    identifier: str | None = None,
    hyperparameters: dict[str, Any] | None = None,
) -> EvaluationResult:
    """Score every (case, metric) pair; one failing case never aborts or drops the others.

    ``evaluate(cases, metrics)`` or deepeval's ``evaluate(test_cases=..., metrics=...,
    async_config=AsyncConfig(max_concurrent=N), display_config=..., error_config=...)``.
    ``concurrency`` (default ``judge.defaults.CONCURRENCY``, or ``async_config.max_concurrent``)
    caps judge requests in flight; ``retry_waits`` (``judge.retry.RetryWaits``) and
    ``outage_tolerance`` (seconds) time the retries and how long an outage is waited out (the
    judge layer's defaults otherwise). Works from sync code and from inside a running event loop. Results come back in
    input order: ``.results`` / ``.to_pandas()`` one per (case, metric), ``.test_results`` one
    per case with ``metrics_data`` (deepeval's shape).
    """
    return run_sync(
        lambda: a_evaluate(
            cases,
            metrics,
            test_cases=test_cases,
            concurrency=concurrency,
            max_retries=max_retries,
            retry_waits=retry_waits,
            outage_tolerance=outage_tolerance,
            show_progress=show_progress,
            cache=cache,
            budget=budget,
            progress_callback=progress_callback,
            async_config=async_config,
            display_config=display_config,
            error_config=error_config,
            cache_config=cache_config,
            identifier=identifier,
            hyperparameters=hyperparameters,
        )
    )


def assert_test(
    test_case: Any,
    metrics: Sequence[BaseRetrievalMetric] | BaseRetrievalMetric,
    golden: Any = None,
    run_async: bool = True,
) -> None:
    """For pytest (as deepeval's): score one case and raise ``AssertionError`` naming every metric
    that failed or errored, with its score, threshold and reason. A case marked ``flaky`` warns
    instead of failing."""
    if golden is not None:
        raise TypeError("assert_test(golden=...) is not supported: pass a test case")
    if test_case is None or not metrics:
        raise ValueError("assert_test() needs a test case and at least one metric")
    result = evaluate([test_case], metrics, show_progress=False).test_results[0]
    failed = [d for d in result.metrics_data if d.error is not None or d.success is False]
    if not failed:
        return
    detail = "; ".join(
        f"{d.name} (score: {d.score}, threshold: {d.threshold}, strict: {d.strict_mode}, "
        f"error: {d.error}, reason: {d.reason})"
        for d in failed
    )
    if getattr(test_case, "flaky", False):
        warnings.warn(f"flaky test case failed (not raised): {detail}", stacklevel=2)
        return
    raise AssertionError(f"Metrics failed: {detail}")


def _print_results(result: EvaluationResult) -> None:
    for tr in result.test_results:
        parts = [
            f"{d.name} {'n/a' if d.score is None else f'{d.score:.4f}'}{' ERROR ' + d.error if d.error else ''}"
            for d in tr.metrics_data
        ]
        print(f"{'PASS' if tr.success else 'FAIL'}  {tr.name}: {', '.join(parts)}")


def _progress_bar(total: int):
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeRemainingColumn,
    )

    progress = Progress(
        TextColumn("scoring"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=Console(stderr=True),
        transient=True,
    )
    task = progress.add_task("scoring", total=total)
    return progress, task
