"""``Settings``: every ``CTXPREC_*`` variable, read in one place with one parser per type.

One ``.env`` configures every entry point: the CLI, the Airflow DAGs and operators, the Dagster
resources, the alert sinks and the judge's retry timing all read their defaults from here.
Explicit arguments (CLI flags, resource fields, operator arguments) override these.

Each setting is a dataclass field whose metadata names its variable and says what it means;
``Settings.variables()`` lists them (the README's configuration table is checked against it).
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

__all__ = ["Settings", "SettingsError", "default_judge_name", "parse_bool", "parse_auto_bool", "DEFAULT_WAREHOUSE_URL"]

DEFAULT_WAREHOUSE_URL = "sqlite:///ctxprec.db"
_TRUE = frozenset({"1", "true", "yes", "on"})
_FALSE = frozenset({"0", "false", "no", "off"})


class SettingsError(ValueError):
    """A ``CTXPREC_*`` variable holds a value of the wrong form."""


def parse_bool(raw: str | bool | None, name: str, default: bool = False) -> bool:
    """The one boolean parser: 1/true/yes/on and 0/false/no/off (any case); empty = default."""
    if isinstance(raw, bool):
        return raw
    if raw is None or not raw.strip():
        return default
    value = raw.strip().lower()
    if value in _TRUE:
        return True
    if value in _FALSE:
        return False
    raise SettingsError(f"{name} must be true or false (1/0, yes/no, on/off), got {raw!r}")


def parse_auto_bool(raw: str | bool | None, name: str, default: str = "auto") -> str:
    """``auto`` or a boolean (through ``parse_bool``), as the string ``auto``/``true``/``false``."""
    if isinstance(raw, str) and raw.strip().lower() == "auto":
        return "auto"
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return default
    return "true" if parse_bool(raw, name) else "false"


def default_judge_name(env: Mapping[str, str] | None = None) -> str:
    """``CTXPREC_JUDGE``, else ``gpt-4o-mini`` when ``OPENAI_API_KEY`` is set, else ``lexical``."""
    env = os.environ if env is None else env
    explicit = (env.get("CTXPREC_JUDGE") or "").strip()
    if explicit:
        return explicit
    return "gpt-4o-mini" if env.get("OPENAI_API_KEY") else "lexical"


def _setting(
    env: str,
    help: str,
    default: Any = None,
    *,
    kind: str = "str",
    minimum: float | None = None,
    choices: tuple[str, ...] = (),
    secret: bool = False,
    odd: bool = False,
) -> Any:
    meta = {
        "env": env,
        "help": help,
        "kind": kind,
        "minimum": minimum,
        "choices": choices,
        "secret": secret,
        "odd": odd,
    }
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta, repr=not secret)


def _parse(raw: str, meta: Mapping[str, Any]) -> Any:
    name, kind = meta["env"], meta["kind"]
    text = raw.strip()
    if kind == "str":
        value: Any = text
    elif kind == "bool":
        return parse_bool(text, name)
    elif kind == "auto_bool":
        return parse_auto_bool(text, name)
    elif kind in ("int", "float"):
        try:
            value = int(text) if kind == "int" else float(text)
        except ValueError:
            noun = "an integer" if kind == "int" else "a number"
            raise SettingsError(f"{name} must be {noun}, got {raw!r}") from None
        if value != value:  # NaN
            raise SettingsError(f"{name} must be a number, got {raw!r}")
        if meta["minimum"] is not None and value < meta["minimum"]:
            raise SettingsError(f"{name} must be at least {meta['minimum']:g}, got {raw!r}")
        if meta.get("odd") and value % 2 == 0:
            raise SettingsError(f"{name} must be odd (a majority of an even count could tie), got {raw!r}")
    elif kind == "list":
        value = [p.strip() for p in text.split(",") if p.strip()]
    elif kind == "json":
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise SettingsError(f"{name} must be a JSON object: {exc.msg} at position {exc.pos}") from None
        if not isinstance(value, dict):
            raise SettingsError(f"{name} must be a JSON object, got {type(value).__name__}")
    elif kind == "json_list":
        try:
            value = json.loads(text) if text else []
        except json.JSONDecodeError as exc:
            raise SettingsError(f"{name} must be a JSON list: {exc.msg} at position {exc.pos}") from None
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            raise SettingsError(f'{name} must be a JSON list of column names like ["tenant"], got {raw!r}')
    else:  # pragma: no cover - a programming error in the table below
        raise AssertionError(kind)
    if meta["choices"] and value not in meta["choices"]:
        raise SettingsError(f"{name} must be one of {', '.join(meta['choices'])}, got {raw!r}")
    return value


@dataclass(frozen=True)
class Settings:
    """Every ``CTXPREC_*`` knob, with its documented default. Build with ``Settings.from_env()``."""

    # -- warehouse and input ----------------------------------------------------------------
    warehouse_url: str = _setting("CTXPREC_WAREHOUSE_URL", "SQLAlchemy URL of the warehouse", DEFAULT_WAREHOUSE_URL)
    source_table: str = _setting(
        "CTXPREC_SOURCE_TABLE", "retrieval-log table (`table` or `schema.table`)", "retrieval_logs"
    )
    conversation_table: str = _setting("CTXPREC_CONVERSATION_TABLE", "conversation-log table", "conversation_logs")
    source_columns: dict = _setting(
        "CTXPREC_SOURCE_COLUMNS",
        'column mapping of the retrieval-log table, JSON (`{"retrieval_context": "contexts"}`)',
        {},
        kind="json",
    )
    conversation_columns: dict = _setting(
        "CTXPREC_CONVERSATION_COLUMNS", "column mapping of the conversation-log table, JSON", {}, kind="json"
    )
    segments: list = _setting(
        "CTXPREC_SEGMENTS",
        'segment columns copied into the score rows, JSON list (`["tenant", "retriever_version"]`)',
        [],
        kind="json_list",
    )
    # -- traces (docs/traces.md) --------------------------------------------------------------
    source_format: str = _setting(
        "CTXPREC_SOURCE_FORMAT",
        "input format: `rows` (a retrieval-log table) or a spans table of `openinference` / `otel-genai` "
        "traces (one case per retriever span)",
        "rows",
        choices=("rows", "openinference", "otel-genai"),
    )
    stage: str = _setting(
        "CTXPREC_STAGE",
        "spans: score the `retrieve` (retriever spans) or the `rerank` stage (reranker spans)",
        "retrieve",
        choices=("retrieve", "rerank"),
    )
    span_table: str = _setting("CTXPREC_SPAN_TABLE", "spans table (span source formats)", "spans")
    span_columns: dict = _setting(
        "CTXPREC_SPAN_COLUMNS",
        'column mapping of the spans table, JSON (`{"span_id": "SpanId", "attributes": "SpanAttributes"}`)',
        {},
        kind="json",
    )
    expected_attribute: str | None = _setting(
        "CTXPREC_EXPECTED_ATTRIBUTE", "spans: the span attribute holding the reference answer", None
    )
    gold_table: str | None = _setting(
        "CTXPREC_GOLD_TABLE",
        "spans: table of reference answers (`expected_output` by `trace_id` or `input`); with neither this "
        "nor an attribute, scoring is reference-free (the answer is the reference)",
        None,
    )
    documents_table: str | None = _setting(
        "CTXPREC_DOCUMENTS_TABLE",
        "spans: table of document texts (`id`, `content`) for spans that record ids only",
        None,
    )
    # -- judge ------------------------------------------------------------------------------
    judge: str = _setting("CTXPREC_JUDGE", "judge: an OpenAI-compatible model name, or `lexical`", "lexical")
    concurrency: int = _setting("CTXPREC_CONCURRENCY", "judge requests in flight at most", 16, kind="int", minimum=1)
    chunk_size: int = _setting(
        "CTXPREC_CHUNK_SIZE", "rows per chunk (one write transaction each)", 500, kind="int", minimum=1
    )
    judge_mode: str = _setting(
        "CTXPREC_JUDGE_MODE",
        "`sync` (on-demand calls) or `batch` (OpenAI Batch API: half price, results within 24 h)",
        "sync",
        choices=("sync", "batch"),
    )
    judge_samples: int = _setting(
        "CTXPREC_JUDGE_SAMPLES",
        "self-consistency: sampled judge answers per node, odd (majority verdict; ~N times the completion "
        "tokens; 1 = one answer at temperature 0)",
        1,
        kind="int",
        minimum=1,
        odd=True,
    )
    batch_poll_seconds: float = _setting(
        "CTXPREC_BATCH_POLL_SECONDS",
        "batch mode: longest wait between two polls of a batch (seconds; polls start at 1 s and back off)",
        60.0,
        kind="float",
        minimum=0,
    )
    batch_retry: str = _setting(
        "CTXPREC_BATCH_RETRY",
        "batch mode: requests a batch did not answer usably go to the next batch (`batch`, half price, "
        "another wait) or out at once as sync calls (`sync`, full price)",
        "batch",
        choices=("batch", "sync"),
    )
    prices: dict = _setting(
        "CTXPREC_PRICES",
        'USD per 1M tokens, JSON (`{"model": [input, output]}`; batch price: key `model@batch`, default half)',
        {},
        kind="json",
    )
    retry_initial_wait: float = _setting(
        "CTXPREC_RETRY_INITIAL_WAIT", "seconds before the first judge retry", 0.5, kind="float", minimum=0
    )
    retry_max_wait: float = _setting(
        "CTXPREC_RETRY_MAX_WAIT",
        "longest wait between judge retries (seconds); also caps a server's `Retry-After`",
        30.0,
        kind="float",
        minimum=0,
    )
    outage_tolerance: float = _setting(
        "CTXPREC_OUTAGE_TOLERANCE",
        "seconds a judge outage is waited out (pause, "
        "probe, resume) before the run's remaining rows fail; 30 s when the judge "
        "never answered",
        600.0,
        kind="float",
        minimum=0,
    )
    max_rpm: float | None = _setting(
        "CTXPREC_MAX_RPM",
        "judge requests per minute at most, kept before sending (this process's share of the quota)",
        None,
        kind="float",
        minimum=0,
    )
    sample_rate: float = _setting(
        "CTXPREC_SAMPLE_RATE",
        "share of each partition's rows to score, (0, 1]; the same rows on every run (a hash of the log id)",
        1.0,
        kind="float",
        minimum=0,
    )
    max_rows: int | None = _setting(
        "CTXPREC_MAX_ROWS",
        "score at most this many rows per partition (the sample's lowest hashes)",
        None,
        kind="int",
        minimum=1,
    )
    max_tpm: float | None = _setting(
        "CTXPREC_MAX_TPM",
        "judge tokens per minute at most (estimated prompt + completion allowance)",
        None,
        kind="float",
        minimum=0,
    )
    # -- thresholds and alerts --------------------------------------------------------------
    threshold: float = _setting("CTXPREC_THRESHOLD", "per-case pass threshold", 0.5, kind="float", minimum=0)
    min_mean: float | None = _setting(
        "CTXPREC_MIN_MEAN", "partition alert: minimum mean score", None, kind="float", minimum=0
    )
    min_pass_rate: float | None = _setting(
        "CTXPREC_MIN_PASS_RATE", "partition alert: minimum pass rate", None, kind="float", minimum=0
    )
    use_corrected: bool = _setting(
        "CTXPREC_USE_CORRECTED",
        "partition alert: min_mean compares the label-corrected mean where enough rows are labelled",
        False,
        kind="bool",
    )
    label_set: str = _setting("CTXPREC_LABEL_SET", "the ctxprec_labels label set that corrects the figures", "default")
    alert_webhook: str | None = _setting(
        "CTXPREC_ALERT_WEBHOOK", "URL that receives alerts as JSON (POST)", None, secret=True
    )
    alert_email_to: list = _setting(
        "CTXPREC_ALERT_EMAIL_TO", "comma-separated alert e-mail recipients", [], kind="list"
    )
    smtp_host: str = _setting("CTXPREC_SMTP_HOST", "SMTP server for alert e-mail", "localhost")
    smtp_port: int = _setting("CTXPREC_SMTP_PORT", "SMTP port", 587, kind="int", minimum=1)
    smtp_from: str = _setting("CTXPREC_SMTP_FROM", "sender address of alert e-mail", "ctxprec@localhost")
    smtp_user: str | None = _setting("CTXPREC_SMTP_USER", "SMTP login user", None)
    smtp_password: str | None = _setting(
        "CTXPREC_SMTP_PASSWORD", "SMTP login password (never logged)", None, secret=True
    )
    smtp_starttls: str = _setting(
        "CTXPREC_SMTP_STARTTLS", "STARTTLS: `auto` (when offered), `true` or `false`", "auto", kind="auto_bool"
    )
    smtp_ssl: bool = _setting("CTXPREC_SMTP_SSL", "SMTP over implicit TLS (port 465)", False, kind="bool")
    # -- orchestrators ----------------------------------------------------------------------
    start_date: str = _setting(
        "CTXPREC_START_DATE", "first daily partition (Dagster partitions, Airflow DAGs)", "2025-01-01"
    )
    deployment: str = _setting(
        "CTXPREC_DEPLOYMENT", "Dagster resource set: `local` or `production`", "local", choices=("local", "production")
    )
    dagster_retry_delay: float = _setting(
        "CTXPREC_DAGSTER_RETRY_DELAY",
        "Dagster RetryPolicy: seconds before the first retry",
        30.0,
        kind="float",
        minimum=0,
    )
    dagster_max_retries: int = _setting(
        "CTXPREC_DAGSTER_MAX_RETRIES", "Dagster RetryPolicy: retries", 3, kind="int", minimum=0
    )
    blocking_checks: bool = _setting(
        "CTXPREC_BLOCKING_CHECKS", "Dagster: a failed threshold check blocks downstream assets", True, kind="bool"
    )
    schedule_running: bool = _setting(
        "CTXPREC_SCHEDULE_RUNNING", "Dagster: the nightly schedule starts running", False, kind="bool"
    )
    airflow_max_active_chunks: int = _setting(
        "CTXPREC_AIRFLOW_MAX_ACTIVE_CHUNKS", "Airflow: chunk tasks of one run in parallel", 4, kind="int", minimum=1
    )
    airflow_pool: str | None = _setting("CTXPREC_AIRFLOW_POOL", "Airflow: pool of the scoring tasks", None)
    airflow_retries: int = _setting(
        "CTXPREC_AIRFLOW_RETRIES", "Airflow: retries of a scoring task", 3, kind="int", minimum=0
    )
    airflow_retry_delay: float = _setting(
        "CTXPREC_AIRFLOW_RETRY_DELAY", "Airflow: seconds before a retry", 60.0, kind="float", minimum=0
    )
    airflow_max_retry_delay: float = _setting(
        "CTXPREC_AIRFLOW_MAX_RETRY_DELAY", "Airflow: longest retry delay (seconds)", 1800.0, kind="float", minimum=0
    )
    airflow_on_failure: list = _setting(
        "CTXPREC_AIRFLOW_ON_FAILURE", "Airflow: extra failure callbacks, comma-separated `module:attr`", [], kind="list"
    )
    #: the variables that were set (non-empty) when these settings were read
    given: frozenset = field(default=frozenset(), compare=False, repr=False)

    @classmethod
    def variables(cls) -> dict[str, dict[str, Any]]:
        """``{variable: {field, help, default, kind}}`` of every setting, in declaration order."""
        out = {}
        for f in fields(cls):
            if "env" in f.metadata:
                default = f.default_factory() if callable(f.default_factory) else f.default
                out[f.metadata["env"]] = {
                    "field": f.name,
                    "help": f.metadata["help"],
                    "kind": f.metadata["kind"],
                    "default": default,
                }
        return out

    @classmethod
    def read(cls, name: str, env: Mapping[str, str] | None = None) -> Any:
        """One setting (by field name) from the environment: for values read on a hot path."""
        env = os.environ if env is None else env
        f = next(x for x in fields(cls) if x.name == name)
        raw = env.get(f.metadata["env"])
        if name == "judge":
            return default_judge_name(env)
        if raw is None or not raw.strip():
            return f.default_factory() if callable(f.default_factory) else f.default
        return _parse(raw, f.metadata)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None, **overrides: Any) -> Settings:
        """Settings from ``env`` (default ``os.environ``); non-None ``overrides`` win."""
        env = os.environ if env is None else env
        values: dict[str, Any] = {}
        given = set()
        for f in fields(cls):
            var = f.metadata.get("env")
            if var is None:
                continue
            raw = env.get(var)
            if raw is not None and raw.strip():
                given.add(var)
                values[f.name] = _parse(raw, f.metadata)
        values["judge"] = default_judge_name(env)
        known = {f.name for f in fields(cls)}
        clean = {k: v for k, v in overrides.items() if v is not None}
        unknown = set(clean) - known
        if unknown:
            raise TypeError(f"unknown settings: {', '.join(sorted(unknown))}")
        return replace(cls(**values, given=frozenset(given)), **clean)

    def is_set(self, variable: str) -> bool:
        """Whether ``variable`` (e.g. ``CTXPREC_WAREHOUSE_URL``) was set in the environment."""
        return variable in self.given
