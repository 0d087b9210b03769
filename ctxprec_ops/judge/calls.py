"""One judge call, sent until answered: under the shared concurrency limiter, request quota,
circuit breaker and budget, retried on transient faults with backoff (``call_judge``). Also the
state one run shares between its calls (``JudgeRun``, ``JudgeGuards``) and what a case's calls
cost (``Usage``). What is asked in those calls — node groups, repairs, samples — is ``nodes``."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from ..errors import JudgeConfigurationError, JudgeUnavailableError
from ..scoring.verdicts import JudgeAnswer
from ..secrets import redact
from . import defaults
from .answer_watch import AnswerWatch
from .breaker import CircuitBreaker
from .budget import Budget
from .cache import VerdictCache
from .events import JudgeRetry, notify_retry, retry_reason
from .limiter import AdaptiveLimiter, RequestQuota
from .models.base import Generation, JudgeModel
from .pricing import price_of
from .retry import RetryWaits, backoff_seconds, is_rate_limit, is_transient, retry_after_seconds

log = logging.getLogger("ctxprec_ops.judging")

__all__ = [
    "JudgeRun",
    "Usage",
    "call_judge",
    "CaseRef",
    "current_case",
    "gather_settled",
    "JudgeGuards",
    "use_guards",
    "active_guards",
    "answers_inline_in",
    "estimate_cost",
]

#: completion tokens assumed per node when estimating a call's cost before making it
EST_COMPLETION_TOKENS_PER_NODE = 40


@dataclass
class JudgeGuards:
    """A circuit breaker, a request quota and an answer watch that outlive one ``evaluate()``
    call (the pipeline installs one set per partition run with ``use_guards``)."""

    breaker: CircuitBreaker | None = None
    quota: RequestQuota | None = None
    answers: AnswerWatch = field(default_factory=AnswerWatch)


_guards: ContextVar[JudgeGuards | None] = ContextVar("ctxprec_judge_guards", default=None)


@dataclass
class JudgeRun:
    """Shared state of one evaluation run: limiter, quota, circuit breaker, budget, cache, retry
    settings. ``breaker``/``quota`` may span several runs (the pipeline shares them across the
    chunks of a partition); ``answers`` (default: the installed guards' watch, else a new one)
    stops a run early when the judge's answers are systematically unusable."""

    limiter: AdaptiveLimiter
    budget: Budget | None = None
    cache: VerdictCache | None = None
    max_retries: int = defaults.MAX_RETRIES
    breaker: CircuitBreaker | None = None
    quota: RequestQuota | None = None
    #: how long a transient failure is waited out before its retry
    waits: RetryWaits = field(default_factory=RetryWaits)
    stats: dict[str, int] = field(default_factory=lambda: {"retries": 0, "repairs": 0, "calls": 0})
    answers: AnswerWatch | None = None

    def __post_init__(self) -> None:
        if self.answers is None:
            guards = _guards.get()
            self.answers = guards.answers if guards is not None else AnswerWatch()


@dataclass(frozen=True)
class CaseRef:
    """Which case a judge call is made for: its id and its place in the run (chunk, index), so
    a transport that collects requests (the Batch API) can label and order them."""

    case_id: str
    order: tuple[int, int] = (0, 0)


#: the case being judged in this task (set by the pipeline's stream around each case)
current_case: ContextVar[CaseRef | None] = ContextVar("ctxprec_current_case", default=None)


@contextmanager
def use_guards(guards: JudgeGuards) -> Iterator[JudgeGuards]:
    """Judge calls made inside this block (``evaluate``) use ``guards``."""
    token = _guards.set(guards)
    try:
        yield guards
    finally:
        _guards.reset(token)


def active_guards(concurrency: int = defaults.CONCURRENCY, outage_tolerance: float | None = None) -> JudgeGuards:
    """The installed guards, else a fresh breaker (sized for ``concurrency``, waiting an outage out
    for ``outage_tolerance`` seconds, default ``defaults.OUTAGE_TOLERANCE``) and a quota without a
    cap (paced by the provider's headers only)."""
    guards = _guards.get()
    if guards is not None:
        return guards
    tolerance = defaults.OUTAGE_TOLERANCE if outage_tolerance is None else outage_tolerance
    breaker = CircuitBreaker(tolerance, trip_after=trip_after_for(concurrency))
    return JudgeGuards(breaker=breaker, quota=RequestQuota())


def trip_after_for(concurrency: int) -> int:
    """Consecutive judge-level failures that open the breaker: two full waves of requests in
    flight (at least 5), so scattered faults (a 30 % fault rate at concurrency 16) never look like
    an outage, while a dead endpoint trips it on the rows' first or second attempt."""
    return max(5, 2 * concurrency)


def _plus(a, b):
    return None if a is None or b is None else a + b


@dataclass
class Usage:
    """What judging one case cost."""

    calls: int = 0
    prompt_tokens: int | None = 0
    completion_tokens: int | None = 0
    cost: float | None = 0.0
    attempts: int = 1
    repairs: int = 0
    cached_nodes: int = 0
    #: a judge cascade (``judge.cascade``): nodes it judged, those the strong judge decided, and
    #: the strong judge's part of ``cost``
    cascade_nodes: int = 0
    escalated_nodes: int = 0
    strong_cost: float | None = 0.0

    def add(self, gen: Generation) -> None:
        self.calls += 1
        self._add_spend(gen.prompt_tokens, gen.completion_tokens, gen.cost)

    def _add_spend(self, prompt_tokens, completion_tokens, cost) -> None:
        """Add what one more call (or case) spent; an unknown part makes the total unknown."""
        self.prompt_tokens = _plus(self.prompt_tokens, prompt_tokens)
        self.completion_tokens = _plus(self.completion_tokens, completion_tokens)
        self.cost = _plus(self.cost, cost)

    def merge(self, other: Usage) -> None:
        self.calls += other.calls
        self._add_spend(other.prompt_tokens, other.completion_tokens, other.cost)
        self.attempts = max(self.attempts, other.attempts)
        self.repairs += other.repairs
        self.cached_nodes += other.cached_nodes
        self.cascade_nodes += other.cascade_nodes
        self.escalated_nodes += other.escalated_nodes
        self.strong_cost = _plus(self.strong_cost, other.strong_cost)


async def gather_settled(*aws):
    """Like ``asyncio.gather`` but, when one awaitable fails, wait for the others to finish
    before raising the first error: no sibling judge call keeps running (and spending) unseen
    after its case is reported as failed, and every call's spend is counted."""
    results = await asyncio.gather(*aws, return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results


def estimate_cost(judge: JudgeModel, prompt: str, n_nodes: int, choices: int = 1) -> float | None:
    """What one call of ``prompt`` (``n_nodes`` verdicts, ``choices`` answers) is expected to cost
    in USD, before it is made (None: the model's price is unknown)."""
    price = judge.price_per_million or price_of(judge.get_model_name())
    if price is None:
        return None
    prompt_tokens = len(prompt) / 4 + 8
    completion_tokens = (EST_COMPLETION_TOKENS_PER_NODE * n_nodes + 10) * choices
    return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1e6


def _estimate_tokens(prompt: str, n_nodes: int, choices: int = 1) -> float:
    """Prompt tokens (characters / 4) plus the completion allowance of ``n_nodes`` verdicts
    (per answer: a request for ``choices`` answers is charged for all of them)."""
    return len(prompt) / 4 + 8 + (EST_COMPLETION_TOKENS_PER_NODE * n_nodes + 10) * choices


def _headers_of(exc: BaseException) -> Mapping[str, str] | None:
    response = getattr(exc, "response", None)
    return getattr(response, "headers", None)


async def _send_once(
    judge: JudgeModel,
    prompt: str,
    tokens: float,
    run: JudgeRun,
    schema: type[BaseModel],
    choices: int | None,
    logprobs: bool = False,
) -> Generation:
    """One request under the concurrency limiter and the quota (``choices``: sampled answers;
    ``logprobs``: the answer's token log-probabilities too)."""
    # the limiter's and the quota's fast paths are taken without a coroutine (the same steps)
    if not run.limiter.try_acquire():
        await run.limiter.acquire()
    try:
        if run.quota is not None and (wait := run.quota.reserve(tokens)) > 0:
            await run.quota.wait(wait)
        if run.answers is not None and run.answers.tripped:  # found unusable while this one waited
            run.answers.check()
        try:
            if logprobs:
                out = await judge.a_generate_with_logprobs(prompt, schema)
            elif choices is None:
                out = await judge.a_generate_with_usage(prompt, schema)
            else:
                out = await judge.a_generate_samples(prompt, schema, choices)
        except Exception as exc:
            if run.quota is not None:
                run.quota.observe(_headers_of(exc))
            if is_rate_limit(exc):
                run.limiter.on_rate_limited(run.waits.cap(retry_after_seconds(exc)))
            raise
    finally:
        if not run.limiter.try_release():
            await run.limiter.release()
    run.limiter.on_success()
    if run.quota is not None:
        run.quota.observe(out.rate_limit_headers)
        if out.prompt_tokens is not None and out.completion_tokens is not None:
            run.quota.settle(tokens, out.prompt_tokens + out.completion_tokens)
    return out


def _answer_inline(judge: JudgeModel, prompt: str, run: JudgeRun, schema: type[BaseModel]) -> Generation:
    """``_send_once`` for a judge that ``answers_inline``: its answer, computed right here. It holds
    no limiter slot (nothing overlaps it) and the quota is not involved (``answers_inline_in``)."""
    try:
        out = judge.generate_inline(prompt, schema)
    except Exception as exc:
        if is_rate_limit(exc):
            run.limiter.on_rate_limited(run.waits.cap(retry_after_seconds(exc)))
        raise
    run.limiter.on_success()
    return out


def answers_inline_in(judge: object, run: JudgeRun) -> bool:
    """Whether ``judge``'s calls in ``run`` are answered inline (``JudgeModel.answers_inline``):
    never under a request quota with a configured cap, which paces every call the ordinary way
    (a quota without one paces by provider headers only, and a judge in process sends none)."""
    quota = run.quota
    return (quota is None or not quota.capped) and bool(getattr(judge, "answers_inline", False))


async def _send(
    judge: JudgeModel,
    prompt: str,
    n_nodes: int,
    run: JudgeRun,
    usage: Usage,
    schema: type[BaseModel],
    choices: int | None = None,
    logprobs: bool = False,
) -> Generation:
    """Send until answered: a transient fault is retried with backoff (``max_retries`` times);
    a fault while the circuit breaker is open is the judge's outage, not the row's, and waits for
    the breaker instead of using up the row's retries."""
    breaker = run.breaker
    if breaker is not None and breaker.endpoint is None:
        breaker.set_endpoint(getattr(judge, "endpoint", None))
    # sampled answers (``choices``) and log-probabilities are always requested the ordinary way
    inline = choices is None and not logprobs and answers_inline_in(judge, run)
    tokens = 0.0 if inline else _estimate_tokens(prompt, n_nodes, choices or 1)  # paces the quota (none inline)
    sent = retries = 0
    while True:
        probe = False  # a closed breaker admits at once (``admit`` returns False without waiting)
        if breaker is not None and (breaker.state != "closed" or breaker.gave_up is not None):
            probe = await breaker.admit()
        sent += 1
        usage.attempts = max(usage.attempts, sent)
        try:
            if inline:
                gen = _answer_inline(judge, prompt, run, schema)
            else:
                gen = await _send_once(judge, prompt, tokens, run, schema, choices, logprobs)
        except Exception as exc:
            if not is_transient(exc):
                if breaker is not None and getattr(exc, "status_code", None):
                    breaker.on_answer()  # an HTTP answer (400, 401, ...): the endpoint is up
                elif breaker is not None and probe:
                    breaker.abandon_probe()
                raise
            if breaker is not None and breaker.on_failure(exc, probe=probe):
                run.stats["outage_waits"] = run.stats.get("outage_waits", 0) + 1
                continue
            if retries >= run.max_retries:
                raise JudgeUnavailableError(
                    f"judge {judge.get_model_name()!r} still failing after {sent} attempts: "
                    f"{type(exc).__name__}: {redact(str(exc))[:300]}"
                ) from None
            retries += 1
            run.stats["retries"] += 1
            log.debug("judge call failed (%s), retry %d", redact(str(exc))[:200], retries)
            wait = backoff_seconds(retries, exc, run.waits)
            notify_retry(JudgeRetry(retries, run.max_retries, wait, retry_reason(exc)))
            await asyncio.sleep(wait)
            continue
        except BaseException:
            if probe and breaker is not None:
                breaker.abandon_probe()
            raise
        if breaker is not None:
            breaker.on_answer()
        return gen


async def call_judge(
    judge: JudgeModel,
    prompt: str,
    n_nodes: int,
    run: JudgeRun,
    usage: Usage,
    schema: type[BaseModel] = JudgeAnswer,
    choices: int | None = None,
    logprobs: bool = False,
) -> Any:
    """One judge call with retries; returns the raw answer, or with ``choices`` (sampled
    answers asked in this one request) the list of raw answers the endpoint returned, or with
    ``logprobs`` the pair (raw answer, its tokens' log-probabilities)."""
    reserved = 0.0
    if run.budget is not None:
        est = estimate_cost(judge, prompt, n_nodes, choices or 1)
        if est is None:  # a cap that cannot be checked must not be silently ignored
            raise JudgeConfigurationError(
                f"cannot keep to the run's max_cost: no price is known for judge "
                f"{judge.get_model_name()!r}; set CTXPREC_PRICES (or the judge's price_per_million)"
            )
        reserved = run.budget.reserve(est)
    gen: Generation | None = None
    try:
        gen = await _send(judge, prompt, n_nodes, run, usage, schema, choices, logprobs)
    finally:
        if run.budget is not None:
            run.budget.settle(reserved, gen.cost if gen is not None else 0.0)
    run.stats["calls"] += 1
    usage.add(gen)
    if choices is not None:
        return gen.outputs if gen.outputs is not None else [gen.output]
    if logprobs:
        return gen.output, gen.logprobs
    return gen.output
