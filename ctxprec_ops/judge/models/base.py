"""The judge protocol. A judge turns a prompt into an answer (JSON text or a schema instance).

``JudgeModel`` mirrors deepeval's custom-LLM base class: implement ``get_model_name``,
``generate`` and ``a_generate``. Judges that know their token usage (the OpenAI judge) also
implement ``a_generate_with_usage``; the metric uses it when present.
"""

from __future__ import annotations

import asyncio
import inspect
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

__all__ = [
    "ChoicesUnsupportedError",
    "CustomModelJudge",
    "DeepEvalBaseLLM",
    "Generation",
    "JudgeModel",
    "call_custom_model",
]


@dataclass
class Generation:
    """One judge call's answer and what it cost. ``None`` means unknown."""

    output: Any
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cost: float | None = None
    #: the response's ``x-ratelimit-*`` headers, when the judge saw them (paces the quota)
    rate_limit_headers: Mapping[str, str] | None = None
    #: every answer of a request for sampled answers (``a_generate_samples``); None otherwise
    outputs: list[Any] | None = None
    #: the answer's tokens as ``(UTF-8 bytes, log-probability)`` (``a_generate_with_logprobs``;
    #: ``judge.logprobs``); None when not asked for or not returned
    logprobs: list[tuple[bytes, float]] | None = None


class ChoicesUnsupportedError(Exception):
    """The endpoint refused a request for several answers (``n``): ask one at a time instead."""

    #: an HTTP answer (the endpoint is up): the circuit breaker counts it as such, never retried
    status_code = 400


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

    async def a_generate_with_usage(self, prompt: str, schema: type[BaseModel] | None = None) -> Generation:
        out = await self.a_generate(prompt, schema)
        cost = None
        if isinstance(out, tuple) and len(out) == 2:
            out, cost = out
        return Generation(output=out, cost=cost)

    #: judges that need no network and cost nothing set this (the evaluator skips retries)
    offline: bool = False
    #: judges whose answer never varies (the lexical judge): sampling it would repeat one
    #: answer, so a metric with ``samples`` > 1 judges once (agreement is then trivially 1)
    deterministic: bool = False
    #: sampled answers one request can return (OpenAI's ``n``); 1: one request per sample
    choices_per_request: int = 1

    async def a_generate_samples(self, prompt: str, schema: type[BaseModel] | None, n: int) -> Generation:
        """Up to ``n`` sampled answers to ``prompt`` in one request, in ``Generation.outputs``.

        The default asks ``a_generate_with_usage`` once (one answer): the caller asks again for
        the rest. A custom judge samples as its model does (a judge that answers at temperature
        0 gives ``n`` equal answers, so every node's agreement is 1)."""
        gen = await self.a_generate_with_usage(prompt, schema)
        gen.outputs = [gen.output]
        return gen

    #: the judge returns token log-probabilities with its answer (``a_generate_with_logprobs``): a
    #: verdict's confidence is then the probability of its ``true``/``false`` token, and the judge
    #: can be the cheap stage of a cascade (``judge.cascade``) without sampling
    gives_logprobs: bool = False

    async def a_generate_with_logprobs(self, prompt: str, schema: type[BaseModel] | None = None) -> Generation:
        """The answer with its tokens' log-probabilities in ``Generation.logprobs`` (a judge whose
        ``gives_logprobs`` is True implements it)."""
        raise NotImplementedError(f"judge {self.get_model_name()!r} does not return token log-probabilities")

    #: ``generate`` answers at once, in this process, with no I/O and nothing to wait for (a
    #: rule-based judge, a test double). The judging core then calls ``generate`` directly on the
    #: event loop instead of sending a request through ``a_generate_with_usage``: the call holds
    #: no concurrency slot (it never overlaps another) and the pipeline judges such cases one
    #: after another instead of one task each. Everything else stays: the judgment cache, answer
    #: validation and repair, the budget, the request quota (a run with a quota sends every call
    #: the ordinary way), retries and the circuit breaker when ``generate`` raises. A judge that
    #: waits on anything (network, disk, a subprocess) must leave it False.
    answers_inline: bool = False

    def generate_inline(self, prompt: str, schema: type[BaseModel] | None = None) -> Generation:
        """``generate``'s answer as a ``Generation`` (for ``answers_inline`` judges); a
        ``(answer, cost_usd)`` tuple is read as ``a_generate_with_usage`` reads it."""
        return _generation(self.generate(prompt, schema))

    #: the judge reads images (OpenAI ``image_url`` content parts; a custom judge gets the prompt
    #: as a ``MultimodalPrompt``: the same text plus ``parts``). A case holding images is refused
    #: before any call when the judge does not (``supports_multimodal``)
    multimodal: bool = False

    def supports_multimodal(self) -> bool:
        """deepeval's name: whether this judge takes images (default: the ``multimodal`` attribute)."""
        return bool(self.multimodal)

    def load_model(self) -> Any:  # deepeval compatibility
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.get_model_name()!r})"


