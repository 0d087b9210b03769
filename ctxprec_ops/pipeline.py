"""The partition-scoring function that the CLI, the Airflow operator and the Dagster asset call.

STUB: interface fixed, implementation in progress (see docs/internals.md).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any, Callable, Literal

from sqlalchemy.engine import Engine

from .judges.base import JudgeModel

MetricName = Literal["contextual_precision", "turn_contextual_precision"]


@dataclass(frozen=True)
class SourceColumns:
    """Column names of the retrieval-log table (validated identifiers)."""

    id: str = "id"
    event_time: str = "event_time"
    input: str = "input"
    actual_output: str = "actual_output"
    expected_output: str = "expected_output"
    retrieval_context: str = "retrieval_context"


@dataclass(frozen=True)
class ConversationColumns:
    """Column names of the conversation-log table (validated identifiers)."""

    id: str = "id"
    event_time: str = "event_time"
    turns: str = "turns"
    expected_outcome: str = "expected_outcome"


@dataclass
class PipelineConfig:
    """What to score, where, and with which judge. ``from_settings`` fills it from the env."""

    warehouse: str | Engine = "sqlite:///ctxprec.db"
    metric: MetricName = "contextual_precision"
    judge: str | JudgeModel = "lexical"
    judge_base_url: str | None = None
    judge_api_key: str | None = field(default=None, repr=False)
    judge_timeout: float = 60.0
    source_table: str | None = None  # default per metric: retrieval_logs / conversation_logs
    source_schema: str | None = None
    columns: SourceColumns | ConversationColumns | None = None
    threshold: float = 0.5
    strict_mode: bool = False
    chunk_size: int = 500
    concurrency: int = 16
    max_cost: float | None = None
    max_nodes_per_call: int = 20
    window_size: int = 10
    max_retries: int = 6


@dataclass(frozen=True)
class Chunk:
    """One keyset slice of a partition: ids in (after_id, upto_id], in id order."""

    partition_key: str
    index: int
    after_id: Any | None
    upto_id: Any
    rows: int

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Chunk":
        return cls(**d)


@dataclass
class ChunkResult:
    partition_key: str
    index: int
    rows_total: int = 0
    rows_scored: int = 0
    rows_cached: int = 0
    rows_failed: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = 0.0
    judge_calls: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RunSummary:
    """The ``ctxprec_runs`` row of one partition run (JSON-safe via ``to_dict``)."""

    run_id: str
    partition_key: str
    metric: str
    status: str
    rows_total: int = 0
    rows_scored: int = 0
    rows_cached: int = 0
    rows_failed: int = 0
    mean_score: float | None = None
    median_score: float | None = None
    pass_rate: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = 0.0
    judge_model: str | None = None
    prompt_version: str | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        for k in ("started_at", "finished_at"):
            if d[k] is not None:
                d[k] = d[k].isoformat()
        return d


@dataclass(frozen=True)
class ProgressEvent:
    kind: Literal["planned", "chunk_started", "rows_done", "chunk_done", "finished"]
    partition_key: str
    done: int = 0
    total: int | None = None
    message: str = ""


ProgressCallback = Callable[[ProgressEvent], None]


def plan_chunks(config: PipelineConfig, partition_key: str) -> list[Chunk]:
    raise NotImplementedError


def score_chunk(
    config: PipelineConfig, chunk: Chunk, *, run_id: str, progress: ProgressCallback | None = None
) -> ChunkResult:
    raise NotImplementedError


def finalize_run(
    config: PipelineConfig,
    partition_key: str,
    *,
    run_id: str,
    chunk_results: list[ChunkResult] | None = None,
    started_at: datetime | None = None,
) -> RunSummary:
    raise NotImplementedError


def score_partition(
    config: PipelineConfig,
    partition_key: str,
    *,
    run_id: str | None = None,
    progress: ProgressCallback | None = None,
) -> RunSummary:
    raise NotImplementedError
