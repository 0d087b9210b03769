"""``ContextualPrecisionComponent``: the evaluation declared in a Dagster project's ``defs.yaml``,
no Python — source table, column mapping, segments, judge, thresholds, automation, schedule, alerts.

    dg scaffold defs ctxprec_ops.dagster.ContextualPrecisionComponent rag_eval

writes ``defs/rag_eval/defs.yaml`` (the attributes below with their defaults); edit it, and
``dg dev`` / ``dagster dev`` loads one daily-partitioned scores asset with its checks, resources,
automation sensor (and, when asked, a nightly schedule and alert sensors). It builds the same asset
and checks as ``dagster_defs`` (``build_scores_asset``, ``build_score_checks``) over the same
``score_partition``. Resource keys are prefixed by the asset name, so several components (say one
per retriever table) live in one project. Secrets stay in the environment: ``warehouse.url_env``
and ``judge.api_key_env`` name variables, passed as ``EnvVar`` (never written to run config).
"""

from typing import Any

from dagster import (
    Component,
    ComponentLoadContext,
    DefaultScheduleStatus,
    Definitions,
    EnvVar,
    Model,
    Resolvable,
    Scaffolder,
    ScaffoldRequest,
    build_schedule_from_partitioned_job,
    define_asset_job,
    scaffold_with,
)
from dagster.components.component_scaffolding import scaffold_component
from pydantic import Field

from ctxprec_ops.pipeline.kinds import metric_kind

from .assets import build_scores_asset
from .automation import AUTOMATION_KINDS, AutomationSettings, automation_condition, build_automation_sensor
from .automation import freshness_policy as build_freshness_policy
from .checks import build_score_checks
from .partitions import build_daily_partitions
from .resources import AlertThresholdsResource, JudgeResource, WarehouseResource
from .sensors import build_alert_sensors
from .sources import GROUP, log_table_spec

__all__ = ["ContextualPrecisionComponent", "ContextualPrecisionScaffolder"]


class WarehouseModel(Model):
    url_env: str | None = Field(default="CTXPREC_WAREHOUSE_URL", description="Variable holding the SQLAlchemy URL.")
    url: str | None = Field(default=None, description="A literal URL without a password (e.g. sqlite:///ctxprec.db).")


class JudgeModel(Model):
    model: str = Field(default="lexical", description="OpenAI-compatible model name, or 'lexical' (offline).")
    base_url: str | None = Field(default=None, description="Endpoint; unset: OPENAI_BASE_URL.")
    api_key_env: str | None = Field(default="OPENAI_API_KEY", description="Variable holding the API key.")
    concurrency: int = 16
    chunk_size: int = 500
    timeout: float = 60.0
    max_retries: int = 6
    max_cost: float | None = Field(default=None, description="USD cap on one partition run's judge spend.")
    max_rpm: float | None = None
    max_tpm: float | None = None
    sample_rate: float = 1.0
    max_rows: int | None = None
    judge_mode: str = Field(default="sync", description="'sync' or 'batch' (OpenAI Batch API).")
    samples: int = 1


class ThresholdsModel(Model):
    threshold: float = Field(default=0.5, description="Per-case pass threshold.")
    min_mean: float | None = Field(default=None, description="threshold check: fail below this partition mean.")
    min_pass_rate: float | None = Field(default=None, description="threshold check: fail below this pass rate.")
    min_drop: float = 0.05
    alpha: float = 0.01
    baseline_partitions: int = 7
    volume_ratio: float = 0.5
    max_failure_rate: float | None = 0.2
    blocking: bool = Field(default=True, description="A threshold breach fails the run.")


class AutomationModel(Model):
    kind: str = Field(default="eager", description=f"One of {', '.join(AUTOMATION_KINDS)}.")
    cron: str = "0 0 * * *"
    freshness_hours: float | None = Field(default=None, description="FreshnessPolicy fail window, hours.")
    sensor_running: bool = Field(default=False, description="Start the automation sensor running.")


class ScheduleModel(Model):
    enabled: bool = Field(default=False, description="Add a nightly schedule (00:00 UTC, yesterday's partition).")
    running: bool = False


class AlertsModel(Model):
    enabled: bool = Field(default=False, description="Add the run-failure / check-failure webhook sensors.")
    webhook_env: str = Field(default="CTXPREC_ALERT_WEBHOOK", description="Variable holding the webhook URL.")


class ContextualPrecisionScaffolder(Scaffolder):
    """``dg scaffold defs ctxprec_ops.dagster.ContextualPrecisionComponent NAME``: a defs.yaml to edit."""

    def scaffold(self, request: ScaffoldRequest) -> None:
        scaffold_component(
            request,
            {
                "metric": "contextual_precision",
                "source_table": "retrieval_logs",
                "columns": {},
                "segments": [],
                "start_date": "2025-01-01",
                "warehouse": {"url_env": "CTXPREC_WAREHOUSE_URL"},
                "judge": {"model": "lexical", "api_key_env": "OPENAI_API_KEY", "concurrency": 16},
                "thresholds": {"threshold": 0.5, "min_mean": None, "min_pass_rate": None},
                "automation": {"kind": "eager", "cron": "0 0 * * *", "sensor_running": False},
                "schedule": {"enabled": False},
                "alerts": {"enabled": False, "webhook_env": "CTXPREC_ALERT_WEBHOOK"},
            },
        )


