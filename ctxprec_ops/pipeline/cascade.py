"""A run's judge cascade made ready: its threshold ``C`` reused, or chosen on a sample of the partition.

With ``escalate_below`` the threshold is given: nothing to do. With ``target_agreement`` the run
reuses the latest calibration of its configuration (``ctxprec_cascades``: metric, both models,
prompt version, confidence source, target) — until one of them changes or ``recalibrate`` is set.
Else it calibrates: ``calibration_nodes`` nodes drawn at random from the partition (a reservoir
over every node the partition's cases would send the judge, seeded by the partition) are judged
by both judges with ordinary calls — in batch mode too: the sample is small and the run needs
``C`` before it can say which nodes to escalate — and ``C`` is chosen (``judge/escalation.py``).
Where the ``label_set`` of ``ctxprec_labels`` holds enough labelled nodes of the input table (the
single-turn metric's nodes), the sample is drawn from them and people's labels are the reference.

The sample's verdicts go into the judgment cache like any other: the run that follows pays
nothing more for them.
"""

from __future__ import annotations

import logging
import random
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import sqlalchemy as sa

from ..errors import CtxPrecError
from ..judge.cache import DictVerdictCache
from ..judge.calls import JudgeRun, use_guards
from ..judge.escalation import Calibration, SampleNode, calibrate, draw, min_sample_for
from ..judge.limiter import AdaptiveLimiter
from ..judge.retry import RetryWaits
from ..scoring.confidence import confidence_of
from ..warehouse.cascades import cascades_table, latest_calibration, write_cascade
from ..warehouse.engine import read_connection, write_retrying
from ..warehouse.reflect import table_names
from ..warehouse.source import Partition
from ..warehouse.store import load_judgments, write_chunk
from .plan import iter_chunk_rows
from .records import ChunkResult

if TYPE_CHECKING:
    from .context import PipelineContext

__all__ = ["CascadeReady", "calibrate_partition", "ensure_cascade", "identity_of", "stage_columns"]

log = logging.getLogger("ctxprec_ops.pipeline")

#: the metric whose nodes people label (``ctxprec_labels``: ranks of a retrieval's context)
LABELLED_METRIC = "contextual_precision"
LABELS = "ctxprec_labels"


def identity_of(metric: Any) -> dict[str, Any]:
    """The fields a stored calibration of ``metric``'s cascade must match to be reused
    (``warehouse.cascades.IDENTITY``)."""
    cascade = metric.cascade
    assert cascade is not None
    return {
        "metric": metric.metric_name,
        "cheap_model": metric.model.get_model_name(),
        "strong_model": cascade.strong_model,
        "prompt_version": metric.prompt_version,
        "confidence": cascade.confidence,
        "target_agreement": float(cascade.target_agreement or 0.0),
    }


def _from_row(row: dict[str, Any]) -> Calibration:
    fields = Calibration.__dataclass_fields__
    return Calibration(**{k: row[k] for k in fields if k in row})


@dataclass
class CascadeReady:
    """What making a run's cascade ready did: a line for its output, whether it calibrated now
    (else it reused a stored calibration), and what calibrating spent (a ``ChunkResult`` for the
    run's figures)."""

    note: str
    calibrated: bool = False
    spend: ChunkResult | None = None


def ensure_cascade(
    ctx: PipelineContext,
    partition: Partition | None,
    *,
    recalibrate: bool = False,
    calibrate: bool = True,
    run_id: str | None = None,
) -> CascadeReady | None:
    """Set the run's cascade threshold (see the module docstring); None when there is no cascade,
    its threshold is given or already set. ``calibrate=False``: only a stored calibration is taken
    (a run's summary, written after its chunks; no ``partition`` needed)."""
    metric = ctx.metric
    cascade = getattr(metric, "cascade", None)
    if cascade is None or cascade.target_agreement is None:
        return None
    if cascade.calibrated and not recalibrate:
        return None
    schema = ctx.config.output_schema
    if not recalibrate:
        row = latest_calibration(ctx.engine, identity_of(ctx.metric), schema)
        if row is not None:
            calibration = _from_row(row)
            metric.set_threshold(calibration.escalate_below, calibration)
            at = row["calibrated_at"]
            when = at.strftime("%Y-%m-%d") if hasattr(at, "strftime") else str(at)[:10]
            sample = "label set" if row.get("partition_key") == "labels" else f"a sample of {row.get('partition_key')}"
            return CascadeReady(f"cascade: {calibration.summary()} ({sample}, calibrated {when}; reused)")
    if not calibrate or partition is None:
        return None
    calibration, where = _calibrate(ctx, partition)
    columns = cascades_table(schema).c
    row = {
        **{k: v for k, v in calibration.to_dict().items() if k in columns},
        **identity_of(ctx.metric),
        "calibration_id": uuid.uuid4().hex,
        "source_table": ctx.key.source_table,
        "partition_key": where,
        "run_id": run_id,
    }
    write_retrying(ctx.engine, lambda conn: write_cascade(conn, row, schema))
    metric.set_threshold(calibration.escalate_below, calibration)
    sample = f"label set {ctx.config.label_set}" if where == "labels" else f"a sample of {where}"
    note = f"cascade: {calibration.summary()} ({sample})"
    log.info("partition %s: %s", partition, note)
    spend = ChunkResult(partition.key, -1, judge_calls=calibration.judge_calls)
    spend.prompt_tokens = calibration.prompt_tokens or 0
    spend.completion_tokens = calibration.completion_tokens or 0
    spend.cheap_cost, spend.strong_cost = calibration.cheap_cost, calibration.strong_cost
    spend.cost = None if spend.cheap_cost is None or spend.strong_cost is None else spend.cheap_cost + spend.strong_cost
    return CascadeReady(note, True, spend)


