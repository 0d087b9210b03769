"""Two stand-in judges that let batch mode reuse the sync scoring path unchanged.

- ``RecordingJudge`` (submit): the metric runs as usual (validation, cache lookups, node
  groups); every prompt it would send is recorded as a batch request instead of being sent.
- ``AnsweredJudge`` (collect): the metric runs again with the same cache; each first-round
  prompt is answered from the batch's output (parsed and validated by the sync code, by node id),
  a prompt whose batch line is missing raises ``BatchPendingError`` (the row is re-queued), and
  any other prompt — the repair rules' re-asks and splits — goes out as an ordinary sync call,
  counted in ``sync_calls``.

Prompts are matched by ``prompt_hash``: the same case with the same cache yields the same prompt.
"""

from __future__ import annotations

import hashlib
import re
from typing import Any

from pydantic import BaseModel

from ..errors import JudgeUnavailableError
from ..judge.models.base import Generation, JudgeModel
from ..judge.pricing import batch_cost_of, batch_price_of
from .api import BatchAnswer

__all__ = ["prompt_hash", "RecordingJudge", "AnsweredJudge", "BatchPendingError", "RecordedPrompt"]

_NODE_ID = re.compile(r'<node id="(\d+)">')


def prompt_hash(prompt: str) -> str:
    return hashlib.sha256(prompt.encode("utf-8")).hexdigest()[:32]


class BatchPendingError(JudgeUnavailableError):
    """A request of this row got no answer from its batch (expired, cancelled, failed, or an error
    line): the row is recorded as ``judge_unavailable`` and submitted again."""


class _NotAnswered(Exception):
    """Raised by the recording judge when it cannot make up a well-formed placeholder."""


class RecordedPrompt:
    __slots__ = ("case_id", "prompt", "index", "schema")

    def __init__(self, case_id: str, prompt: str, index: int, schema: type[BaseModel] | None) -> None:
        self.case_id, self.prompt, self.index, self.schema = case_id, prompt, index, schema


class RecordingJudge(JudgeModel):
    """Records the prompts of each case; answers each with a placeholder that covers the prompt's
    nodes, so the metric goes on to its next calls (other node groups, other windows)."""

    def __init__(self, real: JudgeModel) -> None:
        self.real = real
        self.price_per_million = real.price_per_million
        self.case_id = ""
        self.prompts: dict[str, RecordedPrompt] = {}
        self._calls_of_case = 0

    def get_model_name(self) -> str:
        return self.real.get_model_name()

    def start_case(self, case_id: str) -> None:
        self.case_id, self._calls_of_case = case_id, 0

    def generate(self, prompt: str, schema: type[BaseModel] | None = None) -> Any:
        raise NotImplementedError("the recording judge is async only")

    async def a_generate_with_usage(self, prompt: str, schema: type[BaseModel] | None = None) -> Generation:
        h = prompt_hash(prompt)
        if h not in self.prompts:
            self.prompts[h] = RecordedPrompt(self.case_id, prompt, self._calls_of_case, schema)
        self._calls_of_case += 1
        ids = [int(k) for k in _NODE_ID.findall(prompt)]
        if not ids:  # a custom template: the case's later calls are made in the sync collect step
            raise _NotAnswered("no node ids in the prompt")
        placeholder = [{"node": k, "relevant": False, "reason": "placeholder"} for k in ids]
        return Generation(output={"verdicts": placeholder}, prompt_tokens=0, completion_tokens=0, cost=0.0)


class AnsweredJudge(JudgeModel):
    """Answers prompts from batch results (at the batch price); see the module docstring."""

    def __init__(self, real: JudgeModel, answers: dict[str, BatchAnswer], pending: dict[str, str]) -> None:
        self.real = real
        self.model = real.get_model_name()
        self.answers = answers
        self.pending = pending
        self.price_per_million = batch_price_of(self.model)
        self.sync_calls = 0
        self.batch_answers_used = 0

    def get_model_name(self) -> str:
        return self.model

    def generate(self, prompt: str, schema: type[BaseModel] | None = None) -> Any:
        raise NotImplementedError("the batch judge is async only")

    async def a_generate_with_usage(self, prompt: str, schema: type[BaseModel] | None = None) -> Generation:
        h = prompt_hash(prompt)
        answer = self.answers.get(h)
        if answer is not None and answer.error is None:
            self.batch_answers_used += 1
            return Generation(
                output=answer.content or "",
                prompt_tokens=answer.prompt_tokens,
                completion_tokens=answer.completion_tokens,
                cost=batch_cost_of(self.model, answer.prompt_tokens, answer.completion_tokens),
            )
        if h in self.pending:
            raise BatchPendingError(self.pending[h])
        self.sync_calls += 1
        return await self.real.a_generate_with_usage(prompt, schema)

    async def aclose(self) -> None:
        close = getattr(self.real, "aclose", None)
        if close is not None:
            await close()
