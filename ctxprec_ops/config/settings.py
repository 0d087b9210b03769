"""``Settings``: every setting of ctxprec-ops, declared once — its ``CTXPREC_*`` variable, type,
default, what it allows and what it means — and the only reader of the environment.

A *run setting* (``_run``) is a ``PipelineConfig`` field: its default and bounds are that field's
(``pipeline/config.py``, where the library itself uses them), taken here by name, so the variable,
the CLI flag, the Airflow param, the Dagster resource field and ``PipelineConfig`` can never
disagree. The alert rules' settings (``_rule``) are ``AlertRules`` fields in the same way. The
others are declared here in full. ``docs/configuration.md`` is generated from this class
(``scripts/configuration_doc.py``).

Every face resolves its run the same way: ``Settings.from_env(**its_arguments)`` (the environment,
with the face's own values on top, each checked against the declaration; a bad one is a
``SettingsError`` naming the variable or the argument), then ``.pipeline_config(...)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from functools import cache
from typing import TYPE_CHECKING, Any

from pydantic import PrivateAttr, SecretStr, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic_settings import BaseSettings, PydanticBaseSettingsSource, SettingsConfigDict

from ..judge import defaults
from ..pipeline.bounds import Bounds
from ..pipeline.config import CHUNK_SIZE_DEFAULTS, PipelineConfig
from ..pipeline.formats import DEFAULT_SPAN_TABLE
from ..pipeline.kinds import METRIC_KINDS
from ..secrets import redacted_fields, register_secret
from .declare import Environment, reading
from .declare import rule_setting as _rule
from .declare import run_setting as _run
from .declare import setting as _setting
from .parsing import AutoBool, Bool, ColumnList, ColumnMap, CommaList, Day, OptionalBool, Prices, settings_error

if TYPE_CHECKING:
    from ..monitoring.sinks import AlertSink
    from ..pipeline.kinds import MetricKind

__all__ = ["ENV_PREFIX", "SECTIONS", "Settings"]

ENV_PREFIX = "CTXPREC_"

#: section -> its title in docs/configuration.md, in order
SECTIONS = {
    "warehouse": "Warehouse and input tables",
    "traces": "Traces (a spans table as the source)",
    "phoenix": "Arize Phoenix (spans read from it, verdicts written back)",
    "judge": "Judge",
    "cascade": "Judge cascade (a strong judge for the cheap judge's unsure verdicts)",
    "openai": "OpenAI client (read as the openai client reads them)",
    "limits": "Quota, sampling and spend",
    "retries": "Retries and outages",
    "batch": "Batch API",
    "alerts": "Thresholds and alert rules",
    "delivery": "Alert delivery (webhook, e-mail)",
    "orchestrators": "Both orchestrators",
    "dagster": "Dagster",
    "airflow": "Airflow",
}

#: setting naming an input table -> the table its metric kinds read by default (the registry's)
_DEFAULT_TABLES = {k.table_setting: k.default_table for k in METRIC_KINDS.values()}


#: the settings holding a secret whole
SECRET_SETTINGS = ("openai_api_key", "azure_openai_api_key", "smtp_password", "alert_webhook", "phoenix_api_key")


class Settings(BaseSettings):
    """Every setting, with its variable (``CTXPREC_`` + the field's name in capitals unless it
    says otherwise), type, default, bounds and description. Build with ``Settings.from_env()``."""

    #: the fields a face gave (``from_env``'s overrides)
    _overrides: frozenset[str] = PrivateAttr(default=frozenset())

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX,
        case_sensitive=False,
        env_ignore_empty=True,
        extra="forbid",
        populate_by_name=True,
        allow_inf_nan=False,
        frozen=True,
    )

    # -- warehouse and input tables -----------------------------------------------------------
    warehouse_url: str = _run("warehouse", "SQLAlchemy URL of the warehouse", "warehouse")
    source_table: str = _setting(
        _DEFAULT_TABLES["source_table"], "retrieval-log table (`table` or `schema.table`)", "warehouse"
    )
    conversation_table: str = _setting(_DEFAULT_TABLES["conversation_table"], "conversation-log table", "warehouse")
    source_columns: ColumnMap = _setting(
        {}, 'column mapping of the retrieval-log table, JSON (`{"retrieval_context": "contexts"}`)', "warehouse"
    )
    conversation_columns: ColumnMap = _setting({}, "column mapping of the conversation-log table, JSON", "warehouse")
    segments: ColumnList = _run(
        "segments",
        'segment columns copied into the score rows, JSON list (`["tenant", "retriever_version"]`)',
        "warehouse",
        default=[],
    )
    claim_lease_seconds: float | None = _run(
        "claim_lease_seconds",
        "seconds a claim on the rows being judged (a row of `ctxprec_claims`) lasts without renewal, renewed "
        "every third of that by its holder; a holder known to have died is taken over sooner (unset: 10 minutes)",
        "warehouse",
    )
    # -- traces (docs/traces.md) ---------------------------------------------------------------
    source_format: str = _run(
        "source_format",
        "input format: `rows` (a retrieval-log table) or a spans table of `openinference` / `otel-genai` "
        "traces (one case per retriever span)",
        "traces",
    )
    stage: str = _run(
        "stage", "spans: score the `retrieve` (retriever spans) or the `rerank` stage (reranker spans)", "traces"
    )
    span_table: str = _setting(DEFAULT_SPAN_TABLE, "spans table (span source formats)", "traces")
    span_columns: ColumnMap = _setting(
        {},
        'column mapping of the spans table, JSON (`{"span_id": "SpanId", "attributes": "SpanAttributes"}`)',
        "traces",
    )
    expected_attribute: str | None = _run(
        "expected_attribute", "spans: the span attribute holding the reference answer", "traces"
    )
    gold_table: str | None = _run(
        "gold_table",
        "spans: table of reference answers (`expected_output` by `trace_id` or `input`); with neither this "
        "nor an attribute, scoring is reference-free (the answer is the reference)",
        "traces",
    )
    documents_table: str | None = _run(
        "documents_table", "spans: table of document texts (`id`, `content`) for spans that record ids only", "traces"
    )
    # -- Arize Phoenix -------------------------------------------------------------------------
    phoenix_url: str | None = _run(
        "phoenix_url",
        "Phoenix server (`http://host:6006`): without a configured input table the day's retriever spans of "
        "the project are read from it; the target of `CTXPREC_WRITE_BACK=phoenix`",
        "phoenix",
    )
    phoenix_project: str = _run("phoenix_project", "Phoenix project the spans are read from", "phoenix")
    phoenix_api_key: str | None = _run("phoenix_api_key", "Phoenix API key (never logged)", "phoenix", secret=True)
    phoenix_document_annotation: str = _run(
        "phoenix_document_annotation", "name of the per-document verdict annotations written back", "phoenix"
    )
    phoenix_span_annotation: str = _run(
        "phoenix_span_annotation", "name of the per-span score annotations written back", "phoenix"
    )
    write_back: str | None = _run(
        "write_back",
        "`phoenix`: write each scored span's node verdicts and score back to the Phoenix server",
        "phoenix",
    )
    # -- judge ---------------------------------------------------------------------------------
    judge: str = _setting(
        "",
        "judge: an OpenAI-compatible model name, or `lexical` (the offline judge)",
        "judge",
        doc_default=f"`{defaults.LLM_JUDGE}` if `OPENAI_API_KEY` is set, else `lexical`",
    )
    judge_timeout: float = _run("judge_timeout", "seconds one judge request may take", "judge")
    judge_max_retries: int = _run(
        "max_retries", "retries of a judge request that failed transiently (429, 5xx, timeouts)", "judge"
    )
    concurrency: int = _run("concurrency", "judge requests in flight at most", "judge")
    chunk_size: int | None = _run(
        "chunk_size", "rows per chunk (one write transaction each)", "judge", doc_default=CHUNK_SIZE_DEFAULTS
    )
    max_nodes_per_call: int = _run(
        "max_nodes_per_call", "nodes one judge call judges at most (longer lists are judged in groups)", "judge"
    )
    judge_samples: int = _run(
        "judge_samples",
        "self-consistency: sampled judge answers per node, odd (majority verdict; ~N times the completion "
        "tokens; 1 = one answer at temperature 0)",
        "judge",
    )
    judge_multimodal: OptionalBool = _run(
        "judge_multimodal",
        "whether the judge model reads images (unset: told by its name, e.g. gpt-4o-mini does)",
        "judge",
    )
    prices: Prices = _run(
        "prices",
        'USD per 1M tokens, JSON (`{"model": [input, output]}`; batch price: key `model@batch`, default half)',
        "judge",
        default={},
    )
    # -- judge cascade (docs/cascade.md) ----------------------------------------------------------
    escalate_to: str | None = _run(
        "escalate_to", "the strong judge the cheap judge's (CTXPREC_JUDGE) unsure node verdicts go to", "cascade"
    )
    escalate_below: float | None = _run(
        "escalate_below", "re-judge the cheap verdicts whose confidence is below this threshold C", "cascade"
    )
    target_agreement: float | None = _run(
        "target_agreement",
        "choose C so that agreement with the strong judge is at least this (a one-sided 95% lower bound on a "
        "calibration sample)",
        "cascade",
    )
    calibration_nodes: int = _run("calibration_nodes", "nodes of the calibration sample, judged by both", "cascade")
    recalibrate: Bool = _run("recalibrate", "choose C again even when a stored calibration fits the run", "cascade")
    # -- the OpenAI client's own variables ------------------------------------------------------
    openai_api_key: SecretStr | None = _setting(
        None,
        "API key of the LLM judge; its presence makes `gpt-4o-mini` the default judge",
        "openai",
        alias="OPENAI_API_KEY",
        secret=True,
    )
    azure_openai_api_key: SecretStr | None = _setting(
        None, "API key of an Azure OpenAI judge", "openai", alias="AZURE_OPENAI_API_KEY", secret=True
    )
    openai_base_url: str | None = _setting(
        None,
        "the judge's OpenAI-compatible endpoint, e.g. http://localhost:8000/v1 for vLLM (unset: OpenAI)",
        "openai",
        alias="OPENAI_BASE_URL",
    )
    # -- quota, sampling and spend --------------------------------------------------------------
    max_rpm: float | None = _run(
        "max_rpm", "judge requests per minute at most, kept before sending (this process's share of the quota)",
        "limits",
    )  # fmt: skip
    max_tpm: float | None = _run(
        "max_tpm", "judge tokens per minute at most (estimated prompt + completion allowance)", "limits"
    )
    sample_rate: float = _run(
        "sample_rate",
        "share of each partition's rows to score; the same rows on every run (a hash of the log id)",
        "limits",
    )
    max_rows: int | None = _run(
        "max_rows", "score at most this many rows per partition (the sample's lowest hashes)", "limits"
    )
    max_cost: float | None = _run(
        "max_cost",
        "USD cap on one partition run's judge spend; rows it could not afford are recorded as "
        "`budget_exhausted` failures (a later run picks them up)",
        "limits",
    )
    # -- retries and outages --------------------------------------------------------------------
    retry_initial_wait: float = _run("retry_initial_wait", "seconds before the first judge retry", "retries")
    retry_max_wait: float = _run(
        "retry_max_wait", "longest wait between judge retries (seconds); also caps a server's `Retry-After`", "retries"
    )
    outage_tolerance: float = _run(
        "outage_tolerance",
        "seconds a judge outage is waited out (pause, probe, resume) before the run's remaining rows fail; "
        "30 s when the judge never answered",
        "retries",
    )
    # -- batch API ------------------------------------------------------------------------------
    judge_mode: str = _run(
        "judge_mode", "`sync` (on-demand calls) or `batch` (OpenAI Batch API: half price, results within 24 h)",
        "batch",
    )  # fmt: skip
    batch_poll_seconds: float = _run(
        "batch_poll_seconds",
        "batch mode: longest wait between two polls of a batch (seconds; polls start at 1 s and back off)",
        "batch",
    )
    batch_retry: str = _run(
        "batch_retry",
        "batch mode: requests a batch did not answer usably go to the next batch (`batch`, half price, "
        "another wait) or out at once as sync calls (`sync`, full price)",
        "batch",
    )
    # -- thresholds and alert rules -------------------------------------------------------------
    threshold: float = _run("threshold", "per-case pass threshold", "alerts")
    min_mean: float | None = _rule("min_mean", "partition alert: minimum mean score (unset: no such alert)")
    min_pass_rate: float | None = _rule("min_pass_rate", "partition alert: minimum pass rate (unset: no such alert)")
    min_drop: float = _rule("min_drop", "regression alert: smallest drop of the mean below the baseline's mean")
    alpha: float = _rule("alpha", "regression alert: significance level of the one-sided Welch t-test")
    baseline_partitions: int = _rule(
        "baseline_partitions", "regression and volume: trailing scored partitions pooled as the baseline"
    )
    volume_ratio: float = _rule("volume_ratio", "volume alert: rows below this share of the baseline's median rows")
    max_failure_rate: float | None = _rule("max_failure_rate", "volume alert: failed rows above this share of the rows")
    use_corrected: Bool = _rule(
        "use_corrected", "threshold alert: min_mean compares the label-corrected mean where enough rows are labelled"
    )
    label_set: str = _rule("label_set", "the ctxprec_labels label set whose labelled rows correct the figures")
    # -- alert delivery -------------------------------------------------------------------------
    alert_webhook: str | None = _setting(None, "URL that receives alerts as JSON (POST)", "delivery", secret=True)
    alert_email_to: CommaList = _setting([], "comma-separated alert e-mail recipients", "delivery")
    smtp_host: str = _setting("localhost", "SMTP server for alert e-mail", "delivery")
    smtp_port: int = _setting(587, "SMTP port", "delivery", ge=1, le=65535, integer=True)
    smtp_from: str = _setting("ctxprec@localhost", "sender address of alert e-mail", "delivery")
    smtp_user: str | None = _setting(None, "SMTP login user", "delivery")
    smtp_password: str | None = _setting(None, "SMTP login password", "delivery", secret=True)
    smtp_starttls: AutoBool = _setting("auto", "STARTTLS: `auto` (when offered), or a boolean", "delivery")
    smtp_ssl: Bool = _setting(False, "SMTP over implicit TLS (port 465)", "delivery")
    # -- both orchestrators ---------------------------------------------------------------------
    start_date: Day = _setting(
        "2025-01-01", "first daily partition (Dagster partitions, Airflow DAGs)", "orchestrators"
    )
    # -- Dagster --------------------------------------------------------------------------------
    deployment: str = _setting(
        "local", "resource set: `local` or `production`", "dagster", choices=("local", "production")
    )
    dagster_retry_delay: float = _setting(30.0, "RetryPolicy: seconds before the first retry", "dagster", ge=0)
    dagster_max_retries: int = _setting(3, "RetryPolicy: retries", "dagster", ge=0, integer=True)
    blocking_checks: Bool = _setting(True, "a failed threshold check blocks downstream assets", "dagster")
    schedule_running: Bool = _setting(False, "the nightly schedule starts running", "dagster")
    dagster_automation: str = _setting(
        "eager",
        "when a scores asset is requested: `eager` (its log table reported new data), `cron` (after each "
        "tick of CTXPREC_DAGSTER_AUTOMATION_CRON), `on_cron` (after a tick, once new data came) or `none`",
        "dagster",
        choices=("eager", "cron", "on_cron", "none"),
    )
    dagster_automation_cron: str = _setting("0 0 * * *", "the automation's cron schedule (UTC)", "dagster")
    dagster_freshness_hours: float | None = _setting(
        None, "FreshnessPolicy: flag a scores asset not materialized for this many hours (unset: none)", "dagster",
        gt=1,
    )  # fmt: skip
    automation_running: Bool = _setting(False, "the automation sensor starts running", "dagster")
    # -- Airflow --------------------------------------------------------------------------------
    airflow_max_active_chunks: int = _setting(
        4, "chunk tasks of one DAG running at once (all runs)", "airflow", ge=1, integer=True
    )
    airflow_pool: str | None = _setting(None, "pool of the chunk tasks (one judge quota)", "airflow")
    airflow_retries: int = _setting(
        3, "retries of every task (alerts are never retried)", "airflow", ge=0, integer=True
    )
    airflow_retry_delay: float = _setting(
        60.0, "seconds before a task's first retry (doubles each retry)", "airflow", ge=0
    )
    airflow_max_retry_delay: float = _setting(1800.0, "longest retry delay (seconds)", "airflow", ge=0)
    airflow_on_failure: CommaList = _setting([], "extra failure callbacks, comma-separated `module:attr`", "airflow")
    airflow_on_new_logs: Bool = _setting(
        False,
        "load the asset-triggered DAGs (`*_on_new_logs`: score a day when an upstream DAG reports new logs) "
        "where the DAG files are parsed",
        "airflow",
    )

    # -- parsing and checks ----------------------------------------------------------------------
    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        """A face's values, then the variables; no ``.env`` file (load it into the shell)."""
        return init_settings, Environment(settings_cls)

    @model_validator(mode="after")
    def _default_judge(self) -> Settings:
        """No judge named: ``gpt-4o-mini`` when an OpenAI key is set, else ``lexical`` (the default
        is filled in place: ``judge`` stays unset for ``is_set``)."""
        if not self.judge.strip():
            self.__dict__["judge"] = defaults.LLM_JUDGE if self.openai_api_key else "lexical"
        return self

    def __repr_args__(self) -> Any:
        """As pydantic shows them, the secrets masked and every text redacted (a URL's password)."""
        return redacted_fields(super().__repr_args__(), SECRET_SETTINGS)

    @model_validator(mode="after")
    def _register_secrets(self) -> Settings:
        """The secrets read are masked wherever they show up (``secrets.redact``)."""
        for name in SECRET_SETTINGS:
            value = getattr(self, name)
            register_secret(value.get_secret_value() if isinstance(value, SecretStr) else value)
        return self

    @field_validator("*", mode="after")
    @classmethod
    def _within_bounds(cls, value: Any, info: ValidationInfo) -> Any:
        bounds = cls.bounds(info.field_name) if info.field_name else None
        problem = bounds.problem(value) if bounds is not None else None
        if problem is not None:
            raise ValueError(problem)
        return value

    # -- reading ---------------------------------------------------------------------------------
    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """The settings of ``env`` (default: ``os.environ``) with ``overrides`` (fields; None = not
        given) on top; a bad value is a ``SettingsError`` naming its variable or its field."""
        given = {k: v for k, v in overrides.items() if v is not None}
        unknown = set(given) - set(cls.model_fields)
        if unknown:
            raise TypeError(f"unknown settings: {', '.join(sorted(unknown))}")
        with reading(env):
            try:
                settings = cls(**given)
            except ValidationError as exc:
                names = {f: f if f in given else cls.variable(f) for f in cls.model_fields}
                names.update({cls.variable(f): cls.variable(f) for f in cls.model_fields})
                raise settings_error(exc, names) from None
        settings._overrides = frozenset(given)
        return settings

    def is_set(self, name: str) -> bool:
        """Whether the setting ``name`` (field or variable) was given (in the environment or as a value)."""
        return self.field_of(name) in self.model_fields_set

    def is_override(self, field: str) -> bool:
        """Whether ``field`` was given by a face (a flag, an argument, a resource field), not read
        from the environment."""
        return field in self._overrides

    # -- the declaration as data (faces, docs) ---------------------------------------------------
    @classmethod
    def variable(cls, field: str) -> str:
        """The environment variable of ``field``."""
        alias = cls.model_fields[field].validation_alias
        return alias if isinstance(alias, str) else ENV_PREFIX + field.upper()

    @classmethod
    def field_of(cls, name: str) -> str:
        """The field of a field or variable name."""
        if name in cls.model_fields:
            return name
        return _fields_by_variable()[name.upper()]

    @classmethod
    def extra(cls, field: str) -> dict[str, Any]:
        extra = cls.model_fields[field].json_schema_extra
        return dict(extra) if isinstance(extra, dict) else {}

    @classmethod
    def bounds(cls, field: str) -> Bounds | None:
        """What ``field`` allows (None: any value of its type)."""
        return _bounds()[field]

    @classmethod
    def choices(cls, field: str) -> tuple[str, ...]:
        b = cls.bounds(field)
        return b.choices if b is not None else ()

    @classmethod
    def default(cls, field: str) -> Any:
        f = cls.model_fields[field]
        return f.default_factory() if f.default_factory is not None else f.default  # type: ignore[call-arg]

    @classmethod
    def variables(cls) -> dict[str, dict[str, Any]]:
        """``{variable: {field, help, section, default}}`` of every setting, in declaration order."""
        return {
            cls.variable(name): {
                "field": name,
                "help": f.description or "",
                "section": cls.extra(name)["section"],
                "default": cls.default(name),
            }
            for name, f in cls.model_fields.items()
        }

    # -- a run's configuration (``run.py``) ------------------------------------------------------
    def pipeline_config(self, **overrides: Any) -> PipelineConfig:
        """The run configuration these settings describe; ``overrides`` are ``PipelineConfig``
        fields (None = not given; ``columns`` is applied on top of the configured mapping)."""
        from .run import pipeline_config

        return pipeline_config(self, **overrides)

    def recorded_source(self, kind: MetricKind, source_table: str | None = None) -> str:
        """The ``source_table`` the scores of ``kind`` are recorded under (the configured input
        table, or ``source_table``)."""
        from .run import recorded_source

        return recorded_source(self, kind, source_table)

    def alert_sinks(self, webhook: str | None = None, email_to: Sequence[str] | None = None) -> list[AlertSink]:
        """Where ``ctxprec check`` delivers an alert (``config.alerts``)."""
        from .alerts import alert_sinks

        return alert_sinks(self, webhook, email_to)

    def mapping_for(self, kind: MetricKind, columns: Mapping[str, str] | None = None) -> str:
        """The column-mapping fingerprint a run of ``kind`` records (``columns`` on top)."""
        from ..pipeline.mapping import mapping_of

        return mapping_of(self.pipeline_config(metric=kind.name, columns=dict(columns or {}) or None))


@cache
def _bounds() -> dict[str, Bounds | None]:
    out: dict[str, Bounds | None] = {}
    for name in Settings.model_fields:
        b = Settings.extra(name).get("bounds") or {}
        kw: dict[str, Any] = {k: tuple(v) if isinstance(v, list) else v for k, v in b.items()}
        out[name] = Bounds(**kw) if kw else None
    return out


@cache
def _fields_by_variable() -> dict[str, str]:
    return {Settings.variable(f).upper(): f for f in Settings.model_fields}