def calibrate_partition(config: Any, partition_key: str | Partition) -> CascadeReady | None:
    """``ensure_cascade`` for a run whose chunks are scored apart (an Airflow plan task): the
    threshold is chosen (or found) once, before them; None without a cascade."""
    if getattr(config, "escalate_to", None) is None:
        return None
    from .context import prepare

    return ensure_cascade(prepare(config), Partition.of(partition_key), recalibrate=bool(config.recalibrate))


def _calibrate(ctx: PipelineContext, partition: Partition) -> tuple[Calibration, str]:
    """Draw the sample, judge it with both judges (through the judgment cache), choose ``C``."""
    config, metric = ctx.config, ctx.metric
    cascade = metric.cascade
    assert cascade is not None and cascade.target_agreement is not None
    size = config.calibration_nodes
    sample = _labelled_sample(ctx, size, min_sample_for(cascade.target_agreement))
    where, label_set = ("labels", config.label_set) if sample else (partition.key, None)
    if not sample:
        sample = _partition_sample(ctx, partition, size)
    log.info(
        "partition %s: calibrating the cascade on %d nodes (%s) judged by %s and %s",
        partition, len(sample), f"label set {label_set}" if label_set else "drawn at random",
        metric.model.get_model_name(), cascade.strong_model,
    )  # fmt: skip
    versions = metric.stage_versions()
    keys = [
        k
        for n in sample
        for k in metric.stage_keys(n.question, n.expected, [n.text])  # both stages' cached verdicts
    ]
    with read_connection(ctx.engine) as conn:
        cache = DictVerdictCache(load_judgments(conn, ctx.tables, keys))
    run = JudgeRun(
        limiter=AdaptiveLimiter(config.concurrency),
        cache=cache,
        max_retries=config.max_retries,
        waits=RetryWaits(config.retry_initial_wait, config.retry_max_wait),
        breaker=ctx.guards.breaker,
        quota=ctx.guards.quota,
    )

    async def judged() -> Calibration:
        try:
            return await calibrate(
                sample, metric.model, cascade, metric.judge_template(), versions, run,
                max_nodes_per_call=config.max_nodes_per_call, samples=metric.judge_samples, label_set=label_set,
            )  # fmt: skip
        finally:
            for judge in (metric.model, cascade.strong):
                close = getattr(judge, "aclose", None)
                if close is not None:
                    await close()

    from .._async import run_sync

    try:
        with use_guards(ctx.guards):
            calibration = run_sync(judged)
    finally:
        _keep_judgments(ctx, cache)
    return calibration, where


def stage_columns(metric: Any, verdicts: list[Any]) -> dict[str, list[Any]] | None:
    """A cascade's cached verdicts as ``ctxprec_judgments`` records them: each under the model and
    prompt version of its own stage (a cheap verdict carries its confidence, a strong one none);
    None for one judge (its model and version are the run's)."""
    cascade = getattr(metric, "cascade", None)
    if cascade is None:
        return None
    cheap_version, strong_version = metric.stage_versions()
    cheap = [confidence_of(v) is not None for v in verdicts]
    return {
        "judge_model": [metric.model.get_model_name() if c else cascade.strong_model for c in cheap],
        "prompt_version": [cheap_version if c else strong_version for c in cheap],
    }


