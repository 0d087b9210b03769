"""``PipelineConfig``: what to score, where, and with which judge (validated on construction)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import TYPE_CHECKING, Any

from ..config import DEFAULT_WAREHOUSE_URL, Settings
from ..judge.models.names import validate_judge_name
from ..scoring.consistency import check_samples
from ..secrets import register_secret
from ..warehouse.identifiers import split_table_name, validate_identifier
from .columns import ColumnSet, merge_columns, parse_segments
from .kinds import DEFAULT_METRIC, MetricKind, metric_kind
from .sampling import DEFAULT_SAMPLE_SEED, Sample

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from ..judge.models.base import JudgeModel

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

    def __post_init__(self) -> None:
        kind = metric_kind(self.metric)
        if self.source_table is not None:
            split_table_name(self.source_table, self.source_schema, "source table name")
        elif self.source_schema is not None:
            validate_identifier(self.source_schema, "source schema name")
        if self.output_schema is not None:
            validate_identifier(self.output_schema, "output schema name")
        if self.columns is not None and not isinstance(self.columns, kind.columns):
            if isinstance(self.columns, ColumnSet) or not isinstance(self.columns, Mapping):
                raise TypeError(
                    f"columns for metric {self.metric!r} must be a {kind.columns.__name__} or a "
                    f"mapping of logical column names, got {type(self.columns).__name__}"
                )
            self.columns = kind.columns.from_mapping(self.columns, source=f"columns of {self.metric}")
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

    @property
    def sample(self) -> Sample:
        return Sample(self.sample_rate, self.max_rows, self.sample_seed)

    @property
    def kind(self) -> MetricKind:
        return metric_kind(self.metric)

    @property
    def table_name(self) -> str:
        return self.source_table or self.kind.default_table

    @property
    def source_columns(self) -> ColumnSet:
        if isinstance(self.columns, ColumnSet):
            return self.columns
        return self.kind.columns()

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
        columns = given.pop("columns", None)
        if not isinstance(columns, ColumnSet):
            columns = merge_columns(getattr(s, kind.columns_setting), columns) or None
        base: dict[str, Any] = {
            "warehouse": s.warehouse_url,
            "judge": s.judge,
            "metric": kind.name,
            "source_table": getattr(s, kind.table_setting),
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
        }
        base.update(given)
        return cls(**base)