def _takes_schema(fn: Any) -> bool:
    """Whether a custom model's ``generate``/``a_generate`` accepts a ``schema`` argument."""
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return True
    return any(p.name == "schema" or p.kind is inspect.Parameter.VAR_KEYWORD for p in params)


async def call_custom_model(model: Any, prompt: str, schema: type[BaseModel] | None) -> Any:
    """Ask a deepeval-style model (``generate``/``a_generate``, with or without ``schema``).

    ``schema`` is passed by keyword when the method declares it (as deepeval does), otherwise
    the prompt alone; a synchronous ``a_generate`` or a model with only ``generate`` works too
    (``generate`` then runs in a thread so the event loop keeps serving other cases).
    """
    fn = getattr(model, "a_generate", None)
    if callable(fn):
        out = fn(prompt, schema=schema) if schema is not None and _takes_schema(fn) else fn(prompt)
        return await out if inspect.isawaitable(out) else out
    gen = model.generate
    if schema is not None and _takes_schema(gen):
        return await asyncio.to_thread(gen, prompt, schema=schema)
    return await asyncio.to_thread(gen, prompt)


def _generation(out: Any) -> Generation:
    cost = None
    if isinstance(out, tuple) and len(out) == 2:  # deepeval's (answer, cost) convention
        out, cost = out
    return Generation(output=out, cost=cost)


class DeepEvalBaseLLM(JudgeModel):
    """deepeval's custom-model base class, under the same name: a model written for deepeval
    (``load_model``, ``generate``, ``a_generate``, ``get_model_name``) works with only the import
    changed. ``generate``/``a_generate`` may or may not declare ``schema``; they may answer
    with a string, a dict or an instance of ``schema``."""

    def __init__(self, model: Any = None, *args: Any, **kwargs: Any) -> None:
        self.name = model
        self.model = self.load_model(*args, **kwargs)

    @abstractmethod
    def load_model(self, *args: Any, **kwargs: Any) -> Any: ...

    async def a_generate_with_usage(self, prompt: str, schema: type[BaseModel] | None = None) -> Generation:
        return _generation(await call_custom_model(self, prompt, schema))

    def generate_inline(self, prompt: str, schema: type[BaseModel] | None = None) -> Generation:
        # a deepeval model's ``generate`` may not take ``schema``
        gen = self.generate
        return _generation(gen(prompt, schema=schema) if schema is not None and _takes_schema(gen) else gen(prompt))


class CustomModelJudge(JudgeModel):
    """A judge around any object shaped like deepeval's ``DeepEvalBaseLLM`` (duck-typed on
    ``get_model_name`` and ``generate``/``a_generate``): deepeval's own instances work without
    importing deepeval."""

    def __init__(self, model: Any) -> None:
        self.wrapped = model

    def get_model_name(self) -> str:
        return str(self.wrapped.get_model_name())

    def generate(self, prompt: str, schema: type[BaseModel] | None = None) -> Any:
        gen = self.wrapped.generate
        return gen(prompt, schema=schema) if schema is not None and _takes_schema(gen) else gen(prompt)

    async def a_generate(self, prompt: str, schema: type[BaseModel] | None = None) -> Any:
        return await call_custom_model(self.wrapped, prompt, schema)

    async def a_generate_with_usage(self, prompt: str, schema: type[BaseModel] | None = None) -> Generation:
        return _generation(await call_custom_model(self.wrapped, prompt, schema))

    def supports_multimodal(self) -> bool:
        """The wrapped model's ``supports_multimodal()`` (deepeval's), else its ``multimodal``."""
        fn = getattr(self.wrapped, "supports_multimodal", None)
        if callable(fn):
            return bool(fn())
        return bool(getattr(self.wrapped, "multimodal", False))

    @staticmethod
    def fits(model: Any) -> bool:
        return callable(getattr(model, "get_model_name", None)) and (
            callable(getattr(model, "a_generate", None)) or callable(getattr(model, "generate", None))
        )
