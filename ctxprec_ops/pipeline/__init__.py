"""The partition-scoring pipeline that the CLI, the Airflow operators and the Dagster assets call.

``score_partition`` = ``plan_chunks`` + ``score_chunk`` for every chunk + ``finalize_run``.
Each step can run on its own (Airflow maps ``score_chunk`` over the planned chunks):

- ``kinds``: the metric-kind registry (the only list of metrics);
- ``config``/``columns``: ``PipelineConfig`` and the input tables' column sets;
- ``records``: ``Chunk``, ``ChunkResult``, ``RunSummary``, ``RunStatus``, ``ProgressEvent``;
- ``context``: ``prepare`` resolves a config (engine, tables, source, judge, metric);
- ``plan``: ``plan_chunks`` streams ids (never rows) and cuts keyset boundaries;
- ``chunk``: a chunk's intake (read, validate, preload cached judgments) and its write (one
  transaction); ``score_chunk`` scores one chunk;
- ``stream``: many chunks through one judging queue (read-ahead and write-behind threads);
- ``finalize``: ``finalize_run`` computes the partition's figures into ``ctxprec_runs``;
- ``run``: ``score_partition``; ``workers``: chunks in worker processes;
- ``outcome``: the one ``done``/``retry``/``fail`` policy every entry point maps from.

Re-running a partition is idempotent and only judges what is missing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .columns import ColumnSet, ConversationColumns, SourceColumns
    from .config import PipelineConfig
    from .context import PipelineContext, prepare
    from .finalize import finalize_run
    from .kinds import DEFAULT_METRIC, METRIC_KINDS, METRIC_NAMES, MetricKind, metric_kind
    from .outcome import Decision, Outcome, decide, decide_error
    from .plan import plan_chunks
    from .records import (
        INPUT_PROBLEMS,
        Chunk,
        ChunkResult,
        ProgressCallback,
        ProgressEvent,
        RunStatus,
        RunSummary,
    )
    from .run import score_partition
    from .stream import score_chunk

#: public name -> its module (imported on first use, ``ctxprec_ops._lazy``)
_EXPORTS = {
    "ColumnSet": ".columns",
    "ConversationColumns": ".columns",
    "SourceColumns": ".columns",
    "PipelineConfig": ".config",
    "PipelineContext": ".context",
    "prepare": ".context",
    "finalize_run": ".finalize",
    "DEFAULT_METRIC": ".kinds",
    "METRIC_KINDS": ".kinds",
    "METRIC_NAMES": ".kinds",
    "MetricKind": ".kinds",
    "metric_kind": ".kinds",
    "Decision": ".outcome",
    "Outcome": ".outcome",
    "decide": ".outcome",
    "decide_error": ".outcome",
    "plan_chunks": ".plan",
    "INPUT_PROBLEMS": ".records",
    "Chunk": ".records",
    "ChunkResult": ".records",
    "ProgressCallback": ".records",
    "ProgressEvent": ".records",
    "RunStatus": ".records",
    "RunSummary": ".records",
    "score_partition": ".run",
    "score_chunk": ".stream",
}

__all__ = [
    "MetricKind",
    "METRIC_KINDS",
    "METRIC_NAMES",
    "DEFAULT_METRIC",
    "metric_kind",
    "ColumnSet",
    "SourceColumns",
    "ConversationColumns",
    "PipelineConfig",
    "PipelineContext",
    "Chunk",
    "ChunkResult",
    "RunSummary",
    "RunStatus",
    "ProgressEvent",
    "ProgressCallback",
    "prepare",
    "plan_chunks",
    "score_chunk",
    "finalize_run",
    "score_partition",
    "INPUT_PROBLEMS",
    "Outcome",
    "Decision",
    "decide",
    "decide_error",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
