"""``ctxprec batches``: see, collect and cancel the batches recorded in ``ctxprec_batches``.

A batch belongs to a scoring configuration (partition, metric, judge model, prompt version). A
run of that configuration collects it; one of another configuration only names it (a submitted
batch is paid for). ``collect_batch`` runs the batch's own configuration for its partition (the
one run path, in batch mode); ``cancel_batch`` asks the provider to stop it and finishes its row
once the provider says it ended.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from ..errors import CtxPrecError, JudgeConfigurationError
from ..judge.cascade import parse_cascade_name
from ..judge.models import make_judge
from ..judge.models.openai_judge import OpenAIJudge
from ..warehouse.engine import get_engine
from .api import TERMINAL_STATUSES, BatchClient
from .store import BatchRecord, batches_table, get_batch, list_batches, update_batch

if TYPE_CHECKING:
    from ..pipeline.config import PipelineConfig
    from ..pipeline.records import ProgressCallback, RunSummary

__all__ = ["BatchNotFoundError", "batch_records", "collect_batch", "cancel_batch"]


class BatchNotFoundError(CtxPrecError, LookupError):
    error_type = "usage"
    retryable = False


def batch_records(config: PipelineConfig, *, open_only: bool = False, limit: int = 200) -> list[BatchRecord]:
    """The warehouse's most recent batches, newest first. Only reads (``batches list`` needs SELECT
    rights only): no table is created (none yet: no batches)."""
    from ..warehouse.reflect import get_columns, has_table
    from .store import BATCHES

    engine = get_engine(config.warehouse, read_only=True)
    if not has_table(engine, BATCHES, config.output_schema):
        return []
    table = batches_table(engine, config.output_schema, create=False)
    stored = {c["name"] for c in get_columns(engine, BATCHES, config.output_schema)}  # an older table: fewer
    return list_batches(engine, table, open_only=open_only, limit=limit, columns=stored)


def _record(config: PipelineConfig, batch_id: str) -> BatchRecord:
    engine = get_engine(config.warehouse)
    record = get_batch(engine, batches_table(engine, config.output_schema), batch_id)
    if record is None:
        raise BatchNotFoundError(f"no batch {batch_id!r} in ctxprec_batches (see `ctxprec batches list`)")
    return record


def collect_batch(config: PipelineConfig, batch_id: str, progress: ProgressCallback | None = None) -> RunSummary:
    """Score the batch's partition with the batch's own judge model and metric in batch mode: the
    run waits for the batch, writes what it answered and finishes its row. ``config`` gives the
    rest (warehouse, source table, column mapping, template)."""
    from ..pipeline.context import prepare
    from ..pipeline.run import score_partition

    record = _record(config, batch_id)
    if record.finished_at is not None:
        raise BatchNotFoundError(
            f"batch {batch_id} was collected already (finished {record.finished_at:%Y-%m-%d %H:%M} UTC)"
        )
    own = replace(config, judge=record.judge_model, metric=record.metric, judge_mode="batch")
    cascade = parse_cascade_name(record.judge_model)
    if cascade is not None:  # a cascade's batch: its own judges and threshold (or target)
        cheap, strong, rule, value = cascade
        below, target = (value, None) if rule == "below" else (None, value)
        own = replace(own, judge=cheap, escalate_to=strong, escalate_below=below, target_agreement=target)
    key = prepare(own).key
    if key.prompt_version != record.prompt_version:
        raise JudgeConfigurationError(
            f"batch {batch_id} was asked with prompt version {record.prompt_version}; this configuration's prompt "
            f"is {key.prompt_version}, so its answers cannot be matched: cancel it with `ctxprec batches cancel "
            f"{batch_id}`"
        )
    return score_partition(own, record.partition_key, progress=progress)


def cancel_batch(
    config: PipelineConfig,
    batch_id: str,
    *,
    wait_seconds: float = 60.0,
    sleep: Callable[[float], None] = time.sleep,
) -> BatchRecord:
    """Ask the provider to cancel the batch; once it has ended (within ``wait_seconds``) its row
    is finished, so no run waits for it. Lines it answered before stopping stay reusable."""
    record = _record(config, batch_id)
    judge = make_judge(record.model or record.judge_model, base_url=config.judge_base_url, api_key=config.judge_api_key)
    if not isinstance(judge, OpenAIJudge):
        raise JudgeConfigurationError(
            f"batch {batch_id}'s judge {record.judge_model!r} is not an OpenAI-compatible model"
        )
    engine = get_engine(config.warehouse)
    table = batches_table(engine, config.output_schema)
    client = BatchClient(judge)
    try:
        batch = client.retrieve(batch_id)
        if str(batch.status) not in TERMINAL_STATUSES:
            batch = client.cancel(batch_id)
        deadline, delay = time.monotonic() + wait_seconds, 0.5
        while str(batch.status) not in TERMINAL_STATUSES and time.monotonic() < deadline:
            sleep(delay)
            delay = min(delay * 1.5, 10.0)
            batch = client.retrieve(batch_id)
    finally:
        client.close()
    values: dict[str, object] = {"status": str(batch.status)}
    if str(batch.status) in TERMINAL_STATUSES:
        values.update(
            output_file_id=batch.output_file_id, error_file_id=batch.error_file_id, finished_at=datetime.now(UTC)
        )
    update_batch(engine, table, batch_id, **values)
    return _record(config, batch_id)
