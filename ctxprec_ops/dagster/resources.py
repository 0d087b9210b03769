"""Dagster resources: where the warehouse is, which judge scores, and the alert thresholds.

Secrets (``OPENAI_API_KEY``, a warehouse URL with a password) are passed as ``EnvVar`` so
Dagster stores the variable's *name* in run config, never its value; the resources below never
log them and the assets never put them in metadata.

``resources_for(deployment)`` returns the resource set of one deployment (``local`` or
``production``); ``definitions.py`` picks it from ``CTXPREC_DEPLOYMENT``. Every field but the
secrets is a setting, declared by name (``ctxprec_ops.config.fields.setting_field``): its default
and meaning are the declaration's, and a materialization resolves its run through ``Settings``
(``resource_settings``), so a setting no resource field sets still comes from its variable.
"""

from typing import Any

from dagster import ConfigurableResource, EnvVar
from pydantic import Field

from ctxprec_ops.config import Settings
from ctxprec_ops.config.fields import setting_field, settings_of, values_for
from ctxprec_ops.pipeline.formats import reads_spans
from ctxprec_ops.pipeline.kinds import metric_kind
from ctxprec_ops.secrets import redacted_fields
from ctxprec_ops.warehouse.engine import display_url, require_sqlite_file

__all__ = [
    "WarehouseResource",
    "JudgeResource",
    "AlertThresholdsResource",
    "DEPLOYMENTS",
    "resources_for",
    "resource_settings",
]

DEPLOYMENTS = Settings.choices("deployment")


class WarehouseResource(ConfigurableResource):
    """The SQLAlchemy warehouse holding the retrieval logs and the ``ctxprec_*`` output tables, and
    the input tables' settings (each field is a ``CTXPREC_*`` setting: ``config.fields``)."""

    def __repr_args__(self) -> Any:  # an asset's resources reach logs: no password, no key
        return redacted_fields(super().__repr_args__(), ("phoenix_api_key",))

    url: str = setting_field(
        "warehouse_url",
        required=True,
        description="SQLAlchemy URL of the warehouse; pass EnvVar('CTXPREC_WAREHOUSE_URL') when it holds a password.",
    )
    source_table: str = setting_field("source_table")
    conversation_table: str = setting_field("conversation_table")
    source_columns: dict[str, str] = setting_field("source_columns")
    conversation_columns: dict[str, str] = setting_field("conversation_columns")
    segments: list[str] = setting_field(
        "segments",
        description="Segment columns copied into the score rows (CTXPREC_SEGMENTS); the checks also check "
        "each of their values (per-segment regression, Holm-corrected) and the metadata carries their means.",
    )
    # a spans table as the single-turn metric's source (docs/traces.md)
    source_format: str = setting_field("source_format")
    stage: str = setting_field("stage")
    span_table: str = setting_field("span_table")
    span_columns: dict[str, str] = setting_field("span_columns")
    expected_attribute: str | None = setting_field("expected_attribute")
    gold_table: str | None = setting_field("gold_table")
    documents_table: str | None = setting_field("documents_table")
    claim_lease_seconds: float | None = setting_field("claim_lease_seconds")
    # Arize Phoenix: the spans' source when no input table is configured, and the write-back target
    phoenix_url: str | None = setting_field("phoenix_url")
    phoenix_project: str = setting_field("phoenix_project")
    phoenix_api_key: str | None = setting_field(
        "phoenix_api_key", description="Phoenix API key; pass EnvVar('CTXPREC_PHOENIX_API_KEY'), never logged."
    )
    phoenix_document_annotation: str = setting_field("phoenix_document_annotation")
    phoenix_span_annotation: str = setting_field("phoenix_span_annotation")
    write_back: str | None = setting_field("write_back")

    def settings(self) -> Settings:
        """The settings these fields hold (over the ``CTXPREC_*`` variables for the unset ones)."""
        return Settings.from_env(**settings_of(self))

    def _spans(self, metric: str) -> bool:
        return self.source_format != "rows" and reads_spans(metric_kind(metric))

    def table_for(self, metric: str) -> str:
        """The input table a metric reads."""
        return self.span_table if self._spans(metric) else str(getattr(self, metric_kind(metric).table_setting))

    def columns_for(self, metric: str) -> dict[str, str]:
        """The column mapping of the table a metric reads."""
        return dict(self.span_columns if self._spans(metric) else getattr(self, metric_kind(metric).columns_setting))

    def recorded_table_for(self, metric: str) -> str:
        """The ``source_table`` a metric's scores are recorded under (the reranker stage's differs)."""
        return self.settings().recorded_source(metric_kind(metric))

    def recorded_mapping_for(self, metric: str) -> str:
        """The ``mapping`` a metric's scores are recorded under: the fingerprint of its column
        mapping (``pipeline.mapping``)."""
        return self.settings().mapping_for(metric_kind(metric))

    def display_url(self) -> str:
        """The URL with any password masked: safe for logs and metadata."""
        return display_url(self.url)

    def checked_url(self) -> str:
        """``url``, refused at once when it names a SQLite file that does not exist (never created)."""
        require_sqlite_file(self.url, setting="the warehouse resource's url (CTXPREC_WAREHOUSE_URL)")
        return self.url


