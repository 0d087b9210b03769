"""A judge on any OpenAI-compatible chat-completions endpoint (OpenAI, Azure OpenAI, vLLM,
Ollama, LM Studio), through the official ``openai`` client.

Structured output: asks for a strict JSON schema first; an endpoint that rejects it is asked
for JSON mode, then for plain text (parsed tolerantly). The downgrade is remembered per judge.
Retries are not done here (the client's own are off): the evaluator retries with backoff under
its shared rate limiter.

Sampled answers (self-consistency, ``a_generate_samples``): one request with ``n`` at
``sample_temperature``; an endpoint that refuses ``n`` (HTTP 400 about it) or answers with fewer
choices than asked is remembered as answering one choice per request (``choices_per_request``
becomes 1) and the caller asks for the rest one request at a time.
"""

from __future__ import annotations

import asyncio
import json
import re
import weakref
from typing import Any, Literal

from pydantic import BaseModel

from ...errors import InvalidTestCaseError, JudgeConfigurationError, JudgeRequestRejectedError
from ...scoring.samples import DEFAULT_SAMPLE_TEMPERATURE
from ...scoring.verdicts import YES_NO_SCHEMA, JudgeAnswer, YesNoAnswer
from ...secrets import redact, redact_url, register_secret
from .. import defaults
from ..logprobs import tokens_of
from ..pricing import cost_of
from ..retry import TransientJudgeError
from .base import ChoicesUnsupportedError, Generation, JudgeModel
from .capped_http import DEFAULT_MAX_RESPONSE_BYTES, capped_async_client, response_class
from .names import reads_images, validate_judge_name

__all__ = ["OpenAIJudge", "JUDGE_ANSWER_SCHEMA", "JudgeCallTimeoutError"]


class JudgeCallTimeoutError(TimeoutError):
    """A judge call did not end within its deadline (``timeout`` seconds for the whole call,
    answer included): a transient fault, retried, and counted by the circuit breaker as a timeout."""

    def __init__(self, seconds: float) -> None:
        super().__init__(f"the judge call did not finish within its deadline of {seconds:g} s")
        self.seconds = seconds


StructuredMode = Literal["json_schema", "json_object", "none"]

#: strict JSON schema of the answer (every property required, no extras), as structured
#: output modes require
JUDGE_ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdicts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "node": {"type": "integer"},
                    "relevant": {"type": "boolean"},
                    "reason": {"type": "string"},
                },
                "required": ["node", "relevant", "reason"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["verdicts"],
    "additionalProperties": False,
}


def _schema_for(schema: type[BaseModel] | None) -> dict[str, Any] | None:
    if schema is None:
        return None
    if schema is JudgeAnswer:
        return JUDGE_ANSWER_SCHEMA
    if schema is YesNoAnswer:  # a deepeval-style template's answer
        return YES_NO_SCHEMA
    return schema.model_json_schema()


def _mentions(exc: Exception, *words: str) -> bool:
    text = str(exc).lower()
    return any(w in text for w in words)


#: a 400 about the ``n`` parameter ("'n' is not supported", "n must be 1", "param: n")
_ABOUT_N = re.compile(r"(?<![\w.-])['\"`]?n['\"`]?(?![\w.-])")

#: OpenAI's largest ``n``
MAX_CHOICES = 128


def _about_n(exc: Any) -> bool:
    body = exc.body if isinstance(getattr(exc, "body", None), dict) else {}
    if body.get("param") == "n":
        return True
    if body.get("code") == "context_length_exceeded":
        return False
    return _ABOUT_N.search(str(body.get("message") or getattr(exc, "message", "") or exc)) is not None


def _refused(exc: Any) -> Exception:
    """A 4xx the endpoint will give again: the prompt is over the model's context (that row's
    ``invalid_input``), or the request is refused as made (``judge_request_rejected``)."""
    body = exc.body if isinstance(getattr(exc, "body", None), dict) else {}
    message = redact(str(body.get("message") or exc.message or "")).strip().splitlines()
    detail = (message[0] if message else "")[:300]  # cut once redacted: a key across the cut is found whole
    status = exc.status_code
    if body.get("code") == "context_length_exceeded" or "context length" in detail.lower():
        return InvalidTestCaseError(
            f"the judge refused this row's prompt as longer than its model's context (HTTP {status}): {detail}"
        )
    return JudgeRequestRejectedError(f"the judge endpoint refused the request (HTTP {status}): {detail}")


def no_logprobs(model: str, what: str) -> str:
    """Why a judge whose endpoint gives no token log-probabilities cannot be a cascade's cheap stage."""
    return (
        f"judge {model!r} cannot be the cheap stage of a cascade: its endpoint was asked for token "
        f"log-probabilities (logprobs) and {what}; use an endpoint that returns them, or judge_samples >= 3 "
        "(the confidence is then the agreement of sampled answers)"
    )


