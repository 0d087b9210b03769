"""``BatchTransport``: judge requests through the OpenAI Batch API, inside the one run path.

A run (``pipeline.run.score_partition``) scores the partition in passes. In a pass, the metric's
judge (``BatchJudge``) answers from the partition's batches; each request without an answer is
recorded and its case deferred. Between passes this transport:

1. ``flush``: submits what the pass recorded — request lines (``custom_id`` =
   ``metric|log id|call|prompt hash``) in partition order, split into files at the provider's
   limits, each batch recorded in ``ctxprec_batches`` the moment it exists (a restarted worker
   finds it and never pays for it twice); with ``max_cost``, only what the budget affords;
2. ``pending``/``wait``: polls the open batches (one retrieve each; ``wait`` backs off up to
   ``poll_seconds``), reporting progress;
3. ``collect``: reads the ended batches' result files line by line (``results.py``: a bad line or a
   conflicting duplicate costs its request, never the file) and the input file (to know which
   requests got no line at all);
4. ``settle``: once the next pass has written the answered cases, finishes the batches' rows
   (status, files, answered/failed, tokens, cost, ``finished_at``).

A request no batch answered usably is asked again in the next batch (``batch_retry="batch"``,
at the batch price) or at once as a sync call (``"sync"``, at the full price), at most
``max_rounds`` submissions per run; a request whose answer came back unreadable twice is not asked
a third time. Then it is given up on: its row is a ``judge_unavailable`` failure naming the batch
and the cause, and the run's message counts such rows.

A judge cascade (``judge/cascade.py``) runs its stages as batches of their own: the cheap judge's
requests (with ``logprobs``) in the first round; once they are answered, the next pass knows which
nodes the cheap judge was unsure of and records the strong judge's requests for them, which go out
in the next round (one batch per model, as the Batch API wants; ``judge_for`` gives the strong
stage its ``BatchJudge``). The strong stage gets one round more than ``max_rounds``.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from ..errors import BudgetExhaustedError, JudgeConfigurationError
from ..judge.models.base import Generation, JudgeModel
from ..judge.models.openai_judge import OpenAIJudge
from ..judge.pricing import batch_cost_of
from ..secrets import redact
from .api import MAX_BYTES, MAX_REQUESTS, TERMINAL_STATUSES, BatchClient, request_line, split_lines
from .judge import BatchJudge, RecordedPrompt
from .notes import round_note
from .results import BatchAnswer, request_hash, requested_ids
from .store import (
    BatchRecord,
    batches_table,
    open_batches,
    other_open_batches,
    partition_batches,
    record_batch,
    update_batch,
)

if TYPE_CHECKING:
    from ..pipeline.context import PipelineContext
    from ..pipeline.records import ProgressCallback

__all__ = ["BatchTransport", "BatchOptions"]

log = logging.getLogger("ctxprec_ops.batch")

#: a request whose batch answer came back unreadable this many times is not asked again
MAX_BAD_ANSWERS = 2


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass
class BatchOptions:
    """How batches are cut and waited for (``None``: from the run's config)."""

    #: longest wait between two polls (seconds); polls start at ``first_poll`` and grow x1.5
    poll_seconds: float | None = None
    first_poll: float = 1.0
    #: submissions per run at most (a round re-asks what an ended batch did not answer)
    max_rounds: int = 3
    max_requests: int = MAX_REQUESTS
    max_bytes: int = MAX_BYTES
    #: requests a batch did not answer usably: ``batch`` (next batch) or ``sync`` (ask at once)
    retry: str | None = None
    sleep: Callable[[float], None] = field(default=time.sleep, repr=False)


@dataclass
class _Collected:
    record: BatchRecord
    batch: Any
    answered: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0


class BatchTransport:
    """See the module docstring."""

    name = "batch"
    allows_workers = False

    def __init__(self, options: BatchOptions | None = None) -> None:
        self.options = options or BatchOptions()
        self.answers: dict[str, BatchAnswer] = {}
        #: prompt hash -> why no batch answered it usably (this invocation's collected batches)
        self.unanswered: dict[str, str] = {}
        self.recorded: dict[str, RecordedPrompt] = {}
        self.unaffordable: set[str] = set()
        self._collected: list[_Collected] = []
        self._batches: dict[str, Any] = {}  # provider objects of the open batches, last poll
        self._prior_loaded = False
        self._closed_ids: set[str] = set()  # batches whose answers are in ``answers`` already
        self.spent = 0.0
        self.sync_calls = 0
        self.sync_cost: float | None = 0.0
        self.gave_up: dict[str, int] = {}

    # -- binding -------------------------------------------------------------------------------
    def open(self, ctx: PipelineContext, partition_key: str, run_id: str, state: dict[str, Any] | None) -> None:
        judge = ctx.judge
        if not isinstance(judge, OpenAIJudge):
            what = f"{ctx.config.metric!r}, which calls no judge" if judge is None else repr(judge.get_model_name())
            raise JudgeConfigurationError(f"batch mode needs an OpenAI-compatible judge (a model name), not {what}")
        self.ctx, self.partition_key, self.run_id, self.real = ctx, partition_key, run_id, judge
        state = state or {}
        self.rounds: int = int(state.get("rounds", 0))
        self.bad: dict[str, int] = dict(state.get("bad", {}))
        self._notes: list[str] = list(state.get("notes", []))
        poll = self.options.poll_seconds
        self.poll = float(ctx.config.batch_poll_seconds if poll is None else poll)
        self.retry = self.options.retry or ctx.config.batch_retry
        self.client = BatchClient(judge)
        self.table = batches_table(ctx.engine, ctx.config.output_schema)
        self._judge = BatchJudge(judge, self, ctx.config.prices)
        self._stages: list[BatchJudge] = [self._judge]
        if not state:
            self._name_other_configs()

    def judge(self) -> BatchJudge:
        return self._judge

    def judge_for(self, real: JudgeModel) -> BatchJudge:
        """The batch judge of a cascade's strong stage (its requests follow the cheap stage's)."""
        if not isinstance(real, OpenAIJudge):
            raise JudgeConfigurationError(
                f"batch mode needs an OpenAI-compatible strong judge (a model name), not {real.get_model_name()!r}"
            )
        stage = BatchJudge(real, self, self.ctx.config.prices, escalation=True)
        self._stages.append(stage)
        return stage

    def _name_other_configs(self) -> None:
        """Open batches of this partition under another judge model or prompt: paid for, and
        abandoned unless someone collects them — say so, once per run."""
        for r in other_open_batches(self.ctx.engine, self.table, self.ctx.key, self.partition_key):
            hours = (_now() - r.submitted_at).total_seconds() / 3600
            note = (
                f"batch {r.batch_id} (judge {r.judge_model}, prompt {r.prompt_version}, {r.requests} requests, "
                f"submitted {hours:.1f} h ago) is still open for partition {r.partition_key} under another "
                f"configuration: collect it with `ctxprec batches collect {r.batch_id}` or cancel it with "
                f"`ctxprec batches cancel {r.batch_id}`"
            )
            log.warning("%s", note)
            self._notes.append(note)

    # -- between passes --------------------------------------------------------------------------
    def pending(self) -> list[str]:
        records = open_batches(self.ctx.engine, self.table, self.ctx.key, self.partition_key)
        self._open = records
        self._batches = {}
        waiting = []
        for r in records:
            batch = self.client.retrieve(r.batch_id)
            self._batches[r.batch_id] = batch
            if str(batch.status) != r.status:
                r.status = str(batch.status)
                update_batch(self.ctx.engine, self.table, r.batch_id, status=r.status)
            if r.status not in TERMINAL_STATUSES:
                waiting.append(r.batch_id)
        return waiting

    def wait(self, progress: ProgressCallback | None) -> None:
        from ..pipeline.records import ProgressEvent

        delay = min(self.options.first_poll, self.poll)
        started = time.monotonic()
        while True:
            running = [self._batches[i] for i in self._batches if str(self._batches[i].status) not in TERMINAL_STATUSES]
            if not running:
                return
            done = sum(
                (b.request_counts.completed + b.request_counts.failed) if b.request_counts else 0
                for b in self._batches.values()
            )
            total = sum(r.requests for r in self._open)
            states = ", ".join(f"{k}: {b.status}" for k, b in self._batches.items())
            log.info(
                "waiting for %d batch(es) (%s): %d of %d requests done after %.0f s",
                len(self._batches),
                states,
                done,
                total,
                time.monotonic() - started,
            )
            if progress is not None:
                progress(ProgressEvent("batch_waiting", self.partition_key, done, total, states))
            self.options.sleep(delay)
            delay = min(self.poll, delay * 1.5)
            self.pending()

    def collect(self) -> None:
        for r in getattr(self, "_open", []):
            batch = self._batches.get(r.batch_id)
            if batch is None or str(batch.status) not in TERMINAL_STATUSES:
                continue
            self._collect_one(r, batch)
        self._open = []

    def _collect_one(self, r: BatchRecord, batch: Any) -> None:
        status = str(batch.status)
        got = self.client.results(batch)
        asked = [request_hash(cid) for cid in requested_ids(self.client.file_text(r.input_file_id))]
        for h in asked:  # what an earlier batch said about these requests is superseded
            self.unanswered.pop(h, None)
        c = _Collected(r, batch)
        unreadable = got.bad_line_note() if got.bad_lines else None
        for cid, answer in got.answers.items():
            h = request_hash(cid)
            if answer.error is None:
                self.answers[h] = answer
                self.unanswered.pop(h, None)
                c.answered += 1
                c.prompt_tokens += answer.prompt_tokens or 0
                c.completion_tokens += answer.completion_tokens or 0
            else:
                self.unanswered[h] = f"batch {r.batch_id} ({status}) did not answer it: {answer.error}"
        for cid in got.conflicting:
            h = request_hash(cid)
            self.unanswered[h] = f"batch {r.batch_id} answered it twice with different answers (not trusted)"
            self.bad[h] = self.bad.get(h, 0) + 1
        missing = [h for h in asked if h not in self.answers and h not in self.unanswered]
        for h in missing:
            if unreadable:
                self.unanswered[h] = f"batch {r.batch_id} ({status}) returned no readable line for it: {unreadable}"
                self.bad[h] = self.bad.get(h, 0) + 1
            else:
                self.unanswered[h] = f"batch {r.batch_id} {status} before answering it"
        self._closed_ids.add(r.batch_id)
        self._collected.append(c)
        failed = r.requests - c.answered
        if status != "completed" and failed:
            self._note(f"batch {r.batch_id} ended {status}: {c.answered} of {r.requests} requests answered")
        elif missing and not unreadable:  # completed, and yet some requests have no line at all
            self._note(
                f"batch {r.batch_id} completed without a line for {len(missing)} of its {r.requests} request(s) "
                "(in neither its output nor its error file)"
            )
        if unreadable:
            self._note(f"batch {r.batch_id}: {unreadable} in its result file; those requests are asked again")
        if got.identical_duplicates or got.conflicting:
            self._note(
                f"batch {r.batch_id}: {got.identical_duplicates + len(got.conflicting)} duplicate custom_id line(s) "
                f"({got.identical_duplicates} identical, used; {len(got.conflicting)} conflicting, asked again)"
            )

    def settle(self) -> None:
        now = _now()
        for c in self._collected:
            r, batch = c.record, c.batch
            update_batch(
                self.ctx.engine,
                self.table,
                r.batch_id,
                status=str(batch.status),
                output_file_id=batch.output_file_id,
                error_file_id=batch.error_file_id,
                finished_at=now,
                prompt_tokens=c.prompt_tokens,
                completion_tokens=c.completion_tokens,
                cost=batch_cost_of(
                    r.model or r.judge_model, c.prompt_tokens, c.completion_tokens, self.ctx.config.prices
                ),
                answered=c.answered,
                failed=r.requests - c.answered,
            )
        self._collected = []
        if self.gave_up:
            rounds = f"{self.rounds} batch round(s)"
            causes = "; ".join(f"{why} ({n})" for why, n in sorted(self.gave_up.items()))
            self._note(f"{sum(self.gave_up.values())} request(s) got no usable answer after {rounds}: {causes}")
            self.gave_up = {}

    def flush(self, progress: ProgressCallback | None) -> bool:
        if not self.recorded:
            return False
        prompts = sorted(self.recorded.items(), key=lambda kv: (kv[1].order, kv[1].seq))
        self.recorded = {}
        for stage in self._stages:
            stage._calls_of_case = {}
        prompts = self._affordable(prompts)
        if not prompts:
            return True  # the next pass fails the unaffordable rows as budget_exhausted
        if self.rounds:
            self._note_round(prompts)
        for stage in self._stages:  # one set of batches per model (a cascade's stages)
            mine = [(h, p) for h, p in prompts if (p.judge or self._judge) is stage]
            if mine:
                self._submit(stage, mine)
        self.rounds += 1
        return True

    def _submit(self, stage: BatchJudge, prompts: list[tuple[str, RecordedPrompt]]) -> None:
        """Upload ``prompts`` of one judge in files within the provider's limits, one batch each."""
        key = self.ctx.key
        real = stage.real
        assert isinstance(real, OpenAIJudge)
        lines = [
            request_line(real, f"{key.metric}|{p.case_id[:100]}|{p.seq}|{h}", p.prompt, p.schema, p.logprobs)
            for h, p in prompts
        ]
        for n, data in enumerate(split_lines(lines, self.options.max_requests, self.options.max_bytes)):
            count = data.count(b"\n")
            fid = self.client.upload(data, f"ctxprec-{self.partition_key}-{key.metric}-{self.rounds}-{n}.jsonl")
            meta = {
                "partition_key": self.partition_key,
                "metric": key.metric,
                "judge_model": key.judge_model,
                "run_id": self.run_id,
            }
            batch = self.client.create(fid, meta)
            record = BatchRecord(
                batch_id=str(batch.id),
                partition_key=self.partition_key,
                metric=key.metric,
                judge_model=key.judge_model,
                prompt_version=key.prompt_version,
                status=str(batch.status),
                requests=count,
                input_file_id=fid,
                submitted_at=_now(),
                run_id=self.run_id,
                model=real.model,
            )
            record_batch(self.ctx.engine, self.table, record)  # before anything else can go wrong
            log.info(
                "partition %s: submitted batch %s (%d requests to %s)",
                self.partition_key,
                record.batch_id,
                count,
                real.model,
            )

    def _note_round(self, prompts: list[tuple[str, RecordedPrompt]]) -> None:
        """Say what a further round asks and how (``notes.round_note``): logged as it happens (the
        CLI's stderr, the orchestrators' logs) and kept among the run's notes."""
        note = round_note(self.rounds + 1, prompts, self.unanswered, self._judge)
        expected = all(p.escalation and h not in self.unanswered for h, p in prompts)  # a cascade's second stage
        log.log(logging.INFO if expected else logging.WARNING, "partition %s: %s", self.partition_key, note)
        self._note(note)

    def _affordable(self, prompts: list[tuple[str, RecordedPrompt]]) -> list[tuple[str, RecordedPrompt]]:
        """With ``max_cost``: the prefix of ``prompts`` whose estimated batch cost fits what is left."""
        cap = self.ctx.config.max_cost
        if cap is None:
            return prompts
        from ..judge.calls import estimate_cost

        left = cap - self.spent
        out = []
        for h, p in prompts:
            judge = p.judge or self._judge
            est = estimate_cost(judge, p.prompt, max(1, p.prompt.count('<node id="')))
            if est is None:
                raise JudgeConfigurationError(
                    f"cannot keep to the run's max_cost: no price is known for judge {judge.model!r}; "
                    "set CTXPREC_PRICES"
                )
            if est > left:
                self.unaffordable.add(h)
                continue
            left -= est
            self.spent += est
            out.append((h, p))
        return out

    # -- inside a pass (``BatchJudge``) ----------------------------------------------------------
    def answer(self, h: str) -> BatchAnswer | None:
        got = self.answers.get(h)
        if got is None and not self._prior_loaded:
            self._load_prior()
            got = self.answers.get(h)
        return got

    def _load_prior(self) -> None:
        """Answers of the partition's batches finished by earlier runs (paid for: reused)."""
        self._prior_loaded = True
        records = partition_batches(self.ctx.engine, self.table, self.ctx.key, self.partition_key)
        for r in records:
            if r.finished_at is None or not r.output_file_id or r.batch_id in self._closed_ids:
                continue
            try:
                got = self.client.results(_Files(r.output_file_id, None))
            except Exception as exc:  # deleted or expired at the provider: ask again
                log.info(
                    "output file of batch %s is gone (%s): its answers are not reused",
                    r.batch_id,
                    redact(str(exc))[:200],
                )
                continue
            for cid, a in got.answers.items():
                if a.error is None:
                    self.answers.setdefault(request_hash(cid), a)

    def decide(self, h: str, escalation: bool = False) -> tuple[str, str | None]:
        """What to do with a request no batch has answered: ``defer``, ``sync`` or ``give_up``. A
        cascade's escalation asked for the first time goes to a batch of its own (one more round)."""
        if h in self.unaffordable:
            raise BudgetExhaustedError(
                f"max_cost {self.ctx.config.max_cost} reached: this request was not submitted to the Batch API"
            )
        cause = self.unanswered.get(h)
        if self.bad.get(h, 0) >= MAX_BAD_ANSWERS:
            return self._give_up(cause or "its batch answers were unreadable twice")
        if self.rounds == 0:
            return "defer", None
        if escalation and cause is None and self.rounds < self.options.max_rounds + 1:
            return "defer", None
        if self.retry == "sync":
            return "sync", cause
        if self.rounds < self.options.max_rounds:
            return "defer", cause
        return self._give_up(cause or f"no batch answered it in {self.rounds} round(s)")

    def _give_up(self, cause: str) -> tuple[str, str]:
        short = cause.split(":")[0]
        self.gave_up[short] = self.gave_up.get(short, 0) + 1
        return "give_up", f"{cause}; re-run to ask again"

    def record(self, h: str, prompt: RecordedPrompt) -> None:
        self.recorded.setdefault(h, prompt)

    def used(self, answer: BatchAnswer, model: str | None = None) -> None:
        cost = batch_cost_of(
            model or self.real.get_model_name(), answer.prompt_tokens, answer.completion_tokens, self.ctx.config.prices
        )
        self.spent += cost or 0.0

    def sent_sync(self, gen: Generation) -> None:
        if not self.sync_calls:
            log.warning("partition %s: unanswered requests go out as sync calls at the full price", self.partition_key)
        self.sync_calls += 1
        self.sync_cost = None if self.sync_cost is None or gen.cost is None else self.sync_cost + gen.cost
        self.spent += gen.cost or 0.0

    # -- reporting -------------------------------------------------------------------------------
    def _note(self, text: str) -> None:
        if text not in self._notes:
            self._notes.append(text)

    def poll_seconds(self) -> float:
        return self.poll

    def state(self) -> dict[str, Any]:
        return {"rounds": self.rounds, "bad": self.bad, "notes": self._notes}

    def notes(self) -> list[str]:
        notes = list(self._notes)
        if self.sync_calls:
            cost = "unknown" if self.sync_cost is None else f"${self.sync_cost:.4f}"
            notes.append(
                f"{self.sync_calls} request(s) the batches did not answer were sent as sync calls at the full price "
                f"({cost}; batch_retry=sync)"
            )
        return [f"batch mode: {n}" for n in notes]

    def close(self) -> None:
        client = getattr(self, "client", None)
        if client is not None:
            client.close()


@dataclass
class _Files:
    """The two file ids ``BatchClient.results`` reads, for a batch known only by its row."""

    output_file_id: str | None
    error_file_id: str | None