class JudgeResource(ConfigurableResource):
    """The LLM judge (any OpenAI-compatible endpoint) or ``lexical``, the offline judge, and the
    settings of its calls (each field is a ``CTXPREC_*`` setting: ``config.fields``)."""

    def __repr_args__(self) -> Any:  # an asset's resources reach logs: no password, no key
        return redacted_fields(super().__repr_args__(), ("api_key",))

    model: str | None = setting_field(
        "judge",
        default=None,
        description="OpenAI-compatible model name, or 'lexical'; unset: the configured default judge "
        "(CTXPREC_JUDGE, else gpt-4o-mini with OPENAI_API_KEY, else lexical).",
    )
    base_url: str | None = setting_field(
        "openai_base_url", description="Endpoint; unset: OPENAI_BASE_URL (as the openai client reads it), else OpenAI."
    )
    api_key: str | None = Field(default=None, description="Pass EnvVar('OPENAI_API_KEY'); never logged.")
    timeout: float = setting_field("judge_timeout")
    concurrency: int = setting_field("concurrency")
    chunk_size: int | None = setting_field("chunk_size")
    max_nodes_per_call: int = setting_field("max_nodes_per_call")
    max_cost: float | None = setting_field("max_cost")
    max_retries: int = setting_field("judge_max_retries")
    retry_initial_wait: float = setting_field("retry_initial_wait")
    retry_max_wait: float = setting_field("retry_max_wait")
    max_rpm: float | None = setting_field("max_rpm")
    max_tpm: float | None = setting_field("max_tpm")
    sample_rate: float = setting_field("sample_rate")
    max_rows: int | None = setting_field("max_rows")
    outage_tolerance: float = setting_field("outage_tolerance")
    judge_mode: str = setting_field(
        "judge_mode",
        description="'sync' or 'batch' (OpenAI Batch API: half price; the materialization submits, then polls "
        "until the batch ends, up to its 24 h window; a terminated run's batch is resumed by the next "
        "materialization) (CTXPREC_JUDGE_MODE).",
    )
    batch_poll_seconds: float = setting_field("batch_poll_seconds")
    batch_retry: str = setting_field("batch_retry")
    judge_samples: int = setting_field("judge_samples")
    samples: int | None = Field(default=None, description="Deprecated: judge_samples (kept for existing configs).")
    judge_multimodal: bool | None = setting_field("judge_multimodal")
    prices: dict[str, list[float]] = setting_field("prices")
    # a judge cascade (docs/cascade.md): the strong judge and the threshold or the target agreement
    escalate_to: str | None = setting_field("escalate_to")
    escalate_below: float | None = setting_field("escalate_below")
    target_agreement: float | None = setting_field("target_agreement")
    calibration_nodes: int = setting_field("calibration_nodes")
    recalibrate: bool = setting_field("recalibrate")


