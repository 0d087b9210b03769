"""``PipelineConfig``: what to score, where, and with which judge — the whole truth about a run.

Every entry point resolves one (``ctxprec_ops.config.Settings.pipeline_config``: the environment
and the face's own arguments) and the code below takes every value from it: nothing under
``pipeline/`` reads the environment. A field's default and what it allows (``bounds.setting``) are
declared here once; ``Settings`` declares the ``CTXPREC_*`` variable of each and takes both.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING

from ..judge import defaults
from ..judge.models.names import validate_judge_name
from ..judge.pricing import parse_prices
from ..secrets import redact, register_secret
from ..traces.conventions import STAGES
from ..traces.options import TraceOptions
from ..warehouse.identifiers import split_table_name, validate_identifier
from .bounds import check_bounds, setting
from .columns import ColumnSet, parse_segments
from .formats import DEFAULT_SPAN_TABLE, SOURCE_FORMATS, SPAN_FORMATS, SpanColumns, reads_spans
from .kinds import DEFAULT_METRIC, MetricKind, metric_kind
from .sampling import DEFAULT_SAMPLE_SEED, Sample

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from ..judge.models.base import JudgeModel
    from ..traces.phoenix import PhoenixTarget

__all__ = ["DEFAULT_WAREHOUSE_URL", "CHUNK_SIZE_DEFAULTS", "JUDGE_MODES", "BATCH_RETRIES", "PipelineConfig"]

#: the embedded default warehouse: a SQLite file in the working directory
DEFAULT_WAREHOUSE_URL = "sqlite:///ctxprec.db"
#: the rows per chunk of a run that does not set them, as docs and help texts say it: each
#: family's ``Dialect.default_chunk_size`` (tests/test_warehouse_dialects.py keeps them equal)
CHUNK_SIZE_DEFAULTS = "the warehouse's: 500, DuckDB 1,500"
#: how judge requests are sent: on demand, or through the OpenAI Batch API
JUDGE_MODES = ("sync", "batch")
#: batch mode: where requests a batch did not answer usably go (the next batch, or sync calls)
BATCH_RETRIES = ("batch", "sync")


@dataclass
class PipelineConfig:
    """What to score, where, and with which judge (``ctxprec_ops.config.Settings.pipeline_config``
    builds one from the environment and a face's arguments).

    Table, schema and column names are validated as identifiers on construction
    (``IdentifierError``); ``source_table`` may be ``schema.table``. ``columns`` is the metric's
    column set or a mapping ``{logical name: column}`` on top of the defaults. Numbers and choices
    are checked against their declared bounds (``ValueError`` naming the field).
    """

    warehouse: str | Engine = DEFAULT_WAREHOUSE_URL
    metric: str = DEFAULT_METRIC
    judge: str | JudgeModel = "lexical"
    judge_base_url: str | None = None
    judge_api_key: str | None = field(default=None, repr=False)
    judge_timeout: float = setting(defaults.JUDGE_TIMEOUT, gt=0)
    source_table: str | None = None  # default per metric kind: retrieval_logs / conversation_logs
    source_schema: str | None = None
    columns: ColumnSet | Mapping[str, str] | None = None
    #: segment columns of the source table whose values each score row carries
    #: (``ctxprec_segments``; docs/segments.md); part of what identifies a score
    segments: tuple[str, ...] | list[str] | str | None = ()
    threshold: float = setting(0.5, ge=0, le=1)
    strict_mode: bool = False
    #: rows per chunk (one write transaction each); None: the warehouse family's
    #: (``Dialect.default_chunk_size``: 500, DuckDB 1,500), resolved on construction
    chunk_size: int | None = setting(None, ge=1, integer=True)
    concurrency: int = setting(defaults.CONCURRENCY, ge=1, integer=True)
    max_cost: float | None = setting(None, ge=0)
    max_nodes_per_call: int = setting(defaults.MAX_NODES_PER_CALL, ge=1, integer=True)
    window_size: int = setting(10, ge=1, integer=True)
    max_retries: int = setting(defaults.MAX_RETRIES, ge=0, integer=True)
    #: seconds before the first retry of a judge call, and the longest wait between retries
    #: (also the cap on a server's ``Retry-After``)
    retry_initial_wait: float = setting(defaults.RETRY_INITIAL_WAIT, ge=0)
    retry_max_wait: float = setting(defaults.RETRY_MAX_WAIT, ge=0)
    #: schema of the ctxprec_* output tables (default: the connection's default schema)
    output_schema: str | None = None
    #: seconds a judge outage may last before the run gives up
    outage_tolerance: float = setting(defaults.OUTAGE_TOLERANCE, ge=0)
    #: provider quota, kept before each request: requests / tokens per minute (None: no cap)
    max_rpm: float | None = setting(None, gt=0)
    max_tpm: float | None = setting(None, gt=0)
    #: deterministic sampling: score the rows whose hash of (log id, ``sample_seed``) is under
    #: ``sample_rate``, at most ``max_rows`` of them per partition (``pipeline.sampling``)
    sample_rate: float = setting(1.0, gt=0, le=1)
    max_rows: int | None = setting(None, ge=1, integer=True)
    sample_seed: str = DEFAULT_SAMPLE_SEED
    #: ``sync`` (on-demand judge calls) or ``batch`` (OpenAI Batch API; see ctxprec_ops/batch)
    judge_mode: str = setting("sync", choices=JUDGE_MODES)
    #: self-consistency: sampled judge answers per node, odd (the metrics' ``samples``)
    judge_samples: int = setting(1, ge=1, integer=True, odd=True)
    #: a judge cascade (``judge/cascade.py``): the strong judge the cheap judge's unsure verdicts go
    #: to, and either the confidence threshold C below which they go, or the agreement with the
    #: strong judge C is chosen for on a calibration sample of ``calibration_nodes`` nodes
    #: (``pipeline/cascade.py``; stored in ``ctxprec_cascades`` and reused until the judges or the
    #: prompt change, or ``recalibrate``). ``label_set``: the ``ctxprec_labels`` set whose labelled
    #: nodes are the calibration's reference instead of the strong judge, when it has enough
    escalate_to: str | JudgeModel | None = None
    escalate_below: float | None = setting(None, ge=0, le=1)
    target_agreement: float | None = setting(None, gt=0, le=1)
    calibration_nodes: int = setting(defaults.CALIBRATION_NODES, ge=10, integer=True)
    recalibrate: bool = False
    label_set: str = "default"
    #: batch mode: longest wait between two polls of a batch, seconds
    batch_poll_seconds: float = setting(60.0, ge=0)
    #: batch mode: requests a batch did not answer usably: ``batch`` (next batch) or ``sync`` (at once)
    batch_retry: str = setting("batch", choices=BATCH_RETRIES)
    #: USD per 1M tokens by judge model (``"model@batch"``: its Batch API price), over the list prices
    prices: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    #: whether the judge model reads images (None: by its name; ``judge.models.names.reads_images``)
    judge_multimodal: bool | None = None
    #: seconds a lease claim on a chunk lasts without renewal (DuckDB, Snowflake; None: the
    #: warehouse's default, ``warehouse.lease_claims.DEFAULT_LEASE_SECONDS``)
    claim_lease_seconds: float | None = setting(None, gt=0)
    #: ``rows`` (a flat table: one case per row) or a spans table: ``openinference`` / ``otel-genai``
    #: (one case per retriever span; ``pipeline/formats.py``, ``traces/``). With a span format
    #: ``source_table`` defaults to ``spans`` and ``columns`` maps a spans table (``SpanColumns``)
    source_format: str = setting("rows", choices=SOURCE_FORMATS)
    #: span formats: ``retrieve`` (retriever spans) or ``rerank`` (reranker spans, OpenInference)
    stage: str = setting("retrieve", choices=STAGES)
    #: span formats: the reference answer: a span attribute, or a gold table (``expected_output``
    #: by ``trace_id`` or ``input``); neither: reference-free (the LLM span's answer is the reference)
    expected_attribute: str | None = None
    gold_table: str | None = None
    #: span formats: a table of document texts (``id``, ``content``) for spans that record ids only
    documents_table: str | None = None
    #: output rows written before ``source_table`` / ``mapping`` were recorded: metric -> the input
    #: table and the mapping fingerprint they are taken to come from (the configured ones of the
    #: other metrics; unset: each metric's default table and mapping)
    legacy_sources: Mapping[str, str] = field(default_factory=dict)
    legacy_mappings: Mapping[str, str] = field(default_factory=dict)
    #: freeze the heap and collect young objects less often while chunks stream (``_gc.quiet_gc``):
    #: for a process of ctxprec's own (the CLI opts in); a library caller's host is left alone
    quiet_gc: bool = False

    #: Arize Phoenix (``traces/phoenix.py``): with ``phoenix_url`` and no ``source_table``, the
    #: day's retriever spans of ``phoenix_project`` are read from it (into the staging table
    #: ``phoenix_<project>``) and scored as OpenInference spans
    phoenix_url: str | None = None
    phoenix_project: str = "default"
    phoenix_api_key: str | None = field(default=None, repr=False)
    phoenix_document_annotation: str = "ctxprec_relevance"
    phoenix_span_annotation: str = "contextual_precision"
    #: ``phoenix``: each scored span's verdicts are written back to ``phoenix_url`` (``traces/writeback.py``)
    write_back: str | None = setting(None, choices=("phoenix",))
    #: whether the spans are read from Phoenix (None: when ``phoenix_url`` is set and no
    #: ``source_table`` is; a spans table of the warehouse can be the source and Phoenix the sink)
    phoenix_source: bool | None = None

    def __repr__(self) -> str:
        """The fields the dataclass shows, credentials masked (a URL's password or token, a
        registered key): a config reaches logs whole (an orchestrator's, a traceback's)."""
        shown = ", ".join(f"{f.name}={getattr(self, f.name)!r}" for f in fields(self) if f.repr)
        return redact(f"{type(self).__name__}({shown})")

    def __post_init__(self) -> None:
        metric_kind(self.metric)  # ValueError naming the metrics
        if self.phoenix_source is None:
            self.phoenix_source = self.phoenix_url is not None and self.source_table is None
        if self.phoenix_source:  # Phoenix as the source: its spans staged in phoenix_<project>
            if self.phoenix_url is None:
                raise ValueError("phoenix_source needs phoenix_url: the Phoenix server to read the spans from")
            if self.source_format == "rows":
                self.source_format = "openinference"
            self.source_table = self.source_table or self.phoenix.staging_table  # type: ignore[union-attr]
        self.write_back = self.write_back or None
        if self.write_back and self.phoenix_url is None:
            raise ValueError("write_back='phoenix' needs phoenix_url: where to write the verdicts back to")
        check_bounds(self)  # numbers and choices, each against its declared bounds
        _ = self.rows_per_chunk  # None: the warehouse's default, resolved here once
        _ = self.trace_options  # validates the span settings (or refuses them for a flat table)
        if self.source_table is not None:
            split_table_name(self.source_table, self.source_schema, "source table name")
        elif self.source_schema is not None:
            validate_identifier(self.source_schema, "source schema name")
        if self.output_schema is not None:
            validate_identifier(self.output_schema, "output schema name")
        columns_type = self._columns_type
        if self.columns is not None and not isinstance(self.columns, columns_type):
            if isinstance(self.columns, ColumnSet) or not isinstance(self.columns, Mapping):
                raise TypeError(
                    f"columns for metric {self.metric!r} must be a {columns_type.__name__} or a "
                    f"mapping of logical column names, got {type(self.columns).__name__}"
                )
            self.columns = columns_type.from_mapping(self.columns, source=f"columns of {self.metric}")
        self.segments = parse_segments(self.segments, "segments")
        if isinstance(self.judge, str) and self.judge.strip().lower() != "lexical":
            validate_judge_name(self.judge.strip())  # before any call or write
        self.prices = parse_prices(self.prices)
        self._check_cascade()
        if self.judge_mode == "batch" and self.judge_samples > 1:
            raise ValueError(
                f"judge_samples={self.judge_samples} is not supported in batch mode (the Batch API path judges "
                "one answer per node): use judge_mode='sync' to sample, or judge_samples=1"
            )
        register_secret(self.judge_api_key)
        register_secret(self.phoenix_api_key)

    def _check_cascade(self) -> None:
        """A cascade needs a strong judge and exactly one of a threshold and a target (``ValueError``)."""
        if isinstance(self.escalate_to, str):
            self.escalate_to = self.escalate_to.strip() or None
        rules = [n for n in ("escalate_below", "target_agreement") if getattr(self, n) is not None]
        if self.escalate_to is None:
            if rules:
                raise ValueError(f"{' and '.join(rules)} needs escalate_to: the strong judge of a cascade")
            return
        if len(rules) != 1:
            raise ValueError(
                "a cascade (escalate_to) needs one of escalate_below (the confidence threshold) and "
                "target_agreement (the agreement with the strong judge the threshold is chosen for)"
                + (", not both" if rules else "")
            )
        if not self.kind.needs_judge:
            raise ValueError(f"escalate_to applies to a judged metric, not {self.metric!r}")
        if isinstance(self.escalate_to, str) and self.escalate_to.lower() != "lexical":
            validate_judge_name(self.escalate_to)

    @property
    def cascaded(self) -> bool:
        """Whether the run judges with a cascade (``escalate_to``)."""
        return self.escalate_to is not None

    @property
    def phoenix(self) -> PhoenixTarget | None:
        """The Phoenix server and project (``phoenix_url``), or None."""
        if self.phoenix_url is None:
            return None
        from ..traces.phoenix import PhoenixTarget

        return PhoenixTarget(
            self.phoenix_url,
            self.phoenix_project,
            self.phoenix_api_key,
            document_annotation=self.phoenix_document_annotation,
            span_annotation=self.phoenix_span_annotation,
        )

    @property
    def reads_phoenix(self) -> bool:
        """Whether the source is Phoenix (staged in the warehouse), not a table of the warehouse."""
        return bool(self.phoenix_source)

    @property
    def rows_per_chunk(self) -> int:
        """``chunk_size``, None resolved to the warehouse family's default (on construction, and
        again for a config whose field was cleared afterwards)."""
        if self.chunk_size is None:
            from ..warehouse.engine import default_chunk_size

            self.chunk_size = default_chunk_size(self.warehouse)
        return self.chunk_size

    @property
    def sample(self) -> Sample:
        return Sample(self.sample_rate, self.max_rows, self.sample_seed)

    @property
    def kind(self) -> MetricKind:
        return metric_kind(self.metric)

    @property
    def table_name(self) -> str:
        if self.source_table:
            return self.source_table
        return DEFAULT_SPAN_TABLE if self.source_format in SPAN_FORMATS else self.kind.default_table

    @property
    def _columns_type(self) -> type[ColumnSet]:
        return SpanColumns if self.source_format in SPAN_FORMATS else self.kind.columns

    @property
    def source_columns(self) -> ColumnSet:
        if isinstance(self.columns, ColumnSet):
            return self.columns
        return self._columns_type()

    @property
    def trace_options(self) -> TraceOptions | None:
        """How spans become cases (None for a flat table); ``ValueError`` for settings that do not fit."""
        if self.source_format not in SPAN_FORMATS:
            given = [n for n in ("expected_attribute", "gold_table", "documents_table") if getattr(self, n) is not None]
            if self.stage != "retrieve":
                given.append("stage")
            if given:
                formats = ", ".join(SPAN_FORMATS)
                raise ValueError(f"{', '.join(given)} applies to a spans table: set source_format to one of {formats}")
            return None
        if not reads_spans(self.kind):
            raise ValueError(
                f"source_format {self.source_format!r} builds single-turn cases: use metric "
                f"{DEFAULT_METRIC!r}, not {self.metric!r}"
            )
        return TraceOptions(
            self.source_format, self.stage, self.expected_attribute, self.gold_table, self.documents_table
        )