@scaffold_with(ContextualPrecisionScaffolder)
class ContextualPrecisionComponent(Component, Model, Resolvable):
    """One metric's daily scores asset over a log table, with its checks and automation."""

    metric: str = Field(default="contextual_precision", description="contextual_precision, turn_... or label_...")
    asset_name: str | None = Field(default=None, description="Asset key; default <metric>_scores.")
    source_table: str | None = Field(default=None, description="Log table; default the metric's table.")
    source_asset: str | None = Field(default=None, description="Upstream asset key of the table; default its name.")
    declare_source: bool = Field(default=True, description="Declare the log table as an external asset.")
    columns: dict[str, str] = Field(default_factory=dict, description="Logical column name -> table column.")
    segments: list[str] = Field(default_factory=list, description="Columns the scores are segmented by.")
    start_date: str = Field(default="2025-01-01", description="First daily partition, YYYY-MM-DD.")
    group_name: str = GROUP
    warehouse: WarehouseModel = Field(default_factory=lambda: WarehouseModel())
    judge: JudgeModel = Field(default_factory=lambda: JudgeModel())
    thresholds: ThresholdsModel = Field(default_factory=lambda: ThresholdsModel())
    automation: AutomationModel = Field(default_factory=lambda: AutomationModel())
    schedule: ScheduleModel = Field(default_factory=lambda: ScheduleModel())
    alerts: AlertsModel = Field(default_factory=lambda: AlertsModel())

    def _resources(self, kind: Any) -> dict[str, Any]:
        w, j, t = self.warehouse, self.judge, self.thresholds
        if w.url is None and not w.url_env:
            raise ValueError("warehouse: set url_env (a variable holding the URL) or url")
        table = self.source_table or kind.default_table
        table_fields: Any = {kind.table_setting: table, kind.columns_setting: dict(self.columns)}
        warehouse = WarehouseResource(url=w.url if w.url else EnvVar(str(w.url_env)), **table_fields)
        llm = j.model.strip().lower() != "lexical"
        judge = JudgeResource(
            model=j.model,
            base_url=j.base_url,
            api_key=EnvVar(j.api_key_env) if llm and j.api_key_env else None,
            **j.model_dump(exclude={"model", "base_url", "api_key_env"}),
        )
        thresholds = AlertThresholdsResource(**t.model_dump(exclude={"blocking"}))
        return {"warehouse": warehouse, "judge": judge, "thresholds": thresholds}

    def build_defs(self, context: ComponentLoadContext) -> Definitions:
        kind = metric_kind(self.metric)
        name = self.asset_name or f"{kind.name}_scores"
        keys = {role: f"{name}__{role}" for role in ("warehouse", "judge", "thresholds")}
        auto = AutomationSettings(
            kind=self.automation.kind,
            cron=self.automation.cron,
            freshness_hours=self.automation.freshness_hours,
            sensor_running=self.automation.sensor_running,
        )
        partitions = build_daily_partitions(self.start_date)
        source_key = self.source_asset or self.source_table or kind.default_table
        scores = build_scores_asset(
            kind.name,
            partitions_def=partitions,
            name=name,
            source_key=source_key,
            resource_keys=keys,
            segments=self.segments or None,
            automation=automation_condition(auto),
            freshness=build_freshness_policy(auto),
            group_name=self.group_name,
        )
        checks = build_score_checks(
            scores,
            kind.name,
            partitions_def=partitions,
            blocking=self.thresholds.blocking,
            resource_keys=keys,
            name=f"{name}_checks",
        )
        sensors: list[Any] = []
        if auto.kind != "none":
            sensors.append(build_automation_sensor([scores], auto, name=f"{name}_automation"))
        if self.alerts.enabled:
            sensors += build_alert_sensors([scores.key], webhook_env=self.alerts.webhook_env, prefix=name)
        jobs, schedules = [], []
        if self.schedule.enabled:
            job = define_asset_job(f"{name}_job", selection=[scores], tags={"ctxprec/entry_point": "dagster"})
            status = DefaultScheduleStatus.RUNNING if self.schedule.running else DefaultScheduleStatus.STOPPED
            jobs.append(job)
            schedules.append(
                build_schedule_from_partitioned_job(
                    job, name=f"{name}_nightly", hour_of_day=0, minute_of_hour=0, default_status=status
                )
            )
        sources = [log_table_spec(kind, key=source_key, group_name=self.group_name)] if self.declare_source else []
        resources = self._resources(kind)
        return Definitions(
            assets=[*sources, scores],
            asset_checks=[checks],
            sensors=sensors,
            jobs=jobs,
            schedules=schedules,
            resources={keys[role]: res for role, res in resources.items()},
        )
