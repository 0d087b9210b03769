"""``nightly_dag``: the nightly scoring DAG (plan -> mapped chunk scoring -> aggregate -> alert), and
``on_new_logs_dag``: the same DAG scheduled on the source table's Asset (a partitioned DAG run per
day an upstream DAG reports as written).

The files in ``dags/`` call these with a DAG id and a metric; everything they wire is here so the
retrieval-log DAG and the conversation-log DAG stay identical in shape. The task that completes the
partition (``aggregate``, or ``score_batch``) declares the ``ctxprec_scores`` Asset as its outlet
(and the source table's Asset as its inlet) and attaches the run's figures to the asset event.

The Airflow-only settings (``CTXPREC_AIRFLOW_*``: chunk tasks at once, pool, retries, failure
callbacks) are listed in the DAG's docs (``airflow_settings_doc``) and in docs/configuration.md;
the other ``CTXPREC_*`` settings configure the tasks as they configure every entry point.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import DAG, Asset, CronDataIntervalTimetable, PartitionedAssetTimetable, StartOfDayMapper

from ..config import Settings
from ..pipeline.kinds import DEFAULT_METRIC, METRIC_KINDS
from .assets import scores_asset, source_asset
from .callbacks import failure_callbacks
from .dag_params import dag_params, templated_arguments
from .operators import (
    ContextualPrecisionAlertOperator,
    ContextualPrecisionFinalizeOperator,
    ContextualPrecisionOperator,
    ContextualPrecisionPlanOperator,
)

__all__ = [
    "airflow_settings_doc",
    "nightly_dag",
    "nightly_dags",
    "nightly_timetable",
    "on_new_logs_dag",
    "on_new_logs_dags",
]

#: the partition a task scores: a manual trigger's param, else the run's data-interval day
NIGHTLY_PARTITION = "{{ params.partition_key or ds }}"
#: on a partitioned (asset-triggered) run: the param, else the run's partition key (no logical date)
PARTITIONED_PARTITION = "{{ params.partition_key or partition_key or '' }}"


def nightly_timetable() -> CronDataIntervalTimetable:
    """Daily data intervals in UTC: the run for day D starts at D+1 00:00 and ``{{ ds }}`` is D."""
    return CronDataIntervalTimetable("0 0 * * *", timezone="UTC")


def _start_date(value: str) -> datetime:
    """``CTXPREC_START_DATE`` (a day, checked by the declaration) as midnight UTC."""
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


def airflow_settings_doc(settings: Settings) -> str:
    """The Airflow-only settings as a Markdown table (variable, meaning, value here), from the
    declaration: the DAG docs show what configures these DAGs where they were parsed."""
    rows = [
        f"| ``{var}`` | {info['help']} | {getattr(settings, info['field'])!r} |"
        for var, info in Settings.variables().items()
        if info["section"] == "airflow"
    ]
    return "\n".join(["| variable | meaning | value |", "|---|---|---|", *rows])


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
    assets: bool = True,
    alert_notifiers: Sequence[Callable[[Any], None]] | None = None,
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
    task through the OpenAI Batch API) -> ``alert``.

    ``assets`` (default True): the completing task's outlet is the ``ctxprec_scores`` Asset, its
    inlet the source table's. ``alert_notifiers``: notifiers (``BaseNotifier``: the webhook one of
    ``ctxprec_ops.airflow.notifiers``, Slack's, SMTP's ...) called when the ``alert`` task fails."""
    return _build(
        dag_id,
        schedule=nightly_timetable(),
        partition_template=NIGHTLY_PARTITION,
        metric=metric,
        source_table=source_table,
        warehouse_conn_id=warehouse_conn_id,
        start_date=start_date,
        on_failure_callback=on_failure_callback,
        tags=tags,
        doc_md=doc_md,
        pool=pool,
        judge_mode=judge_mode,
        assets=assets,
        alert_notifiers=alert_notifiers,
    )