def _keep_judgments(ctx: PipelineContext, cache: DictVerdictCache) -> None:
    """The sample's new verdicts into ``ctxprec_judgments`` (each under its own stage's model)."""
    if not cache.added:
        return
    at = datetime.now(UTC)
    verdicts = list(cache.added.values())
    stages = stage_columns(ctx.metric, verdicts) or {}
    rows = [
        {
            "key": k,
            "judge_model": model,
            "prompt_version": version,
            "relevant": bool(v.relevant),
            "reason": v.reason,
            "agreement": confidence_of(v),
            "created_at": at,
        }
        for (k, v), model, version in zip(cache.added.items(), stages["judge_model"], stages["prompt_version"])
    ]
    write_retrying(
        ctx.engine,
        lambda conn: write_chunk(conn, ctx.tables, ctx.key, log_ids=[], scores=[], failures=[], judgments=rows),
    )


def _partition_sample(ctx: PipelineContext, partition: Partition, size: int) -> list[SampleNode]:
    """``size`` of the partition's nodes at random (a reservoir over every node its cases would
    send the judge, seeded by the partition: the same sample for the same rows)."""
    config, metric, reader = ctx.config, ctx.metric, ctx.rows
    rng = random.Random(f"ctxprec-cascade|{partition.key}")
    reservoir: list[SampleNode] = []
    seen = 0
    for _chunk, rows in iter_chunk_rows(
        ctx.engine, ctx.source, partition, config.rows_per_chunk, config.sample, reader
    ):
        for row in rows:
            try:
                requests = metric.judge_requests(reader.to_case(row))
            except CtxPrecError:
                continue  # bad input: scoring records it
            for r, (question, expected, texts) in enumerate(requests):
                for rank, text in enumerate(texts, start=1):
                    node = SampleNode((str(row["id"]), r), question, expected, rank, text)
                    seen += 1
                    if len(reservoir) < size:
                        reservoir.append(node)
                    elif (j := rng.randrange(seen)) < size:
                        reservoir[j] = node
    return reservoir


def _labelled_sample(ctx: PipelineContext, size: int, needed: int) -> list[SampleNode]:
    """A random ``size`` of the input table's labelled nodes (``label_set``), each with its label;
    [] when the table has fewer than ``needed`` of them (the strong judge is the reference then)."""
    if ctx.metric.metric_name != LABELLED_METRIC or ctx.config.trace_options is not None:
        return []
    labels = _labels(ctx)
    if sum(len(v) for v in labels.values()) < needed:
        if labels:
            log.info(
                "cascade: too few labelled nodes (%d < %d): the strong judge is the reference", len(labels), needed
            )
        return []
    pool: list[SampleNode] = []
    for day in _days_of(ctx, sorted(labels)):
        rows_of_day = iter_chunk_rows(
            ctx.engine, ctx.source, Partition.of(day), ctx.config.rows_per_chunk, None, ctx.rows
        )
        for _chunk, rows in rows_of_day:
            for row in rows:
                given = labels.get(str(row["id"]))
                if not given:
                    continue
                try:
                    (question, expected, texts), *_ = ctx.metric.judge_requests(ctx.rows.to_case(row))
                except (CtxPrecError, ValueError):
                    continue
                for rank, text in enumerate(texts, start=1):
                    if rank in given:
                        pool.append(SampleNode((str(row["id"]), 0), question, expected, rank, text, given[rank]))
    if len(pool) < needed:
        return []
    return [pool[i] for i in draw(len(pool), size, f"ctxprec-cascade-labels|{ctx.config.label_set}")]


def _labels(ctx: PipelineContext) -> dict[str, dict[int, bool]]:
    """``{log id: {node: relevant}}`` of the label set for the input table (none: no table)."""
    schema = ctx.config.output_schema
    if LABELS not in table_names(ctx.engine, schema):
        return {}
    t = sa.Table(LABELS, sa.MetaData(schema=schema), autoload_with=ctx.engine)
    q = sa.select(t.c.log_id, t.c.node, t.c.relevant).where(
        t.c.label_set == ctx.config.label_set, t.c.source_table == ctx.key.source_table
    )
    out: dict[str, dict[int, bool]] = {}
    with read_connection(ctx.engine) as conn:
        for log_id, node, relevant in conn.execute(q):
            out.setdefault(str(log_id), {})[int(node)] = bool(relevant)
    return out


def _days_of(ctx: PipelineContext, log_ids: list[str]) -> list[str]:
    """The partitions the labelled rows were scored in (labels are imported for scored rows)."""
    s = ctx.tables.scores
    days: set[str] = set()
    with read_connection(ctx.engine) as conn:
        for start in range(0, len(log_ids), 500):
            q = sa.select(s.c.partition_key).distinct()
            q = q.where(s.c.source_table == ctx.key.source_table, s.c.log_id.in_(log_ids[start : start + 500]))
            days.update(str(d) for (d,) in conn.execute(q))
    return sorted(days)
