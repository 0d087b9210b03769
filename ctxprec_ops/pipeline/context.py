"""``PipelineContext``: what a config resolves to (engine, tables, source, judge, metric)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

from sqlalchemy import Table
from sqlalchemy.engine import Engine

from ..errors import JudgeConfigurationError
from ..judge.breaker import CircuitBreaker
from ..judge.calls import JudgeGuards, trip_after_for
from ..judge.limiter import RequestQuota
from ..judge.models.base import JudgeModel
from ..metrics.base import BaseRetrievalMetric
from ..traces.writeback import WriteBackResult
from ..warehouse.engine import get_engine
from ..warehouse.identifiers import split_table_name
from ..warehouse.permissions import check_output_writable
from ..warehouse.schema import OutputTables, ensure_output_tables
from ..warehouse.scoring_key import ScoringKey
from ..warehouse.segments import ensure_segments_table, segment_column, segments_table
from ..warehouse.source import SourceTable, SourceTableError, reflect_source
from ..warehouse.types import stored_length
from .config import PipelineConfig
from .formats import SPAN_FORMATS, RowsReader, SourceReader, make_reader
from .judges import build_judge
from .mapping import DEFAULT_MAPPING, mapping_of

__all__ = ["PipelineContext", "prepare", "check_key_fits", "scoring_key", "with_segments"]


@dataclass
class PipelineContext:
    """Build once with ``prepare`` and pass to ``plan_chunks``/``score_chunk``/``finalize_run``."""

    config: PipelineConfig
    engine: Engine
    tables: OutputTables
    source: SourceTable
    metric: BaseRetrievalMetric
    #: None for a metric kind that needs no judge (``MetricKind.needs_judge``)
    judge: JudgeModel | None
    key: ScoringKey
    #: circuit breaker and request quota shared by every chunk scored with this context
    guards: JudgeGuards = field(default_factory=JudgeGuards)
    #: how the source's rows become cases (``formats.make_reader``: a flat table or spans)
    reader: SourceReader | None = None
    #: what the chunks' write-backs did (``config.write_back``), summed for the run's notes
    write_backs: WriteBackResult = field(default_factory=lambda: WriteBackResult(""))

    def __post_init__(self) -> None:
        if self.reader is None:
            self.reader = RowsReader(self.source, self.config.kind.row_to_case)

    @property
    def rows(self) -> SourceReader:
        """``reader``, never None (set in ``__post_init__``)."""
        assert self.reader is not None
        return self.reader

    @property
    def segments(self) -> tuple[str, ...]:
        """The segment columns whose values the score rows carry (``config.segments``)."""
        return tuple(self.config.segments or ())

    @property
    def segments_table(self) -> Table | None:
        """``ctxprec_segments`` with this run's ``seg_`` columns (created by ``prepare``)."""
        return segments_table(self.config.output_schema, self.segments) if self.segments else None

    @property
    def log_id_limit(self) -> int | None:
        """The characters a ``log_id`` holds on this warehouse (None: any): a row whose id is
        longer can be neither scored nor recorded (``intake`` leaves it, the ledger names it)."""
        return stored_length(self.engine, self.tables.scores.c["log_id"])

    @property
    def judge_is_offline(self) -> bool:
        return self.judge is None or bool(getattr(self.judge, "offline", False))


def check_key_fits(tables: OutputTables, key: ScoringKey, engine: Engine) -> None:
    """Refuse, before any judge call, a scoring key the output columns cannot hold on the
    warehouse (a custom judge's 300-character name would otherwise fail at the first write,
    after judging)."""
    for name, value in (
        ("metric", key.metric),
        ("judge_model", key.judge_model),
        ("prompt_version", key.prompt_version),
    ):
        limit = stored_length(engine, tables.scores.c[name])
        if not isinstance(value, str) or not value or (limit is not None and len(value) > limit):
            got = f"{len(value):,} characters" if isinstance(value, str) else type(value).__name__
            raise JudgeConfigurationError(
                f"the {name} {str(value)[:40]!r} cannot be stored: ctxprec_scores.{name} "
                f"holds 1 to {limit} characters, got {got}"
            )


def legacy_sources(config: PipelineConfig) -> dict[str, str]:
    """metric -> input table, for output rows written before ``source_table`` existed: this
    config's table for its metric, ``config.legacy_sources`` (else the default table) for the others."""
    from .kinds import METRIC_KINDS

    out = {name: config.legacy_sources.get(name) or kind.default_table for name, kind in METRIC_KINDS.items()}
    out[config.metric] = source_table_name(config.table_name, config.source_schema)
    return out


