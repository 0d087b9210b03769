"""``nightly_dag``: the nightly scoring DAG (plan -> mapped chunk scoring -> aggregate -> alert).

The files in ``dags/`` call this with a DAG id and a metric; everything they wire is here so the
retrieval-log DAG and the conversation-log DAG stay identical in shape.

Airflow-only knobs (the ``CTXPREC_*`` variables of ``ctxprec_ops.config`` configure the rest):

| variable | meaning | default |
|---|---|---|
| ``CTXPREC_AIRFLOW_MAX_ACTIVE_CHUNKS`` | chunk tasks running at once, per DAG, all runs | 4 |
| ``CTXPREC_AIRFLOW_POOL`` | pool for the chunk tasks (one judge quota); ``nightly_dag(pool=)`` wins | unset |
| ``CTXPREC_AIRFLOW_RETRIES`` | retries of every task (alerts are never retried) | 3 |
| ``CTXPREC_AIRFLOW_RETRY_DELAY`` | first retry delay, seconds (doubles each retry) | 60 |
| ``CTXPREC_AIRFLOW_MAX_RETRY_DELAY`` | retry delay cap, seconds | 1800 |
| ``CTXPREC_AIRFLOW_ON_FAILURE`` | extra failure callbacks, ``module:attr`` comma-separated | unset |
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import DAG, CronDataIntervalTimetable, Param

from ..config import Settings
from ..pipeline.kinds import DEFAULT_METRIC, METRIC_KINDS
from .callbacks import failure_callbacks
from .operators import (
    ContextualPrecisionAlertOperator,
    ContextualPrecisionFinalizeOperator,
    ContextualPrecisionOperator,
    ContextualPrecisionPlanOperator,
)

__all__ = ["nightly_dag", "nightly_dags", "nightly_timetable"]


def nightly_timetable() -> CronDataIntervalTimetable:
    """Daily data intervals in UTC: the run for day D starts at D+1 00:00 and ``{{ ds }}`` is D."""
    return CronDataIntervalTimetable("0 0 * * *", timezone="UTC")


def _start_date(value: str) -> datetime:
    try:
        d = datetime.fromisoformat(value)
    except ValueError:
        raise ValueError(f"CTXPREC_START_DATE must be a date YYYY-MM-DD, got {value!r}") from None
    return d.replace(tzinfo=UTC) if d.tzinfo is None else d


def _number_param(
    default: float | None, description: str, *, integer: bool = False, lo: float | None = 0, hi: float | None = 1
) -> Param:
    kind = "integer" if integer else "number"
    # JSON-schema keywords for Param's **schema; a bound left out (None) is no bound at all
    bounds: dict[str, Any] = {k: v for k, v in (("minimum", lo), ("maximum", hi)) if v is not None}
    return Param(default, type=[kind, "null"], description=description, **bounds)


def nightly_dag(
    dag_id: str,
    *,
    metric: str = DEFAULT_METRIC,
    source_table: str | None = None,
    warehouse_conn_id: str = "ctxprec_warehouse",
    start_date: datetime | None = None,
    on_failure_callback: list[Callable[[Any], None]] | None = None,
    tags: list[str] | None = None,
    doc_md: str | None = None,
    pool: str | None = None,
    judge_mode: str | None = None,
) -> DAG:
    """Build the nightly DAG for ``metric``: ``plan_chunks`` -> ``score_chunk`` (mapped, one
    task per chunk, capped and retried with exponential backoff) -> ``aggregate`` ->
    ``alert`` (fails, unretried, when an alert fires). Params override the defaults on a
    manual trigger; ``partition_key`` scores a chosen day instead of ``{{ ds }}``.

    ``pool`` (default ``CTXPREC_AIRFLOW_POOL``): the Airflow pool the ``score_chunk`` tasks run in,
    so every DAG calling one judge shares its quota — at most ``slots`` chunk tasks at once, each
    with ``max_rpm`` / ``max_tpm`` = the quota / ``slots`` (see docs/scaling.md). The pool's name is
    shown in the DAG params as ``judge_pool`` (fixed when the DAG file is parsed).

    ``judge_mode="batch"`` (default: ``CTXPREC_JUDGE_MODE``): ``score_batch`` (one deferrable
    task through the OpenAI Batch API) -> ``alert``."""
    settings = Settings.from_env()
    pool = pool or settings.airflow_pool
    callbacks = failure_callbacks(on_failure_callback, settings)
    params = {
        "partition_key": Param(
            None,
            type=["null", "string"],
            pattern=r"^\d{4}-\d{2}-\d{2}$",
            description="Day to score (YYYY-MM-DD); empty = the run's data interval day",
        ),
        "threshold": _number_param(settings.threshold, "Per-case pass threshold"),
        "min_mean": _number_param(settings.min_mean, "Alert when the partition mean is below this"),
        "min_pass_rate": _number_param(settings.min_pass_rate, "Alert when the pass rate is below this"),
        "min_drop": _number_param(0.05, "Regression alert: drop below the 7-partition baseline mean"),
        "chunk_size": _number_param(settings.chunk_size, "Rows per mapped chunk task", integer=True, lo=1, hi=None),
        "concurrency": _number_param(
            settings.concurrency, "Judge calls in flight per chunk task", integer=True, lo=1, hi=None
        ),
        "judge_max_retries": _number_param(
            None, "Judge retries inside a task (empty = library default)", integer=True, lo=0, hi=None
        ),
        "max_rpm": _number_param(
            settings.max_rpm,
            "Judge requests per minute per chunk task: the quota divided by "
            "the tasks that run at once (the judge_pool's slots)",
            lo=0,
            hi=None,
        ),
        "max_tpm": _number_param(
            settings.max_tpm, "Judge tokens per minute per chunk task (quota / slots)", lo=0, hi=None
        ),
        "outage_tolerance": _number_param(
            settings.outage_tolerance,
            "Seconds a chunk task waits out a judge outage before its remaining rows fail (and Airflow retries it)",
            lo=0,
            hi=None,
        ),
        "sample_rate": _number_param(
            settings.sample_rate,
            "Share of the day's rows to score (0, 1]: the same rows on every run, by a hash of the log id",
            lo=0,
            hi=1,
        ),
        "max_rows": _number_param(
            settings.max_rows, "Score at most this many rows of the day (empty = no cap)", integer=True, lo=1, hi=None
        ),
        "judge_samples": _number_param(
            settings.judge_samples,
            "Self-consistency: sampled judge answers per node, odd (majority verdict; ~N times the "
            "completion tokens; 1 = one answer)",
            integer=True,
            lo=1,
            hi=None,
        ),
        "judge_pool": Param(
            pool,
            type=["null", "string"],
            enum=[pool],
            description="Airflow pool of the score_chunk tasks (set by nightly_dag(pool=...) or "
            "CTXPREC_AIRFLOW_POOL when the DAG file is parsed; shown, not changeable)",
        ),
    }
    common: dict[str, Any] = dict(
        partition_key="{{ params.partition_key or ds }}",
        metric=metric,
        warehouse_conn_id=warehouse_conn_id,
        source_table=source_table,
        threshold="{{ params.threshold }}",
        chunk_size="{{ params.chunk_size }}",
        concurrency="{{ params.concurrency }}",
        judge_max_retries="{{ params.judge_max_retries }}",
        max_rpm="{{ params.max_rpm }}",
        max_tpm="{{ params.max_tpm }}",
        outage_tolerance="{{ params.outage_tolerance }}",
        sample_rate="{{ params.sample_rate }}",
        max_rows="{{ params.max_rows }}",
        judge_samples="{{ params.judge_samples }}",
    )
    retry_args: dict[str, Any] = dict(
        retries=settings.airflow_retries,
        retry_delay=timedelta(seconds=settings.airflow_retry_delay),
        retry_exponential_backoff=2.0,
        max_retry_delay=timedelta(seconds=settings.airflow_max_retry_delay),
    )
    with DAG(
        dag_id=dag_id,
        schedule=nightly_timetable(),
        start_date=start_date or _start_date(settings.start_date),
        catchup=False,
        params=params,
        default_args={"owner": "ctxprec", "on_failure_callback": callbacks, **retry_args},
        tags=tags or ["ctxprec", metric],
        doc_md=doc_md or __doc__,
        max_active_runs=1,
    ) as dag:
        alert = ContextualPrecisionAlertOperator(
            task_id="alert",
            min_mean="{{ params.min_mean }}",
            min_pass_rate="{{ params.min_pass_rate }}",
            min_drop="{{ params.min_drop }}",
            retries=0,
            **common,
        )
        if (judge_mode or settings.judge_mode) == "batch":
            # one deferrable task: submits the partition's batch(es), waits on the triggerer,
            # resumes to write the answers and the run row
            pool_arg: dict[str, Any] = {"pool": pool} if pool else {}  # no pool: Airflow's default pool
            batch = ContextualPrecisionOperator(
                task_id="score_batch",
                judge_mode="batch",
                **pool_arg,
                **common,
            )
            batch >> alert
            return dag
        plan = ContextualPrecisionPlanOperator(task_id="plan_chunks", **common)
        score = ContextualPrecisionOperator.partial(
            task_id="score_chunk",
            max_active_tis_per_dag=settings.airflow_max_active_chunks,
            **({"pool": pool} if pool else {}),
            **common,
        ).expand(chunk=plan.output)
        aggregate = ContextualPrecisionFinalizeOperator(
            task_id="aggregate",
            chunk_results=score.output,
            trigger_rule="none_failed",
            **common,
        )
        aggregate >> alert
    return dag


def nightly_dags(**kwargs: Any) -> dict[str, DAG]:
    """One nightly DAG per metric kind that runs nightly, as ``{"<metric>_nightly": dag}``
    (a DAG file puts them in its globals); ``kwargs`` go to every ``nightly_dag``."""
    return {
        f"{kind.name}_nightly": nightly_dag(f"{kind.name}_nightly", metric=kind.name, **kwargs)
        for kind in METRIC_KINDS.values()
        if kind.nightly
    }
