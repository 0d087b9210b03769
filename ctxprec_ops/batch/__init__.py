"""Batch judge mode (``judge_mode="batch"``): judge requests through the OpenAI Batch API at the
batch price, resumable from ``ctxprec_batches``.

A batch-mode run is the ordinary ``pipeline.score_partition``; this package only supplies its
transport (``transport.BatchTransport``, registered as the ``batch`` entry point of
``ctxprec_ops.transports``): ``judge.py`` answers or defers each request, ``results.py`` reads
result files line by line, ``api.py`` talks to the provider, ``store.py`` keeps ``ctxprec_batches``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .transport import BatchOptions, BatchTransport

if TYPE_CHECKING:
    from ..pipeline.config import PipelineConfig
    from ..pipeline.records import ProgressCallback, RunSummary

__all__ = ["BatchOptions", "BatchTransport", "score_partition_batch"]


def score_partition_batch(
    config: PipelineConfig,
    partition_key: str,
    *,
    run_id: str | None = None,
    progress: ProgressCallback | None = None,
    options: BatchOptions | None = None,
    **kwargs: Any,
) -> RunSummary:
    """``score_partition`` in batch mode with these ``options`` (how batches are cut and waited for)."""
    from dataclasses import replace

    from ..pipeline.run import score_partition

    if config.judge_mode != "batch":
        config = replace(config, judge_mode="batch")
    transport = BatchTransport(options)
    return score_partition(config, partition_key, run_id=run_id, progress=progress, transport=transport, **kwargs)