class AlertThresholdsResource(ConfigurableResource):
    """Per-case pass threshold and the alert rules the asset checks apply (each field is a
    ``CTXPREC_*`` setting: ``config.fields``)."""

    threshold: float = setting_field("threshold")
    min_mean: float | None = setting_field("min_mean")
    min_pass_rate: float | None = setting_field("min_pass_rate")
    min_drop: float = setting_field("min_drop")
    alpha: float = setting_field("alpha")
    baseline_partitions: int = setting_field("baseline_partitions")
    volume_ratio: float = setting_field("volume_ratio")
    max_failure_rate: float | None = setting_field("max_failure_rate")
    use_corrected: bool = setting_field("use_corrected")
    label_set: str = setting_field("label_set")

    def rule_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``ctxprec_ops.monitoring.check_partition`` (checked against the declaration)."""
        s = Settings.from_env(**settings_of(self))
        names = ("min_mean", "min_pass_rate", "min_drop", "alpha", "baseline_partitions", "volume_ratio")
        return {name: getattr(s, name) for name in (*names, "max_failure_rate", "use_corrected", "label_set")}


def resource_settings(*resources: ConfigurableResource, **more: Any) -> Settings:
    """The settings a set of resources holds (the ``CTXPREC_*`` variables for what none of them
    sets), ``more`` (fields) on top: what a materialization runs with."""
    values: dict[str, Any] = {}
    for resource in resources:
        values.update(settings_of(resource))
        if isinstance(resource, JudgeResource) and resource.samples is not None:
            values["judge_samples"] = resource.samples  # the deprecated name
    values.update({k: v for k, v in more.items() if v is not None})
    return Settings.from_env(**values)


def _thresholds(settings: Settings) -> AlertThresholdsResource:
    return AlertThresholdsResource(**values_for(AlertThresholdsResource, settings))


def _warehouse(settings: Settings, url: Any) -> WarehouseResource:
    return WarehouseResource(**{**values_for(WarehouseResource, settings), "url": url})


def _judge(settings: Settings, *, require_key: bool) -> JudgeResource:
    """The judge every deployment builds from ``Settings`` (CTXPREC_JUDGE and OPENAI_*); the
    OPENAI_* values go in as ``EnvVar``s, so their values stay out of run config."""
    llm = settings.judge.strip().lower() != "lexical"
    key_var, url_var = Settings.variable("openai_api_key"), Settings.variable("openai_base_url")
    key: Any = EnvVar(key_var) if settings.openai_api_key is not None else None
    if llm and require_key:
        key = EnvVar(key_var)  # an LLM judge needs a key (vLLM/Ollama accept any value)
    values = values_for(JudgeResource, settings)
    values.update(
        base_url=EnvVar(url_var) if settings.openai_base_url is not None else None,
        api_key=key if llm else None,
    )
    return JudgeResource(**values)


def _local(settings: Settings) -> dict[str, Any]:
    """SQLite ``sqlite:///ctxprec.db`` unless CTXPREC_WAREHOUSE_URL says otherwise; the judge
    from CTXPREC_JUDGE (``lexical``, the offline judge, when neither it nor OPENAI_API_KEY is set)."""
    url_var = Settings.variable("warehouse_url")
    return {
        "warehouse": _warehouse(settings, EnvVar(url_var) if settings.is_set(url_var) else settings.warehouse_url),
        "judge": _judge(settings, require_key=False),
        "thresholds": _thresholds(settings),
    }


def _production(settings: Settings) -> dict[str, Any]:
    """Warehouse URL and judge credentials from the environment (required at run launch)."""
    return {
        "warehouse": _warehouse(settings, EnvVar(Settings.variable("warehouse_url"))),
        "judge": _judge(settings, require_key=True),
        "thresholds": _thresholds(settings),
    }


def resources_for(deployment: str | None = None, settings: Settings | None = None) -> dict[str, Any]:
    """The resource set of ``deployment`` (default: ``CTXPREC_DEPLOYMENT``), from ``settings``
    (default: the environment's)."""
    settings = settings or Settings.from_env()
    deployment = deployment or settings.deployment
    if deployment not in DEPLOYMENTS:
        raise ValueError(f"unknown deployment {deployment!r}; choose from {', '.join(DEPLOYMENTS)}")
    return _local(settings) if deployment == "local" else _production(settings)
