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

from ..errors import JudgeDeferredError, JudgeUnavailableError
from ..judge.calls import current_case
from ..judge.models.base import Generation, JudgeModel
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
    """A request the pass deferred: what goes into the next batch, and where it sorts."""

    case_id: str
    order: tuple[int, int]
    seq: int
    prompt: str
    schema: type[BaseModel] | None


class BatchAnswers(Protocol):
    """What the batch judge asks of the run's batches (``transport.BatchTransport`` keeps them)."""

    def answer(self, h: str) -> BatchAnswer | None:
        """The usable answer to the prompt of hash ``h`` from the partition's batches, if any."""

    def used(self, answer: BatchAnswer) -> None:
        """``answer`` was given to the metric."""

    def decide(self, h: str) -> tuple[str, str | None]:
        """For a prompt without an answer: ``("defer" | "sync" | "give_up", cause)``."""

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

    def __init__(self, real: JudgeModel, transport: BatchAnswers, prices: Prices | None) -> None:
        self.real = real
        self.transport = transport
        self.model = real.get_model_name()
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

    async def a_generate_with_usage(self, prompt: str, schema: type[BaseModel] | None = None) -> Generation:
        t = self.transport
        h = prompt_hash(prompt)
        answer = t.answer(h)
        if answer is not None:
            t.used(answer)
            return Generation(
                output=answer.content or "",
                prompt_tokens=answer.prompt_tokens,
                completion_tokens=answer.completion_tokens,
                cost=batch_cost_of(self.model, answer.prompt_tokens, answer.completion_tokens, self.prices),
            )
        action, cause = t.decide(h)
        if action == "sync":
            gen = await self.real.a_generate_with_usage(prompt, schema)
            t.sent_sync(gen)
            return gen
        if action == "give_up":
            raise BatchPendingError(cause)
        ref = current_case.get()
        case_id = ref.case_id if ref is not None else ""
        seq = self._calls_of_case.get(case_id, 0)
        self._calls_of_case[case_id] = seq + 1
        t.record(h, RecordedPrompt(case_id, ref.order if ref is not None else (0, 0), seq, prompt, schema))
        raise JudgeDeferredError(
            f"request handed to the Batch API ({cause})" if cause else "request handed to the Batch API"
        )

    async def aclose(self) -> None:
        close = getattr(self.real, "aclose", None)
        if close is not None:
            await close()
