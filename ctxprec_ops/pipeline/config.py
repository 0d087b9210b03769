"""``PipelineConfig``: what to score, where, and with which judge (validated on construction)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from ..config import DEFAULT_WAREHOUSE_URL, Settings
from ..judge.models.names import validate_judge_name
from ..scoring.samples import check_samples
from ..secrets import register_secret
from ..traces.options import TraceOptions
from ..warehouse.identifiers import split_table_name, validate_identifier
from .columns import ColumnSet, merge_columns, parse_segments
from .formats import DEFAULT_SPAN_TABLE, SOURCE_FORMATS, SPAN_FORMATS, SpanColumns, reads_spans
from .kinds import DEFAULT_METRIC, MetricKind, metric_kind
from .sampling import DEFAULT_SAMPLE_SEED, Sample

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from ..judge.models.base import JudgeModel
    from ..traces.phoenix import PhoenixTarget

__all__ = ["PipelineConfig"]


@dataclass
class PipelineConfig:
    """What to score, where, and with which judge. ``from_settings`` fills it from the env.

    Table, schema and column names are validated as identifiers on construction
    (``IdentifierError``); ``source_table`` may be ``schema.table``. ``columns`` is the metric's
    column set or a mapping ``{logical name: column}`` on top of the defaults.
    """

    warehouse: str | Engine = DEFAULT_WAREHOUSE_URL
    metric: str = DEFAULT_METRIC
    judge: str | JudgeModel = "lexical"
    judge_base_url: str | None = None
    judge_api_key: str | None = field(default=None, repr=False)
    judge_timeout: float = 60.0
    source_table: str | None = None  # default per metric kind: retrieval_logs / conversation_logs
    source_schema: str | None = None
    columns: ColumnSet | Mapping[str, str] | None = None
    #: segment columns of the source table whose values each score row carries
    #: (``ctxprec_segments``; docs/segments.md); part of what identifies a score
    segments: tuple[str, ...] | list[str] | str | None = ()
    threshold: float = 0.5
    strict_mode: bool = False
    chunk_size: int = 500
    concurrency: int = 16
    max_cost: float | None = None
    max_nodes_per_call: int = 20
    window_size: int = 10
    max_retries: int = 6
    #: schema of the ctxprec_* output tables (default: the connection's default schema)
    output_schema: str | None = None
    #: seconds a judge outage may last before the run gives up (default CTXPREC_OUTAGE_TOLERANCE or 600)
    outage_tolerance: float | None = None
    #: provider quota, kept before each request: requests / tokens per minute (None: no cap)
    max_rpm: float | None = None
    max_tpm: float | None = None
    #: deterministic sampling: score the rows whose hash of (log id, ``sample_seed``) is under
    #: ``sample_rate``, at most ``max_rows`` of them per partition (``pipeline.sampling``)
    sample_rate: float = 1.0
    max_rows: int | None = None
    sample_seed: str = DEFAULT_SAMPLE_SEED
    #: ``sync`` (on-demand judge calls) or ``batch`` (OpenAI Batch API; see ctxprec_ops/batch)
    judge_mode: str = "sync"
    #: self-consistency: sampled judge answers per node, odd (the metrics' ``samples``)
    judge_samples: int = 1
    #: batch mode: longest wait between two polls of a batch, seconds
    batch_poll_seconds: float = 60.0
    #: batch mode: requests a batch did not answer usably: ``batch`` (next batch) or ``sync`` (at once)
    batch_retry: str = "batch"
    #: ``rows`` (a flat table: one case per row) or a spans table: ``openinference`` / ``otel-genai``
    #: (one case per retriever span; ``pipeline/formats.py``, ``traces/``). With a span format
    #: ``source_table`` defaults to ``spans`` and ``columns`` maps a spans table (``SpanColumns``)
    source_format: str = "rows"
    #: span formats: ``retrieve`` (retriever spans) or ``rerank`` (reranker spans, OpenInference)
    stage: str = "retrieve"
    #: span formats: the reference answer: a span attribute, or a gold table (``expected_output``
    #: by ``trace_id`` or ``input``); neither: reference-free (the LLM span's answer is the reference)
    expected_attribute: str | None = None
    gold_table: str | None = None
    #: span formats: a table of document texts (``id``, ``content``) for spans that record ids only
    documents_table: str | None = None
    #: Arize Phoenix (``traces/phoenix.py``): with ``phoenix_url`` and no ``source_table``, the
    #: day's retriever spans of ``phoenix_project`` are read from it (into the staging table
    #: ``phoenix_<project>``) and scored as OpenInference spans
    phoenix_url: str | None = None
    phoenix_project: str = "default"
    phoenix_api_key: str | None = field(default=None, repr=False)
    phoenix_document_annotation: str = "ctxprec_relevance"
    phoenix_span_annotation: str = "contextual_precision"
    #: ``phoenix``: each scored span's verdicts are written back to ``phoenix_url`` (``traces/writeback.py``)
    write_back: str | None = None
    #: whether the spans are read from Phoenix (None: when ``phoenix_url`` is set and no
    #: ``source_table`` is; a spans table of the warehouse can be the source and Phoenix the sink)
    phoenix_source: bool | None = None

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
        if self.write_back not in (None, "", "phoenix"):
            raise ValueError(f"write_back must be 'phoenix' (or unset), got {self.write_back!r}")
        if self.write_back and self.phoenix_url is None:
            raise ValueError("write_back='phoenix' needs phoenix_url: where to write the verdicts back to")
        if self.source_format not in SOURCE_FORMATS:
            raise ValueError(f"source_format must be one of {', '.join(SOURCE_FORMATS)}, got {self.source_format!r}")
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
        if isinstance(self.chunk_size, bool) or not isinstance(self.chunk_size, int) or self.chunk_size < 1:
            raise ValueError(f"chunk_size must be a positive integer, got {self.chunk_size!r}")
        if isinstance(self.concurrency, bool) or not isinstance(self.concurrency, int) or self.concurrency < 1:
            raise ValueError(f"concurrency must be a positive integer, got {self.concurrency!r}")
        if isinstance(self.threshold, bool) or not 0.0 <= float(self.threshold) <= 1.0:
            raise ValueError(f"threshold must be between 0 and 1, got {self.threshold!r}")
        if self.max_cost is not None and self.max_cost < 0:
            raise ValueError(f"max_cost must be >= 0, got {self.max_cost!r}")
        if isinstance(self.judge, str) and self.judge.strip().lower() != "lexical":
            validate_judge_name(self.judge.strip())  # before any call or write
        if self.outage_tolerance is not None and not self.outage_tolerance >= 0:
            raise ValueError(f"outage_tolerance must be >= 0 seconds, got {self.outage_tolerance!r}")
        _ = self.sample  # validates sample_rate and max_rows
        for name in ("max_rpm", "max_tpm"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ValueError(f"{name} must be > 0, got {value!r}")
        if self.batch_retry not in ("batch", "sync"):
            raise ValueError(f"batch_retry must be 'batch' or 'sync', got {self.batch_retry!r}")
        if self.judge_mode not in ("sync", "batch"):
            raise ValueError(f"judge_mode must be 'sync' or 'batch', got {self.judge_mode!r}")
        check_samples(self.judge_samples, "judge_samples")
        if self.judge_mode == "batch" and self.judge_samples > 1:
            raise ValueError(
                f"judge_samples={self.judge_samples} is not supported in batch mode (the Batch API path judges "
                "one answer per node): use judge_mode='sync' to sample, or judge_samples=1"
            )
        register_secret(self.judge_api_key)
        register_secret(self.phoenix_api_key)

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

    @classmethod
    def from_settings(cls, settings: Settings | None = None, **overrides: Any) -> PipelineConfig:
        """A config from ``Settings`` (default: ``Settings.from_env()``).

        ``overrides`` are PipelineConfig fields; ``None`` values mean "not given" (CLI flags).
        The input table and column mapping default to the settings of the metric's kind; a
        ``columns`` mapping given here is applied on top of the one from the settings.
        """
        s = settings if settings is not None else Settings.from_env()
        given = {k: v for k, v in overrides.items() if v is not None}
        known = {f.name for f in fields(cls)}
        unknown = set(given) - known
        if unknown:
            raise TypeError(f"unknown pipeline settings: {', '.join(sorted(unknown))}")
        kind = metric_kind(given.get("metric", DEFAULT_METRIC))
        # CTXPREC_SOURCE_FORMAT configures the metrics that can read spans (single-turn, judged);
        # the others keep reading their tables
        fmt = given.get("source_format") or (s.source_format if reads_spans(kind) else "rows")
        spans = fmt in SPAN_FORMATS
        columns = given.pop("columns", None)
        if not isinstance(columns, ColumnSet):
            mapped = s.span_columns if spans else getattr(s, kind.columns_setting)
            columns = merge_columns(mapped, columns) or None
        base: dict[str, Any] = {
            "warehouse": s.warehouse_url,
            "judge": s.judge,
            "metric": kind.name,
            "source_table": s.span_table if spans else getattr(s, kind.table_setting),
            "columns": columns,
            "segments": tuple(s.segments),
            "threshold": s.threshold,
            "concurrency": s.concurrency,
            "chunk_size": s.chunk_size,
            "outage_tolerance": s.outage_tolerance,
            "max_rpm": s.max_rpm,
            "max_tpm": s.max_tpm,
            "sample_rate": s.sample_rate,
            "max_rows": s.max_rows,
            "judge_mode": s.judge_mode,
            "judge_samples": s.judge_samples,
            "batch_poll_seconds": s.batch_poll_seconds,
            "batch_retry": s.batch_retry,
            "source_format": fmt,
        }
        if spans:
            base.update(
                stage=s.stage,
                expected_attribute=s.expected_attribute,
                gold_table=s.gold_table,
                documents_table=s.documents_table,
            )
        base.update(given)
        return cls(**base)
