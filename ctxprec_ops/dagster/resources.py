"""Dagster resources: where the warehouse is, which judge scores, and the alert thresholds.

Secrets (``OPENAI_API_KEY``, a warehouse URL with a password) are passed as ``EnvVar`` so
Dagster stores the variable's *name* in run config, never its value; the resources below never
log them and the assets never put them in metadata.

``resources_for(deployment)`` returns the resource set of one deployment (``local`` or
``production``); ``definitions.py`` picks it from ``CTXPREC_DEPLOYMENT``.
"""

import os
from typing import Any

from dagster import ConfigurableResource, EnvVar
from pydantic import Field

from ctxprec_ops.config import DEFAULT_WAREHOUSE_URL, Settings
from ctxprec_ops.pipeline.formats import reads_spans, recorded_source
from ctxprec_ops.pipeline.kinds import metric_kind
from ctxprec_ops.warehouse.engine import display_url, require_sqlite_file

__all__ = [
    "WarehouseResource",
    "JudgeResource",
    "AlertThresholdsResource",
    "DEPLOYMENTS",
    "DEPLOYMENT_ENV",
    "current_deployment",
    "resources_for",
]

DEPLOYMENT_ENV = "CTXPREC_DEPLOYMENT"
DEPLOYMENTS = ("local", "production")


class WarehouseResource(ConfigurableResource):
    """The SQLAlchemy warehouse holding the retrieval logs and the ``ctxprec_*`` output tables."""

    url: str = Field(description="SQLAlchemy URL; pass EnvVar('CTXPREC_WAREHOUSE_URL') when it holds a password.")
    source_table: str = Field(default="retrieval_logs", description="Retrieval-log table (single-turn metric).")
    conversation_table: str = Field(default="conversation_logs", description="Conversation-log table (turn metric).")
    source_columns: dict[str, str] = Field(
        default_factory=dict, description="Column mapping of the retrieval-log table (CTXPREC_SOURCE_COLUMNS)."
    )
    conversation_columns: dict[str, str] = Field(
        default_factory=dict, description="Column mapping of the conversation-log table (CTXPREC_CONVERSATION_COLUMNS)."
    )
    segments: list[str] = Field(
        default_factory=list,
        description="Segment columns copied into the score rows (CTXPREC_SEGMENTS); the checks also check "
        "each of their values (per-segment regression, Holm-corrected) and the metadata carries their means.",
    )
    # a spans table as the single-turn metric's source (docs/traces.md)
    source_format: str = Field(default="rows", description="rows, openinference or otel-genai (CTXPREC_SOURCE_FORMAT).")
    stage: str = Field(default="retrieve", description="Spans: retrieve or rerank (CTXPREC_STAGE).")
    span_table: str = Field(default="spans", description="Spans table (CTXPREC_SPAN_TABLE).")
    span_columns: dict[str, str] = Field(
        default_factory=dict, description="Column mapping of the spans table (CTXPREC_SPAN_COLUMNS)."
    )
    expected_attribute: str | None = Field(default=None, description="Spans: attribute of the reference answer.")
    gold_table: str | None = Field(default=None, description="Spans: table of reference answers.")
    documents_table: str | None = Field(default=None, description="Spans: table of document texts by id.")

    def _spans(self, metric: str) -> bool:
        return self.source_format != "rows" and reads_spans(metric_kind(metric))

    def table_for(self, metric: str) -> str:
        """The input table a metric reads."""
        if self._spans(metric):
            return self.span_table
        return str(getattr(self, metric_kind(metric).table_setting))

    def columns_for(self, metric: str) -> dict[str, str]:
        """The column mapping of the table a metric reads."""
        if self._spans(metric):
            return dict(self.span_columns)
        return dict(getattr(self, metric_kind(metric).columns_setting))

    def traces_for(self, metric: str) -> dict[str, Any]:
        """The ``PipelineConfig`` span settings of a metric (none for a log table)."""
        if not self._spans(metric):
            return {}
        return {
            "source_format": self.source_format,
            "stage": self.stage,
            "expected_attribute": self.expected_attribute,
            "gold_table": self.gold_table,
            "documents_table": self.documents_table,
        }

    def recorded_table_for(self, metric: str) -> str:
        """The ``source_table`` a metric's scores are recorded under (the reranker stage's differs)."""
        from ctxprec_ops.pipeline.context import source_table_name

        name = source_table_name(self.table_for(metric), None)
        return recorded_source(name, self.stage) if self._spans(metric) else name

    def recorded_mapping_for(self, metric: str) -> str:
        """The ``mapping`` a metric's scores are recorded under: the fingerprint of its column
        mapping (``pipeline.mapping``)."""
        from ctxprec_ops.pipeline import PipelineConfig
        from ctxprec_ops.pipeline.mapping import mapping_of

        columns = self.columns_for(metric) or None
        return mapping_of(
            PipelineConfig(
                metric=metric, source_table=self.table_for(metric), columns=columns, **self.traces_for(metric)
            )
        )

    def display_url(self) -> str:
        """The URL with any password masked: safe for logs and metadata."""
        return display_url(self.url)

    def checked_url(self) -> str:
        """``url``, refused at once when it names a SQLite file that does not exist (never created)."""
        require_sqlite_file(self.url, setting="the warehouse resource's url (CTXPREC_WAREHOUSE_URL)")
        return self.url


