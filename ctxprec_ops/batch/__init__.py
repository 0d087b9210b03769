"""Batch judge mode (``judge_mode="batch"``): score a partition through the OpenAI Batch API at
the batch price, resumable from ``ctxprec_batches``. See ``partition.py``."""

from .partition import BatchOptions, BatchStep, batch_step, score_partition_batch

__all__ = ["BatchOptions", "BatchStep", "batch_step", "score_partition_batch"]
