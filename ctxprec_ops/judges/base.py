"""The judge protocol. A judge turns a prompt into an answer (JSON text or a schema instance).

``JudgeModel`` mirrors deepeval's custom-LLM base class: implement ``get_model_name``,
``generate`` and ``a_generate``. Judges that know their token usage (the OpenAI judge) also
implement ``a_generate_with_usage``; the metric uses it when present.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Mapping

from pydantic import BaseModel

__all__ = ["JudgeModel", "Generation"]


@dataclass
class Generation:
    """One judge call's answer and what it cost. ``None`` means unknown."""

    output: Any
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost: float | None = None
    #: the response's ``x-ratelimit-*`` headers, when the judge saw them (paces the quota)
    rate_limit_headers: Mapping[str, str] | None = None


class JudgeModel(ABC):
    """Base class for custom judges (as deepeval's ``DeepEvalBaseLLM``).

    ``generate``/``a_generate`` receive the full prompt and, as ``schema``, the pydantic model
    of the expected answer. They may return JSON text, a dict, or an instance of ``schema``;
    a ``(answer, cost_usd)`` tuple is accepted too.
    """

    #: price per million tokens (input, output) in USD, if known; used when the judge
    #: reports token usage but no cost
    price_per_million: tuple[float, float] | None = None

    @abstractmethod
    def get_model_name(self) -> str: ...

    @abstractmethod
    def generate(self, prompt: str, schema: type[BaseModel] | None = None) -> Any: ...

    async def a_generate(self, prompt: str, schema: type[BaseModel] | None = None) -> Any:
        # default: run the sync judge in a thread so the event loop keeps serving other cases
        return await asyncio.to_thread(self.generate, prompt, schema)

    async def a_generate_with_usage(
        self, prompt: str, schema: type[BaseModel] | None = None
    ) -> Generation:
        out = await self.a_generate(prompt, schema)
        cost = None
        if isinstance(out, tuple) and len(out) == 2:
            out, cost = out
        return Generation(output=out, cost=cost)

    #: judges that need no network and cost nothing set this (the evaluator skips retries)
    offline: bool = False

    def load_model(self) -> Any:  # deepeval compatibility
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.get_model_name()!r})"