def on_new_logs_dag(
    dag_id: str,
    *,
    metric: str = DEFAULT_METRIC,
    source_table: str | None = None,
    warehouse_conn_id: str = "ctxprec_warehouse",
    logs_asset: Asset | None = None,
    partition_mapper: Any = None,
    **kwargs: Any,
) -> DAG:
    """The nightly DAG's tasks, run when an upstream DAG updates the source table's Asset.

    Scheduled on ``PartitionedAssetTimetable`` (Airflow 3.2+ partitioned DAG runs): each partition
    key the upstream reports — its own partitioned run's key, or ``outlet_events[asset]
    .add_partitions(key)`` — becomes one run of this DAG whose ``partition_key`` is the day.
    ``partition_mapper`` maps the upstream key to the day: default ``StartOfDayMapper()`` for
    Airflow's timestamp keys (``2026-11-28T00:00:00`` -> ``2026-11-28``); pass
    ``StartOfDayMapper(input_format="%Y-%m-%d")`` for keys that are already days.

    ``logs_asset`` (default ``source_asset(metric, ...)``, the table's URI in the warehouse):
    the Asset the upstream DAG declares as its outlet. Other arguments are ``nightly_dag``'s."""
    asset = logs_asset or source_asset(metric, source_table=source_table, warehouse_conn_id=warehouse_conn_id)
    schedule = PartitionedAssetTimetable(assets=asset, default_partition_mapper=partition_mapper or StartOfDayMapper())
    kwargs.setdefault("tags", ["ctxprec", metric, "asset-triggered"])
    return _build(
        dag_id,
        schedule=schedule,
        partition_template=PARTITIONED_PARTITION,
        metric=metric,
        source_table=source_table,
        warehouse_conn_id=warehouse_conn_id,
        logs_asset=asset,
        **kwargs,
    )


def _build(
    dag_id: str,
    *,
    schedule: Any,
    partition_template: str,
    metric: str,
    source_table: str | None,
    warehouse_conn_id: str,
    start_date: datetime | None = None,
    on_failure_callback: list[Callable[[Any], None]] | None = None,
    tags: list[str] | None = None,
    doc_md: str | None = None,
    pool: str | None = None,
    judge_mode: str | None = None,
    assets: bool = True,
    alert_notifiers: Sequence[Callable[[Any], None]] | None = None,
    logs_asset: Asset | None = None,
) -> DAG:
    settings = Settings.from_env()
    pool = pool or settings.airflow_pool
    callbacks = failure_callbacks(on_failure_callback, settings)
    common: dict[str, Any] = dict(
        metric=metric,
        warehouse_conn_id=warehouse_conn_id,
        source_table=source_table,
        **templated_arguments(partition_template),
    )
    lineage: dict[str, Any] = {}
    if assets:  # the task that completes the partition: outlet = the scores, inlet = the logs
        logs = logs_asset or source_asset(metric, source_table=source_table, warehouse_conn_id=warehouse_conn_id)
        lineage = {"outlets": [scores_asset(warehouse_conn_id)], "inlets": [logs]}
    retry_args: dict[str, Any] = dict(
        retries=settings.airflow_retries,
        retry_delay=timedelta(seconds=settings.airflow_retry_delay),
        retry_exponential_backoff=2.0,
        max_retry_delay=timedelta(seconds=settings.airflow_max_retry_delay),
    )
    with DAG(
        dag_id=dag_id,
        schedule=schedule,
        start_date=start_date or _start_date(settings.start_date),
        catchup=False,
        params=dag_params(settings, pool),
        default_args={"owner": "ctxprec", "on_failure_callback": callbacks, **retry_args},
        tags=tags or ["ctxprec", metric],
        doc_md=doc_md or f"{__doc__}\n{airflow_settings_doc(settings)}\n",
        max_active_runs=1,
    ) as dag:
        alert = ContextualPrecisionAlertOperator(
            task_id="alert",
            min_mean="{{ params.min_mean }}",
            min_pass_rate="{{ params.min_pass_rate }}",
            min_drop="{{ params.min_drop }}",
            use_corrected="{{ params.use_corrected }}",
            retries=0,
            on_failure_callback=[*callbacks, *(alert_notifiers or [])],
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
                **lineage,
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
            **lineage,
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


def on_new_logs_dags(**kwargs: Any) -> dict[str, DAG]:
    """One asset-triggered DAG per nightly metric kind, as ``{"<metric>_on_new_logs": dag}``."""
    return {
        f"{kind.name}_on_new_logs": on_new_logs_dag(f"{kind.name}_on_new_logs", metric=kind.name, **kwargs)
        for kind in METRIC_KINDS.values()
        if kind.nightly
    }