def message_content(prompt: str) -> Any:
    """A user message's ``content``: the text, or text and ``image_url`` parts (``MultimodalPrompt``)."""
    parts = getattr(prompt, "openai_content", None)
    return parts() if callable(parts) else prompt


async def _post_completion(client: Any, body: dict[str, Any]) -> Any:
    """POST ``body`` to the chat-completions endpoint through the client's documented ``post``
    (its auth, base URL, Azure deployment paths, status errors, timeouts): the body goes as it is and
    the HTTP response comes back unparsed. ``chat.completions.create`` would walk the body through
    its TypedDict transform and build a typed ``ChatCompletion`` of every answer, two thirds of the
    client's CPU per call; the judge reads three fields of the answer."""
    return await client.post("/chat/completions", body=body, cast_to=response_class())


def _completion_of(content: bytes) -> dict[str, Any]:
    """A chat completion's JSON object; an empty, unreadable or non-object body raises
    ``json.JSONDecodeError`` (a fault of the moment, retried)."""
    data = json.loads(content)
    if not isinstance(data, dict):
        raise json.JSONDecodeError("the answer is not a JSON object", content.decode("utf-8", "replace")[:80], 0)
    return data


def _choice_text(choice: Any) -> str | None:
    message = choice.get("message") if isinstance(choice, dict) else None
    text = message.get("content") if isinstance(message, dict) else None
    return text if isinstance(text, str) else None