def legacy_mappings(config: PipelineConfig) -> dict[str, str]:
    """metric -> mapping fingerprint, for output rows written before ``mapping`` existed: this
    config's mapping for its metric, ``config.legacy_mappings`` (else the default mapping) for the
    others (``warehouse/migrate.py`` says why)."""
    from .kinds import METRIC_KINDS

    out = {name: config.legacy_mappings.get(name) or DEFAULT_MAPPING for name in METRIC_KINDS}
    out[config.metric] = mapping_of(config)
    return out


def source_table_name(table: str, schema: str | None) -> str:
    """The name recorded in ``source_table``: ``schema.table`` or ``table`` (as ``SourceTable.name``)."""
    schema, name = split_table_name(table, schema, "source table name")
    return f"{schema}.{name}" if schema else name


def scoring_key(metric: BaseRetrievalMetric, source_name: str, config: PipelineConfig) -> ScoringKey:
    """What identifies a score of this run: metric, judge model, prompt version, input table and
    column mapping (``pipeline.mapping``) — the one place the key is built. The segment columns
    (``config.segments``) are part of the identity too: a score counts as done for this
    configuration only when its segment row was recorded with exactly these columns (``intake``),
    so a changed list re-scores (the judgment cache answers every node already judged)."""
    return ScoringKey(
        metric.metric_name, metric.evaluation_model, metric.prompt_version, source_name, mapping_of(config)
    )


def with_segments(source: SourceTable, segments: tuple[str, ...]) -> tuple[SourceTable, tuple[str, ...]]:
    """``source`` reading the segment columns too (as ``seg_<name>`` in each row), and the segment
    names as the table spells its columns (``TENANT`` names the column ``tenant``: one segment,
    not two). A segment column the table lacks is a ``SourceTableError``, before any judge call."""
    if not segments:
        return source, segments
    by_lower: dict[str, list[Any]] = {}
    for c in source.table.columns:
        by_lower.setdefault(c.name.lower(), []).append(c)
    extra = {}
    names: list[str] = []
    for name in segments:
        col = source.table.columns.get(name)
        if col is None and len(by_lower.get(name.lower(), [])) == 1:
            col = by_lower[name.lower()][0]
        if col is None:
            raise SourceTableError(
                f"segment column {name!r} is not a column of {source.name}; "
                f"its columns are: {', '.join(c.name for c in source.table.columns)}"
            )
        if col.name not in names:
            names.append(col.name)
            extra[segment_column(col.name)] = col
    return source.with_columns(extra), tuple(names)


def prepare(config: PipelineConfig) -> PipelineContext:
    """Resolve the config: engine, source table (reflected and checked against the metric's
    column set), judge and metric, then the output tables (created if missing). Validate first,
    create after: a run refused for a missing table or column, or a judge that cannot be built,
    leaves the user's warehouse as it was."""
    engine = get_engine(config.warehouse)
    source = reflect_source(
        engine,
        config.table_name,
        config.source_schema,
        config.source_columns.as_dict(),
        columns_env="CTXPREC_SPAN_COLUMNS" if config.source_format in SPAN_FORMATS else config.kind.columns_env,
        optional=config.source_columns.optional_missing_ok(),
    )
    source, segments = with_segments(source, tuple(config.segments or ()))
    if segments != tuple(config.segments or ()):
        config = replace(config, segments=segments)
    reader = make_reader(config, engine, source)
    judge = None
    if config.kind.needs_judge:  # a pure computation (labels) needs no judge, key or endpoint
        judge = build_judge(config)
    metric = config.kind.build(config, judge)
    old = legacy_mappings(config)
    tables = ensure_output_tables(engine, config.output_schema, legacy_sources(config), old)
    # without segments: only an existing ctxprec_segments is brought up to date (mapping)
    ensure_segments_table(engine, config.output_schema, segments, old, create=bool(segments))
    check_output_writable(engine, tables)  # before any judge call: a missing grant fails now, not after paying
    key = scoring_key(metric, reader.name, config)
    check_key_fits(tables, key, engine)
    breaker = CircuitBreaker(
        config.outage_tolerance,
        endpoint=getattr(judge, "endpoint", None),
        trip_after=trip_after_for(config.concurrency),
    )
    guards = JudgeGuards(breaker=breaker, quota=RequestQuota(config.max_rpm, config.max_tpm))
    return PipelineContext(config, engine, tables, source, metric, judge, key, guards, reader)
