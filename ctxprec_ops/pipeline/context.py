"""``PipelineContext``: what a config resolves to (engine, tables, source, judge, metric)."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy.engine import Engine

from ..judges.base import JudgeModel
from ..metrics.base import BaseRetrievalMetric
from ..warehouse.engine import get_engine
from ..warehouse.schema import OutputTables, ensure_output_tables
from ..warehouse.source import SourceTable, reflect_source
from ..warehouse.store import ScoringKey
from .config import PipelineConfig

__all__ = ["PipelineContext", "prepare"]


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

    @property
    def judge_is_offline(self) -> bool:
        return self.judge is None or bool(getattr(self.judge, "offline", False))


def prepare(config: PipelineConfig) -> PipelineContext:
    """Resolve the config: engine, output tables (created if missing), source table (reflected
    and checked against the metric's column set), judge and metric."""
    from ..judges import make_judge

    engine = get_engine(config.warehouse)
    tables = ensure_output_tables(engine, config.output_schema)
    source = reflect_source(engine, config.table_name, config.source_schema, config.source_columns.as_dict(),
                            columns_env=config.kind.columns_env,
                            optional=config.source_columns.optional_missing_ok())
    judge = None
    if config.kind.needs_judge:  # a pure computation (labels) needs no judge, key or endpoint
        judge = make_judge(config.judge, base_url=config.judge_base_url, api_key=config.judge_api_key,
                           timeout=config.judge_timeout)
    metric = config.kind.build(config, judge)
    key = ScoringKey(metric.metric_name, metric.evaluation_model, metric.prompt_version)
    return PipelineContext(config, engine, tables, source, metric, judge, key)
