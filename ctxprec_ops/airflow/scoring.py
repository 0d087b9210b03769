"""The scoring operators: plan a partition into chunks, score a chunk or a whole partition.

- ``ContextualPrecisionPlanOperator``: cut a partition into chunks (XCom: list of chunk dicts).
- ``ContextualPrecisionOperator``: score one chunk (mapped: ``.partial(...).expand(chunk=...)``)
  or, without ``chunk``, the whole partition. XCom: a few counts, never rows, never secrets.
  Batch mode (``judge_mode="batch"``) is the same ``score_partition`` call, deferred to
  ``BatchPollTrigger`` while the run waits on the provider (``summary.waiting``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from airflow.sdk.exceptions import AirflowFailException

from ..pipeline.outcome import Outcome, decide
from ..pipeline.records import ChunkResult, RunSummary
from .base import SETTING_ARGUMENTS, CtxPrecBaseOperator, CtxPrecTaskError, apply_decision
from .values import opt_int, partition_value, public

__all__ = ["ContextualPrecisionPlanOperator", "ContextualPrecisionOperator"]


class ContextualPrecisionPlanOperator(CtxPrecBaseOperator):
    """Cut the partition into keyset chunks; returns ``[chunk.to_dict(), ...]`` for mapping.

    At most ``max_chunks`` chunks (default: Airflow's ``[core] max_map_length``): a larger
    partition gets proportionally larger chunks instead of failing the mapping.
    """

    template_fields: Sequence[str] = (*CtxPrecBaseOperator.template_fields, "max_chunks")
    lineage_outputs = ()  # planning only reads the logs

    def __init__(self, *, max_chunks: int | str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.max_chunks = max_chunks

    def _max_chunks(self) -> int:
        explicit = opt_int(self.max_chunks, "max_chunks")
        if explicit:
            return explicit
        from airflow.sdk import conf

        return conf.getint("core", "max_map_length", fallback=1024)

    def execute(self, context: Any) -> list[dict[str, Any]]:
        from ..pipeline import plan_chunks

        key = partition_value(self.partition_key)
        config = self.pipeline_config()
        chunks = self._call(plan_chunks, config, key)
        limit = self._max_chunks()
        if len(chunks) > limit:
            rows = sum(c.rows for c in chunks)
            config.chunk_size = math.ceil(rows / limit)
            self.log.info(
                "%d chunks exceed max_chunks=%d: re-planning with chunk size %d", len(chunks), limit, config.chunk_size
            )
            chunks = self._call(plan_chunks, config, key)
        if config.cascaded:  # a cascade's threshold: chosen (or found) once, before the chunk tasks
            from ..pipeline.cascade import calibrate_partition

            ready = self._call(calibrate_partition, config, key)
            if ready is not None:
                self.log.info("partition %s: %s", key, ready.note)
        rows = sum(c.rows for c in chunks)
        self.log.info(
            "partition %s (%s): %d rows in %d chunk(s) of at most %d",
            key,
            config.metric,
            rows,
            len(chunks),
            config.rows_per_chunk,
        )
        return [c.to_dict() for c in chunks]


class ContextualPrecisionOperator(CtxPrecBaseOperator):
    """Score one planned ``chunk`` (a dict from the plan task), or the whole partition.

    Mapped over the plan: ``ContextualPrecisionOperator.partial(task_id=..., ...)
    .expand(chunk=plan.output)``. Returns a small summary (counts, tokens, cost; the mean
    too when scoring a whole partition). Rows whose judge calls kept failing raise
    ``JudgeOutageError`` so Airflow retries the task (``fail_on_judge_errors``); the retry
    re-judges only what is still missing.
    """

    template_fields: Sequence[str] = (*CtxPrecBaseOperator.template_fields, "chunk", "judge_mode")
    setting_arguments = {**SETTING_ARGUMENTS, "judge_mode": "judge_mode"}

    def __init__(
        self,
        *,
        chunk: dict[str, Any] | None = None,
        fail_on_judge_errors: bool = True,
        judge_mode: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.chunk = chunk
        self.fail_on_judge_errors = fail_on_judge_errors
        #: ``sync`` or ``batch`` (default: CTXPREC_JUDGE_MODE); batch mode scores the whole
        #: partition and defers to ``BatchPollTrigger`` while the provider works
        self.judge_mode = judge_mode

    def execute(self, context: Any) -> dict[str, Any]:
        from ..pipeline import Chunk, score_chunk, score_partition

        config = self.pipeline_config()
        run_id = self.ctxprec_run_id(context)
        if config.judge_mode == "batch":
            if self.chunk:
                raise AirflowFailException("batch mode scores a whole partition: do not map it over chunks")
            return self._batch_step(context, config, {})
        if self.chunk:
            try:
                chunk = Chunk.from_dict(dict(self.chunk))
            except TypeError as exc:
                raise AirflowFailException(f"chunk is not a planned chunk: {exc}") from None
            self.log.info(
                "scoring chunk %d of %s: %d row(s), ids (%r, %r]",
                chunk.index,
                chunk.partition_key,
                chunk.rows,
                chunk.after_id,
                chunk.upto_id,
            )
            result = self._call(score_chunk, config, chunk, run_id=run_id)
            out = public(result.to_dict())
            self.record_result(context, out, partition_key=chunk.partition_key, config=config)
        else:
            key = partition_value(self.partition_key)
            self.log.info("scoring the whole partition %s", key)
            summary = self._call(score_partition, config, key, run_id=run_id)
            out = public(summary.to_dict())
            self.record_result(context, out, partition_key=key, config=config)
            result = summary
        self.log.info("result: %s", out)
        self.finish(result)
        return out

    def _batch_step(self, context: Any, config: Any, resume: dict[str, Any]) -> dict[str, Any]:
        """Score the partition (the one run path) without blocking on the provider: defer to the
        trigger while its batches run (the run's ``waiting`` state), finish when nothing is left."""
        from ..pipeline import score_partition

        key = partition_value(self.partition_key)
        run_id = self.ctxprec_run_id(context)
        summary = self._call(score_partition, config, key, run_id=run_id, wait=False, resume=resume or None)
        waiting = summary.waiting
        if waiting is not None:
            from .triggers import BatchPollTrigger

            self.log.info(
                "partition %s: deferring while %d batch(es) run: %s", key, len(waiting.ids), ", ".join(waiting.ids)
            )
            self.defer(
                trigger=BatchPollTrigger(
                    waiting.ids,
                    base_url=config.judge_base_url,
                    judge_conn_id=self.judge_conn_id,
                    poll_seconds=waiting.poll_seconds,
                ),
                method_name="resume_batch",
                kwargs={"state": waiting.resume},
            )
        out = public(summary.to_dict())
        self.record_result(context, out, partition_key=key, config=config)
        self.log.info("result: %s", out)
        self.finish(summary)
        return out

    def resume_batch(
        self, context: Any, event: dict[str, Any] | None = None, state: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        """Back from the trigger: the next pass writes what the batches answered (or submits the next round)."""
        if event and event.get("status") == "error":
            raise CtxPrecTaskError(f"polling the batches failed: {event.get('message')}")
        if event:
            self.log.info("batches ended: %s", event.get("batches"))
        return self._batch_step(context, self.pipeline_config(), dict(state or {}))

    def finish(self, result: ChunkResult | RunSummary) -> None:
        """Apply the outcome policy to a chunk's or partition's result (``fail_on_judge_errors=False``
        turns a ``retry`` into success: the failed rows wait for the next run)."""
        decision = decide(result)
        self.log.info("outcome: %s: %s", decision.outcome, decision.reason)
        if decision.outcome is Outcome.RETRY and not self.fail_on_judge_errors:
            return
        apply_decision(decision)
