"""Sources that are not tables of the warehouse, staged into one before a run plans.

Arize Phoenix (``config.phoenix_url`` without a ``source_table``): the day's spans are read from
the server into the staging table ``phoenix_<project>`` (``traces/phoenix.py``), then the run
path scores that table as any OpenInference spans table. Staging is idempotent (spans already
there are not inserted again), so every entry point that plans — ``score_partition``,
``plan_chunks`` (Airflow's plan task) — stages first.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from ..warehouse.engine import get_engine

if TYPE_CHECKING:
    from ..traces.span_store import SpanLoad
    from ..warehouse.source import Partition
    from .config import PipelineConfig

__all__ = ["stage_source"]

log = logging.getLogger("ctxprec_ops.pipeline")


def stage_source(config: PipelineConfig, partition: Partition) -> SpanLoad | None:
    """Load the partition's spans from Phoenix when it is the source; None otherwise."""
    if not config.reads_phoenix:
        return None
    from ..traces.phoenix import load_phoenix_day

    target = config.phoenix
    assert target is not None
    loaded = load_phoenix_day(get_engine(config.warehouse), target, partition, schema=config.source_schema)
    log.info("Phoenix %s project %s, %s: %s", target.url, target.project, partition.key, loaded.summary())
    return loaded