def _count(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


class OpenAIJudge(JudgeModel):
    """LLM judge over the chat-completions protocol.

    ``api_key``/``base_url`` default to ``OPENAI_API_KEY``/``OPENAI_BASE_URL`` as the openai
    client reads them. For Azure OpenAI pass ``azure_endpoint`` and ``api_version`` (the model
    name is the deployment name).
    """

    def __init__(
        self,
        model: str = defaults.LLM_JUDGE,
        *,
        base_url: str | None = None,
        api_key: str | None = None,
        timeout: float = defaults.JUDGE_TIMEOUT,
        azure_endpoint: str | None = None,
        api_version: str | None = None,
        structured_output: StructuredMode | Literal["auto"] = "auto",
        temperature: float | None = 0.0,
        sample_temperature: float | None = None,
        price_per_million: tuple[float, float] | None = None,
        default_headers: dict[str, str] | None = None,
        max_response_bytes: int = DEFAULT_MAX_RESPONSE_BYTES,
        multimodal: bool | None = None,
    ) -> None:
        validate_judge_name(model)
        self.model = model
        #: whether the model reads images: ``multimodal`` when given (``CTXPREC_JUDGE_MULTIMODAL``
        #: through the pipeline), else by the model name (``names.reads_images``)
        self.multimodal = reads_images(model) if multimodal is None else bool(multimodal)
        self.base_url = base_url
        self._api_key = api_key
        register_secret(api_key)
        self.timeout = timeout
        self.azure_endpoint = azure_endpoint
        self.api_version = api_version
        self.mode: StructuredMode = "json_schema" if structured_output == "auto" else structured_output
        self.temperature = temperature
        if sample_temperature is not None and not 0 < sample_temperature <= 2:
            raise JudgeConfigurationError(f"sample_temperature must be in (0, 2], got {sample_temperature!r}")
        #: temperature of sampled answers (self-consistency): this, else ``temperature`` when it is
        #: above 0, else ``DEFAULT_SAMPLE_TEMPERATURE`` (1.0)
        self.sample_temperature = sample_temperature
        #: the endpoint refused ``temperature``: never sent again (sampled answers then come at
        #: the endpoint's default temperature)
        self._temperature_refused = False
        #: sampled answers one request returns (``n``); 1 once the endpoint refused or ignored ``n``
        self.choices_per_request = MAX_CHOICES
        self.price_per_million = price_per_million
        self.default_headers = default_headers
        if not isinstance(max_response_bytes, int) or max_response_bytes < 1:
            raise JudgeConfigurationError(f"max_response_bytes must be a positive integer, got {max_response_bytes!r}")
        #: a response larger than this is not read (JudgeResponseTooLargeError): bounds memory
        self.max_response_bytes = max_response_bytes
        self._clients: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Any] = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:  # never show the key (nor a credential in the base URL)
        base_url = None if self.base_url is None else redact_url(str(self.base_url))
        return f"OpenAIJudge(model={self.model!r}, base_url={base_url!r})"

    def get_model_name(self) -> str:
        return self.model

    @property
    def endpoint(self) -> str | None:
        """The URL requests go to (for messages; the circuit breaker strips any credentials): the
        configured one, else the one this loop's client chose (the openai client reads
        ``OPENAI_BASE_URL`` itself), else None before any client exists."""
        if self.azure_endpoint:
            return self.azure_endpoint
        if self.base_url:
            return self.base_url
        try:
            client = self._clients.get(asyncio.get_running_loop())
        except RuntimeError:  # no running loop: no client to ask
            client = None
        return str(client.base_url).rstrip("/") if client is not None else None

    # -- client per event loop (an httpx pool cannot outlive the loop it was made in) --------
    def _client(self) -> Any:
        import openai

        loop = asyncio.get_running_loop()
        client = self._clients.get(loop)
        if client is not None:
            return client
        try:
            if self.azure_endpoint:
                client = openai.AsyncAzureOpenAI(
                    azure_endpoint=self.azure_endpoint,
                    api_version=self.api_version,
                    api_key=self._api_key,
                    timeout=self.timeout,
                    max_retries=0,
                    default_headers=self.default_headers,
                    http_client=capped_async_client(self.max_response_bytes),
                )
            else:
                client = openai.AsyncOpenAI(
                    base_url=self.base_url,
                    api_key=self._api_key,
                    timeout=self.timeout,
                    max_retries=0,
                    default_headers=self.default_headers,
                    http_client=capped_async_client(self.max_response_bytes),
                )
        except openai.OpenAIError as exc:
            raise JudgeConfigurationError(
                f"cannot create the OpenAI client for judge {self.model!r}: set OPENAI_API_KEY "
                "(or pass api_key) and, for other endpoints, OPENAI_BASE_URL"
            ) from exc
        register_secret(getattr(client, "api_key", None))
        self._clients[loop] = client
        return client

    def sync_client(self, max_retries: int) -> Any:
        """A synchronous openai client for this judge's endpoint, key and Azure settings (the
        Batch API's calls); raises ``openai.OpenAIError`` when none can be made."""
        import openai

        if self.azure_endpoint:
            return openai.AzureOpenAI(
                azure_endpoint=self.azure_endpoint,
                api_version=self.api_version,
                api_key=self._api_key,
                timeout=self.timeout,
                max_retries=max_retries,
            )
        return openai.OpenAI(
            base_url=self.base_url,
            api_key=self._api_key,
            timeout=self.timeout,
            max_retries=max_retries,
            default_headers=self.default_headers,
        )

    async def aclose(self) -> None:
        """Close this loop's HTTP client (the evaluator calls it when a run ends)."""
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return
        client = self._clients.pop(loop, None)
        if client is not None:
            await client.close()

    # -- generation ----------------------------------------------------------------------------
    def response_format(self, schema: type[BaseModel] | None) -> dict[str, Any] | None:
        """The request's ``response_format`` for ``schema`` in this judge's structured-output mode."""
        js = _schema_for(schema)
        if js is None or self.mode == "none":
            return None
        if self.mode == "json_schema":
            return {
                "type": "json_schema",
                "json_schema": {"name": "judge_answer", "schema": js, "strict": True},
            }
        return {"type": "json_object"}

    def _sampling_temperature(self) -> float | None:
        if self._temperature_refused:
            return None
        if self.sample_temperature is not None:
            return self.sample_temperature
        if self.temperature is not None and self.temperature > 0:
            return self.temperature
        return DEFAULT_SAMPLE_TEMPERATURE

    #: chat completions return token log-probabilities when asked (``logprobs: true``)
    gives_logprobs = True

    async def a_generate_with_usage(self, prompt: str, schema: type[BaseModel] | None = None) -> Generation:
        return await self._complete(prompt, schema, None)

    async def a_generate_with_logprobs(self, prompt: str, schema: type[BaseModel] | None = None) -> Generation:
        """The ordinary answer, asked with ``logprobs: true``: ``Generation.logprobs`` holds its
        tokens. An endpoint that refuses the parameter, or answers without log-probabilities, is a
        ``JudgeConfigurationError``: it cannot be a cascade's cheap stage without sampling."""
        gen = await self._complete(prompt, schema, None, logprobs=True)
        if gen.logprobs is None:
            raise JudgeConfigurationError(no_logprobs(self.model, "answered without them"))
        return gen

    async def a_generate_samples(self, prompt: str, schema: type[BaseModel] | None, n: int) -> Generation:
        """``n`` sampled answers in one request (``n`` is sent when above 1) at the sampling
        temperature; ``ChoicesUnsupportedError`` when the endpoint refuses ``n``. Fewer choices
        than asked (an endpoint that ignores ``n``) are returned as they are, and this judge asks
        one choice per request from then on."""
        gen = await self._complete(prompt, schema, n)
        if gen.outputs is not None and len(gen.outputs) < n:
            self.choices_per_request = 1
        return gen

    async def _complete(
        self, prompt: str, schema: type[BaseModel] | None, n: int | None, logprobs: bool = False
    ) -> Generation:
        """One chat completion. ``n`` None: the ordinary answer (at ``temperature``); else ``n``
        sampled choices at the sampling temperature, all in ``Generation.outputs``."""
        import openai

        client = self._client()
        while True:
            body: dict[str, Any] = {
                "model": self.model,
                "messages": [{"role": "user", "content": message_content(prompt)}],
            }
            temperature = self.temperature if n is None else self._sampling_temperature()
            if temperature is not None:
                body["temperature"] = temperature
            if n is not None and n > 1:
                body["n"] = n
            if logprobs:
                body["logprobs"] = True
            fmt = self.response_format(schema)
            if fmt is not None:
                body["response_format"] = fmt
            try:
                # ``timeout`` is the whole call's deadline: the client's own timeout is per read,
                # so an endpoint trickling its answer a few bytes at a time would never hit it
                async with asyncio.timeout(self.timeout):
                    resp = await _post_completion(client, body)
                data = _completion_of(resp.content)
            except TimeoutError:
                raise JudgeCallTimeoutError(self.timeout) from None
            except openai.BadRequestError as exc:
                # endpoint capabilities: step down and ask again (not a retry of a fault)
                if fmt is not None and _mentions(exc, "response_format", "json_schema", "json_object", "structured"):
                    # step down from the format that was rejected; concurrent calls that were
                    # rejected for the same format must not step down twice
                    rejected = "json_schema" if fmt["type"] == "json_schema" else "json_object"
                    if self.mode == rejected:
                        self.mode = "json_object" if rejected == "json_schema" else "none"
                    continue
                if logprobs and _mentions(exc, "logprobs"):
                    raise JudgeConfigurationError(no_logprobs(self.model, "refused them")) from None
                if temperature is not None and _mentions(exc, "temperature"):
                    self.temperature = None
                    self._temperature_refused = True
                    continue
                if n is not None and n > 1 and _about_n(exc):
                    self.choices_per_request = 1
                    raise ChoicesUnsupportedError(
                        f"the judge endpoint refused n={n} (several answers per request)"
                    ) from None
                raise _refused(exc) from None
            except (openai.PermissionDeniedError, openai.UnprocessableEntityError) as exc:
                raise _refused(exc) from None
            except (json.JSONDecodeError, UnicodeDecodeError, openai.APIResponseValidationError) as exc:
                # an empty or cut-off 200 body: a fault of the moment (proxy, overloaded server)
                raise TransientJudgeError(
                    f"the judge endpoint answered HTTP 200 with an empty or unreadable body ({type(exc).__name__})"
                ) from None
            except openai.AuthenticationError as exc:
                raise JudgeConfigurationError(
                    f"the judge endpoint rejected the API key (HTTP {exc.status_code})"
                ) from None
            except openai.NotFoundError:
                raise JudgeConfigurationError(
                    f"the judge endpoint does not know model {self.model!r} (HTTP 404)"
                ) from None
            except openai.APIStatusError as exc:
                if exc.status_code == 413:
                    raise _refused(exc) from None
                raise
            break
        choices = data.get("choices")
        texts = [_choice_text(c) for c in choices] if isinstance(choices, list) else []
        content = texts[0] if texts else None
        outputs = None if n is None else [t or "" for t in texts]
        usage = data.get("usage")
        if not isinstance(usage, dict):
            usage = {}
        pt, ct = _count(usage.get("prompt_tokens")), _count(usage.get("completion_tokens"))
        if self.price_per_million is not None and pt is not None and ct is not None:
            cost: float | None = (pt * self.price_per_million[0] + ct * self.price_per_million[1]) / 1e6
        else:
            cost = cost_of(self.model, pt, ct)
        limits = {k: v for k, v in resp.headers.items() if k.lower().startswith("x-ratelimit-")}
        tokens = None
        if logprobs and isinstance(choices, list) and choices:
            first = choices[0] if isinstance(choices[0], dict) else {}
            chosen = first.get("logprobs")
            tokens = tokens_of(chosen.get("content") if isinstance(chosen, dict) else None)
        return Generation(
            output=content or "",
            prompt_tokens=pt,
            completion_tokens=ct,
            cost=cost,
            rate_limit_headers=limits or None,
            outputs=outputs,
            logprobs=tokens,
        )

    async def a_generate(self, prompt: str, schema: type[BaseModel] | None = None) -> Any:
        return (await self.a_generate_with_usage(prompt, schema)).output

    def generate(self, prompt: str, schema: type[BaseModel] | None = None) -> Any:
        from ..._async import run_sync

        async def _once() -> Any:
            try:
                return await self.a_generate(prompt, schema)
            finally:
                await self.aclose()

        return run_sync(_once)
