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

Every other attribute is a setting (``ctxprec_ops.config.Settings``): the ``judge:`` and
``thresholds:`` blocks are the resources' fields, the others name their setting; what the YAML
leaves unset comes from its ``CTXPREC_*`` variable, as for every entry point.
"""

from typing import Any

from dagster import (
    Component,
    ComponentLoadContext,
    ConfigurableResource,
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
from pydantic import Field, create_model

from ctxprec_ops.config import Settings
from ctxprec_ops.config.fields import setting_field, settings_of, values_for
from ctxprec_ops.pipeline.kinds import MetricKind, metric_kind

from .assets import build_scores_asset
from .automation import AUTOMATION_KINDS, AutomationSettings, automation_condition, build_automation_sensor
from .automation import freshness_policy as build_freshness_policy
from .checks import build_score_checks
from .partitions import build_daily_partitions
from .resources import AlertThresholdsResource, JudgeResource, WarehouseResource
from .sensors import WEBHOOK_ENV, build_alert_sensors
from .sources import GROUP, log_table_spec

__all__ = ["ContextualPrecisionComponent", "ContextualPrecisionScaffolder"]


def _from_resource(name: str, resource: type[ConfigurableResource], drop: tuple[str, ...] = (), **more: Any) -> Any:
    """A YAML block with the fields of ``resource`` (the settings, their defaults and meanings), less
    ``drop``, plus ``more``: the Component's schema is the resource's, so the two never drift."""
    fields: dict[str, Any] = {k: (f.annotation, f) for k, f in resource.model_fields.items() if k not in drop}
    return create_model(name, __base__=Model, **fields, **more)


#: the ``warehouse:`` block: where the URL is (a variable, or a literal URL without a password) and
#: ``WarehouseResource``'s settings (the metric's own table and mapping: ``source_table``/``columns``)
WarehouseModel = _from_resource(
    "WarehouseModel",
    WarehouseResource,
    drop=("url",),
    url_env=(
        str | None,
        Field(default=Settings.variable("warehouse_url"), description="Variable holding the SQLAlchemy URL."),
    ),
    url=(str | None, Field(default=None, description="A literal URL without a password (e.g. sqlite:///ctxprec.db).")),
)
#: the ``judge:`` block: ``JudgeResource``'s settings; the key is named by a variable (``api_key_env``)
JudgeModel = _from_resource(
    "JudgeModel",
    JudgeResource,
    drop=("api_key",),
    api_key_env=(str | None, Field(default="OPENAI_API_KEY", description="Variable holding the API key.")),
)
#: the ``thresholds:`` block: ``AlertThresholdsResource``'s settings, and whether a breach blocks
ThresholdsModel = _from_resource(
    "ThresholdsModel",
    AlertThresholdsResource,
    blocking=(bool, setting_field("blocking_checks", description="A threshold breach fails the run.")),
)


class AutomationModel(Model):
    kind: str = setting_field("dagster_automation", description=f"One of {', '.join(AUTOMATION_KINDS)}.")
    cron: str = setting_field("dagster_automation_cron")
    freshness_hours: float | None = setting_field("dagster_freshness_hours")
    sensor_running: bool = setting_field("automation_running", description="Start the automation sensor running.")


class ScheduleModel(Model):
    enabled: bool = Field(default=False, description="Add a nightly schedule (00:00 UTC, yesterday's partition).")
    running: bool = setting_field("schedule_running")


class AlertsModel(Model):
    enabled: bool = Field(default=False, description="Add the run-failure / check-failure webhook sensors.")
    webhook_env: str = Field(default=WEBHOOK_ENV, description="Variable holding the webhook URL.")


class ContextualPrecisionScaffolder(Scaffolder):
    """``dg scaffold defs ctxprec_ops.dagster.ContextualPrecisionComponent NAME``: a defs.yaml to edit."""

    def scaffold(self, request: ScaffoldRequest) -> None:
        scaffold_component(
            request,
            {
                "metric": "contextual_precision",
                "source_table": Settings.default("source_table"),
                "columns": {},
                "segments": [],
                "start_date": Settings.default("start_date"),
                "warehouse": {"url_env": Settings.variable("warehouse_url")},
                "judge": {"model": "lexical", "api_key_env": "OPENAI_API_KEY"},
                "thresholds": {name: Settings.default(name) for name in ("threshold", "min_mean", "min_pass_rate")},
                "automation": {
                    "kind": Settings.default("dagster_automation"),
                    "cron": Settings.default("dagster_automation_cron"),
                    "sensor_running": Settings.default("automation_running"),
                },
                "schedule": {"enabled": False},
                "alerts": {"enabled": False, "webhook_env": WEBHOOK_ENV},
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
    start_date: str = setting_field("start_date")
    group_name: str = GROUP
    warehouse: WarehouseModel = Field(default_factory=lambda: WarehouseModel())  # type: ignore[valid-type]
    judge: JudgeModel = Field(default_factory=lambda: JudgeModel())  # type: ignore[valid-type]
    thresholds: ThresholdsModel = Field(default_factory=lambda: ThresholdsModel())  # type: ignore[valid-type]
    automation: AutomationModel = Field(default_factory=lambda: AutomationModel())
    schedule: ScheduleModel = Field(default_factory=lambda: ScheduleModel())
    alerts: AlertsModel = Field(default_factory=lambda: AlertsModel())

    def settings(self, kind: MetricKind) -> Settings:
        """The settings this YAML gives, over the ``CTXPREC_*`` variables for what it leaves unset."""
        given: dict[str, Any] = {}
        for block in (self.warehouse, self.judge, self.thresholds, self.automation, self.schedule):
            given.update(settings_of(block, given_only=True))
        samples = getattr(self.judge, "samples", None)
        if samples is not None:
            given["judge_samples"] = samples  # the deprecated name
        if "start_date" in self.model_fields_set:
            given["start_date"] = self.start_date
        if self.source_table:
            given[kind.table_setting] = self.source_table
        if self.columns:
            given[kind.columns_setting] = dict(self.columns)
        return Settings.from_env(**given)

    def _resources(self, kind: MetricKind, settings: Settings) -> dict[str, Any]:
        w: Any = self.warehouse  # models made from the resources' fields (typed Any)
        j_: Any = self.judge
        if w.url is None and not w.url_env:
            raise ValueError("warehouse: set url_env (a variable holding the URL) or url")
        warehouse = WarehouseResource(
            **{**values_for(WarehouseResource, settings), "url": w.url if w.url else EnvVar(str(w.url_env))}
        )
        llm = settings.judge.strip().lower() != "lexical"
        judge_values = values_for(JudgeResource, settings)
        if "base_url" not in j_.model_fields_set and settings.openai_base_url is not None:
            judge_values["base_url"] = EnvVar(Settings.variable("openai_base_url"))  # its value stays out of run config
        key_env = j_.api_key_env
        judge = JudgeResource(**judge_values, api_key=EnvVar(key_env) if llm and key_env else None)
        thresholds = AlertThresholdsResource(**values_for(AlertThresholdsResource, settings))
        return {"warehouse": warehouse, "judge": judge, "thresholds": thresholds}

    def build_defs(self, context: ComponentLoadContext) -> Definitions:
        kind = metric_kind(self.metric)
        settings = self.settings(kind)
        name = self.asset_name or f"{kind.name}_scores"
        keys = {role: f"{name}__{role}" for role in ("warehouse", "judge", "thresholds")}
        auto = AutomationSettings.from_settings(settings)
        partitions = build_daily_partitions(settings.start_date)
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
            blocking=settings.blocking_checks,
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
            status = DefaultScheduleStatus.RUNNING if settings.schedule_running else DefaultScheduleStatus.STOPPED
            jobs.append(job)
            schedules.append(
                build_schedule_from_partitioned_job(
                    job, name=f"{name}_nightly", hour_of_day=0, minute_of_hour=0, default_status=status
                )
            )
        sources = [log_table_spec(kind, key=source_key, group_name=self.group_name)] if self.declare_source else []
        resources = self._resources(kind, settings)
        return Definitions(
            assets=[*sources, scores],
            asset_checks=[checks],
            sensors=sensors,
            jobs=jobs,
            schedules=schedules,
            resources={keys[role]: res for role, res in resources.items()},
        )