class JudgeResource(ConfigurableResource):
    """The LLM judge (any OpenAI-compatible endpoint) or ``lexical``, the offline judge."""

    model: str = Field(default="lexical", description="OpenAI-compatible model name, or 'lexical'.")
    base_url: str | None = Field(
        default=None, description="Endpoint; None lets the openai client read OPENAI_BASE_URL."
    )
    api_key: str | None = Field(default=None, description="Pass EnvVar('OPENAI_API_KEY'); never logged.")
    timeout: float = Field(default=60.0, description="Seconds per judge request.")
    concurrency: int = Field(default=16, description="Judge requests in flight at most.")
    chunk_size: int = Field(default=500, description="Rows per chunk (one write transaction each).")
    max_cost: float | None = Field(default=None, description="USD cap on one partition run's judge spend.")
    max_retries: int = Field(default=6, description="Per-request retries of transient judge errors.")
    max_rpm: float | None = Field(
        default=None,
        description="Judge requests per minute at most (CTXPREC_MAX_RPM); this process's share of the provider quota.",
    )
    max_tpm: float | None = Field(default=None, description="Judge tokens per minute at most (CTXPREC_MAX_TPM).")
    sample_rate: float = Field(
        default=1.0,
        description="Share of each partition's rows to score, (0, 1]; the same rows every run (CTXPREC_SAMPLE_RATE).",
    )
    max_rows: int | None = Field(
        default=None, description="Score at most this many rows per partition (CTXPREC_MAX_ROWS)."
    )
    outage_tolerance: float = Field(
        default=600.0,
        description="Seconds a judge outage is waited out before the run's "
        "remaining rows fail (CTXPREC_OUTAGE_TOLERANCE).",
    )
    judge_mode: str = Field(
        default="sync",
        description="'sync' or 'batch' (OpenAI Batch API: half price; the "
        "materialization submits, then polls until the batch ends, up to its 24 h window; "
        "a terminated run's batch is resumed by the next materialization).",
    )
    batch_poll_seconds: float = Field(default=60.0, description="Batch mode: longest wait between two polls.")
    samples: int = Field(
        default=1,
        description="Self-consistency: sampled judge answers per node, odd; the majority verdict is kept "
        "(~N times the completion tokens; CTXPREC_JUDGE_SAMPLES).",
    )


class AlertThresholdsResource(ConfigurableResource):
    """Per-case pass threshold and the partition alert thresholds used by the asset checks."""

    threshold: float = Field(default=0.5, description="Per-case pass threshold (CTXPREC_THRESHOLD).")
    min_mean: float | None = Field(
        default=None, description="Alert when the partition mean is below (CTXPREC_MIN_MEAN)."
    )
    min_pass_rate: float | None = Field(
        default=None, description="Alert when the pass rate is below (CTXPREC_MIN_PASS_RATE)."
    )
    min_drop: float = Field(default=0.05, description="Regression: minimum drop of the mean below the baseline mean.")
    alpha: float = Field(default=0.01, description="Regression: one-sided Welch t-test significance level.")
    baseline_partitions: int = Field(
        default=7, description="Regression/volume: trailing scored partitions pooled as baseline."
    )
    volume_ratio: float = Field(default=0.5, description="Volume: warn when rows < ratio x the baseline median rows.")
    max_failure_rate: float | None = Field(
        default=0.2, description="Volume: warn when failed rows / rows exceeds this."
    )
    use_corrected: bool = Field(
        default=False,
        description="Threshold: min_mean compares the label-corrected mean where enough rows are labelled "
        "(CTXPREC_USE_CORRECTED).",
    )
    label_set: str = Field(
        default="default", description="The ctxprec_labels label set that corrects the figures (CTXPREC_LABEL_SET)."
    )

    def rule_kwargs(self) -> dict[str, Any]:
        """Keyword arguments of ``ctxprec_ops.monitoring.check_partition``."""
        return {
            "min_mean": self.min_mean,
            "min_pass_rate": self.min_pass_rate,
            "min_drop": self.min_drop,
            "alpha": self.alpha,
            "baseline_partitions": self.baseline_partitions,
            "volume_ratio": self.volume_ratio,
            "max_failure_rate": self.max_failure_rate,
            "use_corrected": self.use_corrected,
            "label_set": self.label_set,
        }


