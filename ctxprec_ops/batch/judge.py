"""The judge a batch-mode run's metric calls: answers from batches, else the request is deferred.

``BatchJudge.a_generate_with_usage(prompt)`` looks the prompt up (by ``prompt_hash``) among the
answers of the partition's batches (this run's, then earlier runs' — paid for, never paid
twice). Without an answer, the transport's rules decide (``BatchAnswers.decide``): the request
is recorded for the next batch and the case deferred (``JudgeDeferredError``), sent now as an
ordinary sync call, or given up on with the cause (a ``judge_unavailable`` failure).
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any, Protocol

from pydantic import BaseModel

from ..errors import JudgeConfigurationError, JudgeDeferredError, JudgeUnavailableError
from ..judge.calls import current_case
from ..judge.models.base import Generation, JudgeModel
from ..judge.models.openai_judge import no_logprobs
from ..judge.pricing import Prices, batch_cost_of, batch_price_of
from .results import BatchAnswer

__all__ = ["BatchAnswers", "BatchJudge", "BatchPendingError", "RecordedPrompt", "prompt_hash"]


def prompt_hash(prompt: str) -> str:
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:32]


class BatchPendingError(JudgeUnavailableError):
    """No batch answered this request usably, and no round is left to ask again: the row is a
    ``judge_unavailable`` failure whose message names the batch and why (a later run asks again)."""


@dataclass
class RecordedPrompt:
    """A request the pass deferred: what goes into the next batch, and where it sorts; which judge
    asks it (``judge``: a cascade's stage) and whether with its tokens' log-probabilities."""

    case_id: str
    order: tuple[int, int]
    seq: int
    prompt: str
    schema: type[BaseModel] | None
    judge: BatchJudge | None = None
    logprobs: bool = False

    @property
    def escalation(self) -> bool:
        return self.judge is not None and self.judge.escalation


class BatchAnswers(Protocol):
    """What the batch judge asks of the run's batches (``transport.BatchTransport`` keeps them)."""

    def answer(self, h: str) -> BatchAnswer | None:
        """The usable answer to the prompt of hash ``h`` from the partition's batches, if any."""

    def used(self, answer: BatchAnswer, model: str | None = None) -> None:
        """``answer`` was given to the metric (asked of judge ``model``)."""

    def decide(self, h: str, escalation: bool = False) -> tuple[str, str | None]:
        """For a prompt without an answer: ``("defer" | "sync" | "give_up", cause)`` (``escalation``:
        asked by a cascade's strong stage)."""

    def record(self, h: str, prompt: RecordedPrompt) -> None:
        """Ask ``prompt`` in the next batch."""

    def sent_sync(self, gen: Generation) -> None:
        """A request was sent as an ordinary sync call and answered with ``gen``."""


class BatchJudge(JudgeModel):
    """See the module docstring. Async only (the pipeline's path)."""

    #: ``current_case`` is set around each case (the request lines are labelled by it)
    tags_cases = True
    #: answers match requests by prompt: a pass's lookups must not see verdicts judged in the same
    #: pass, or a case that shares nodes with an earlier one would ask a prompt never submitted
    stable_prompts = True

    def __init__(
        self, real: JudgeModel, transport: BatchAnswers, prices: Prices | None, *, escalation: bool = False
    ) -> None:
        self.real = real
        self.transport = transport
        self.model = real.get_model_name()
        #: a cascade's strong stage: its requests are the nodes the cheap judge was unsure of, asked
        #: in a batch of their own after the cheap stage's (``BatchTransport.decide``)
        self.escalation = escalation
        self.gives_logprobs = bool(getattr(real, "gives_logprobs", False))
        #: the run's price table (``PipelineConfig.prices``: ``"model@batch"`` or the model's, halved)
        self.prices = prices
        self.price_per_million = batch_price_of(self.model, self.prices)
        self.endpoint = getattr(real, "endpoint", None)
        self.multimodal = real.supports_multimodal()  # image parts go into the request lines as they would be sent
        self._calls_of_case: dict[str, int] = {}

    def get_model_name(self) -> str:
        return self.model

    def generate(self, prompt: str, schema: type[BaseModel] | None = None) -> Any:
        raise NotImplementedError("the batch judge is async only")

    def request_hash(self, prompt: str, logprobs: bool = False) -> str:
        """What a request's answer is found by: its prompt's hash (a cascade's strong stage and a
        request with log-probabilities: with the model and the flag, as the same prompt may be asked
        of both judges)."""
        if not self.escalation and not logprobs:
            return prompt_hash(prompt)
        return prompt_hash(f"{self.model}\x00{'logprobs' if logprobs else ''}\x00{prompt}")

    async def a_generate_with_usage(self, prompt: str, schema: type[BaseModel] | None = None) -> Generation:
        return await self._generate(prompt, schema, False)

    async def a_generate_with_logprobs(self, prompt: str, schema: type[BaseModel] | None = None) -> Generation:
        return await self._generate(prompt, schema, True)

    async def _generate(self, prompt: str, schema: type[BaseModel] | None, logprobs: bool) -> Generation:
        t = self.transport
        h = self.request_hash(prompt, logprobs)
        answer = t.answer(h)
        if answer is not None:
            t.used(answer, self.model)
            tokens = list(answer.logprobs) if answer.logprobs else None
            if logprobs and tokens is None:
                raise JudgeConfigurationError(no_logprobs(self.model, "the batch answered without them"))
            return Generation(
                output=answer.content or "",
                prompt_tokens=answer.prompt_tokens,
                completion_tokens=answer.completion_tokens,
                cost=batch_cost_of(self.model, answer.prompt_tokens, answer.completion_tokens, self.prices),
                logprobs=tokens,
            )
        action, cause = t.decide(h, escalation=self.escalation)
        if action == "sync":
            ask = self.real.a_generate_with_logprobs if logprobs else self.real.a_generate_with_usage
            gen = await ask(prompt, schema)
            t.sent_sync(gen)
            return gen
        if action == "give_up":
            raise BatchPendingError(cause)
        ref = current_case.get()
        case_id = ref.case_id if ref is not None else ""
        seq = self._calls_of_case.get(case_id, 0)
        self._calls_of_case[case_id] = seq + 1
        order = ref.order if ref is not None else (0, 0)
        t.record(h, RecordedPrompt(case_id, order, seq, prompt, schema, self, logprobs))
        raise JudgeDeferredError(
            f"request handed to the Batch API ({cause})" if cause else "request handed to the Batch API"
        )

    async def aclose(self) -> None:
        close = getattr(self.real, "aclose", None)
        if close is not None:
            await close()