def _env_or(name: str, default: Any) -> Any:
    """``EnvVar(name)`` when the (OPENAI_*) variable is set (its value stays out of run config), else ``default``."""
    return EnvVar(name) if os.environ.get(name) else default


def current_deployment(settings: Settings | None = None) -> str:
    """The deployment named by ``CTXPREC_DEPLOYMENT`` (default ``local``)."""
    return (settings or Settings.from_env()).deployment


def _thresholds(settings: Settings) -> AlertThresholdsResource:
    return AlertThresholdsResource(
        threshold=settings.threshold,
        min_mean=settings.min_mean,
        min_pass_rate=settings.min_pass_rate,
        use_corrected=settings.use_corrected,
        label_set=settings.label_set,
    )


def _warehouse(settings: Settings, url: Any) -> WarehouseResource:
    return WarehouseResource(
        url=url,
        source_table=settings.source_table,
        conversation_table=settings.conversation_table,
        source_columns=settings.source_columns,
        conversation_columns=settings.conversation_columns,
        segments=list(settings.segments),
        source_format=settings.source_format,
        stage=settings.stage,
        span_table=settings.span_table,
        span_columns=settings.span_columns,
        expected_attribute=settings.expected_attribute,
        gold_table=settings.gold_table,
        documents_table=settings.documents_table,
    )


def _judge(settings: Settings, *, require_key: bool) -> JudgeResource:
    """The judge every deployment builds from ``Settings`` (CTXPREC_JUDGE and OPENAI_*)."""
    llm = settings.judge.strip().lower() != "lexical"
    key: Any = _env_or("OPENAI_API_KEY", None)
    if llm and require_key:
        key = EnvVar("OPENAI_API_KEY")  # an LLM judge needs a key (vLLM/Ollama accept any value)
    return JudgeResource(
        model=settings.judge,
        base_url=_env_or("OPENAI_BASE_URL", None),
        api_key=key if llm else None,
        concurrency=settings.concurrency,
        chunk_size=settings.chunk_size,
        max_rpm=settings.max_rpm,
        max_tpm=settings.max_tpm,
        outage_tolerance=settings.outage_tolerance,
        sample_rate=settings.sample_rate,
        max_rows=settings.max_rows,
        judge_mode=settings.judge_mode,
        batch_poll_seconds=settings.batch_poll_seconds,
        samples=settings.judge_samples,
    )


def _local(settings: Settings) -> dict[str, Any]:
    """SQLite ``sqlite:///ctxprec.db`` unless CTXPREC_WAREHOUSE_URL says otherwise; the judge
    from CTXPREC_JUDGE (``lexical``, the offline judge, when neither it nor OPENAI_API_KEY is set)."""
    return {
        "warehouse": _warehouse(
            settings,
            EnvVar("CTXPREC_WAREHOUSE_URL") if settings.is_set("CTXPREC_WAREHOUSE_URL") else DEFAULT_WAREHOUSE_URL,
        ),
        "judge": _judge(settings, require_key=False),
        "thresholds": _thresholds(settings),
    }


def _production(settings: Settings) -> dict[str, Any]:
    """Warehouse URL and judge credentials from the environment (required at run launch)."""
    return {
        "warehouse": _warehouse(settings, EnvVar("CTXPREC_WAREHOUSE_URL")),
        "judge": _judge(settings, require_key=True),
        "thresholds": _thresholds(settings),
    }


def resources_for(deployment: str | None = None, settings: Settings | None = None) -> dict[str, Any]:
    """The resource set of ``deployment`` (default: ``CTXPREC_DEPLOYMENT``), from ``Settings.from_env``."""
    settings = settings or Settings.from_env()
    deployment = deployment or settings.deployment
    if deployment not in DEPLOYMENTS:
        raise ValueError(f"unknown deployment {deployment!r}; choose from {', '.join(DEPLOYMENTS)}")
    return _local(settings) if deployment == "local" else _production(settings)
