"""Judge a ranked node list: one call per group of ``max_nodes_per_call`` nodes, retried on
transient faults under the shared limiter and budget, validated by node id, repaired when the
answer does not cover the nodes exactly once (re-ask once, then split the group in halves).

With ``samples`` > 1 (self-consistency, ``consistency.py``) a group is asked for that many sampled
answers — in one request where the judge returns several choices (``n``), else one request per
answer — each unusable answer is replaced by a repaired one, and the majority verdict per node
is kept with its agreement.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from pydantic import BaseModel

from .breaker import CircuitBreaker
from .budget import Budget
from .cache import VerdictCache, judgment_keys
from .consistency import agreement_of, majority, node_verdict
from .errors import JudgeAnswerError, JudgeConfigurationError, JudgeUnavailableError
from .judge_events import JudgeRetry, notify_retry, retry_reason
from .judges.base import ChoicesUnsupportedError, Generation, JudgeModel
from .limiter import AdaptiveLimiter, RequestQuota
from .pricing import price_of
from .retry import backoff_seconds, is_rate_limit, is_transient, retry_after_seconds
from .secrets import redact
from .template import answer_format
from .verdicts import AnswerProblem, JudgeAnswer, NodeVerdict

log = logging.getLogger("ctxprec_ops.judging")

__all__ = [
    "JudgeRun",
    "Usage",
    "judge_nodes",
    "gather_settled",
    "JudgeGuards",
    "use_guards",
    "active_guards",
    "answers_inline_in",
]

#: a (rank, node text) pair's parts (C-level accessors: no comprehension frame per group)
_rank, _text = itemgetter(0), itemgetter(1)

#: completion tokens assumed per node when estimating a call's cost before making it
EST_COMPLETION_TOKENS_PER_NODE = 40


@dataclass
class JudgeRun:
    """Shared state of one evaluation run: limiter, quota, circuit breaker, budget, cache, retry
    settings. ``breaker``/``quota`` may span several runs (the pipeline shares them across the
    chunks of a partition)."""

    limiter: AdaptiveLimiter
    budget: Budget | None = None
    cache: VerdictCache | None = None
    max_retries: int = 6
    breaker: CircuitBreaker | None = None
    quota: RequestQuota | None = None
    stats: dict[str, int] = field(default_factory=lambda: {"retries": 0, "repairs": 0, "calls": 0})


@dataclass
class JudgeGuards:
    """A circuit breaker and a request quota that outlive one ``evaluate()`` call (the pipeline
    installs one pair per partition run with ``use_guards``)."""

    breaker: CircuitBreaker | None = None
    quota: RequestQuota | None = None


_guards: ContextVar[JudgeGuards | None] = ContextVar("ctxprec_judge_guards", default=None)


@contextmanager
def use_guards(guards: JudgeGuards) -> Iterator[JudgeGuards]:
    """Judge calls made inside this block (``evaluate``) use ``guards``."""
    token = _guards.set(guards)
    try:
        yield guards
    finally:
        _guards.reset(token)


def active_guards(concurrency: int = 16) -> JudgeGuards:
    """The installed guards, else a fresh breaker (sized for ``concurrency``) and quota from the
    environment."""
    guards = _guards.get()
    if guards is not None:
        return guards
    return JudgeGuards(breaker=CircuitBreaker(trip_after=trip_after_for(concurrency)), quota=RequestQuota.from_env())


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


async def gather_settled(*aws):
    """Like ``asyncio.gather`` but, when one awaitable fails, wait for the others to finish
    before raising the first error: no sibling judge call keeps running (and spending) unseen
    after its case is reported as failed, and every call's spend is counted."""
    results = await asyncio.gather(*aws, return_exceptions=True)
    for r in results:
        if isinstance(r, BaseException):
            raise r
    return results


def _estimate_cost(judge: JudgeModel, prompt: str, n_nodes: int, choices: int = 1) -> float | None:
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
    judge: JudgeModel, prompt: str, tokens: float, run: JudgeRun, schema: type[BaseModel], choices: int | None
) -> Generation:
    """One request under the concurrency limiter and the quota (``choices``: sampled answers)."""
    # the limiter's and the quota's fast paths are taken without a coroutine (the same steps)
    if not run.limiter.try_acquire():
        await run.limiter.acquire()
    try:
        if run.quota is not None and (wait := run.quota.reserve(tokens)) > 0:
            await run.quota.wait(wait)
        try:
            if choices is None:
                out = await judge.a_generate_with_usage(prompt, schema)
            else:
                out = await judge.a_generate_samples(prompt, schema, choices)
        except Exception as exc:
            if run.quota is not None:
                run.quota.observe(_headers_of(exc))
            if is_rate_limit(exc):
                run.limiter.on_rate_limited(retry_after_seconds(exc))
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
            run.limiter.on_rate_limited(retry_after_seconds(exc))
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
) -> Generation:
    """Send until answered: a transient fault is retried with backoff (``max_retries`` times);
    a fault while the circuit breaker is open is the judge's outage, not the row's, and waits for
    the breaker instead of using up the row's retries."""
    breaker = run.breaker
    if breaker is not None and breaker.endpoint is None:
        breaker.set_endpoint(getattr(judge, "endpoint", None))
    # sampled answers (``choices``) are always requested the ordinary way
    inline = choices is None and answers_inline_in(judge, run)
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
                gen = await _send_once(judge, prompt, tokens, run, schema, choices)
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
            wait = backoff_seconds(retries, exc)
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


async def _call(
    judge: JudgeModel,
    prompt: str,
    n_nodes: int,
    run: JudgeRun,
    usage: Usage,
    schema: type[BaseModel] = JudgeAnswer,
    choices: int | None = None,
) -> Any:
    """One judge call with retries; returns the raw answer, or with ``choices`` (sampled
    answers asked in this one request) the list of raw answers the endpoint returned."""
    reserved = 0.0
    if run.budget is not None:
        est = _estimate_cost(judge, prompt, n_nodes, choices or 1)
        if est is None:  # a cap that cannot be checked must not be silently ignored
            raise JudgeConfigurationError(
                f"cannot keep to the run's max_cost: no price is known for judge "
                f"{judge.get_model_name()!r}; set CTXPREC_PRICES (or the judge's price_per_million)"
            )
        reserved = run.budget.reserve(est)
    gen: Generation | None = None
    try:
        gen = await _send(judge, prompt, n_nodes, run, usage, schema, choices)
    finally:
        if run.budget is not None:
            run.budget.settle(reserved, gen.cost if gen is not None else 0.0)
    run.stats["calls"] += 1
    usage.add(gen)
    if choices is not None:
        return gen.outputs if gen.outputs is not None else [gen.output]
    return gen.output


async def _judge_group(
    judge: JudgeModel,
    template: type,
    input: str,
    expected: str,
    group: Sequence[tuple[int, str]],
    run: JudgeRun,
    usage: Usage,
    samples: int = 1,
    sampled: bool = False,
) -> dict[int, NodeVerdict]:
    """The group's verdicts: one answer (``sampled``: one sampled answer, at the sampling
    temperature), or with ``samples`` > 1 the majority of that many sampled answers."""
    ids = list(map(_rank, group))
    fmt = answer_format(template)  # by node id (ctxprec templates) or in node order (deepeval-style)
    prompt = fmt.prompt(input, expected, list(map(_text, group)), ids)
    if samples > 1:
        return await _majority_of(judge, template, input, expected, group, run, usage, samples, prompt)
    choices = 1 if sampled else None
    raw = await _call(judge, prompt, len(group), run, usage, fmt.schema, choices)
    try:
        return fmt.verdicts(raw[0] if sampled else raw, ids)
    except AnswerProblem as problem:
        first_problem = str(problem)
    return await _repair(judge, template, input, expected, group, run, usage, prompt, first_problem, sampled)


async def _repair(
    judge: JudgeModel,
    template: type,
    input: str,
    expected: str,
    group: Sequence[tuple[int, str]],
    run: JudgeRun,
    usage: Usage,
    prompt: str,
    problem: str,
    sampled: bool,
) -> dict[int, NodeVerdict]:
    """An unusable answer: re-ask once with the problem, then judge the group's halves apart."""
    ids = [k for k, _ in group]
    fmt = answer_format(template)
    usage.repairs += 1
    run.stats["repairs"] += 1
    repair = fmt.repair(prompt, problem, ids)
    raw = await _call(judge, repair, len(group), run, usage, fmt.schema, 1 if sampled else None)
    try:
        return fmt.verdicts(raw[0] if sampled else raw, ids)
    except AnswerProblem as again:
        second_problem = str(again)
    if len(group) == 1:
        raise JudgeAnswerError(
            f"the judge's answer for node {ids[0]} was unusable even after re-asking: {second_problem}"
        )
    mid = len(group) // 2
    left, right = await gather_settled(
        _judge_group(judge, template, input, expected, group[:mid], run, usage, sampled=sampled),
        _judge_group(judge, template, input, expected, group[mid:], run, usage, sampled=sampled),
    )
    return {**left, **right}


async def _sampled_answers(
    judge: JudgeModel, prompt: str, n_nodes: int, run: JudgeRun, usage: Usage, schema: type[BaseModel], samples: int
) -> list[Any]:
    """``samples`` raw sampled answers: in one request where the judge returns several choices,
    topped up (or, for a judge without ``n``, all asked) one request per answer, concurrently."""
    answers: list[Any] = []
    per_request = max(1, int(getattr(judge, "choices_per_request", 1) or 1))
    if per_request > 1:
        try:
            answers = list(await _call(judge, prompt, n_nodes, run, usage, schema, min(samples, per_request)))
        except ChoicesUnsupportedError:  # the judge now asks one answer per request
            answers = []
    missing = samples - len(answers)
    if missing > 0:
        more = await gather_settled(*(_call(judge, prompt, n_nodes, run, usage, schema, 1) for _ in range(missing)))
        answers += [a[0] for a in more if a]
    return answers[:samples]


async def _majority_of(
    judge: JudgeModel,
    template: type,
    input: str,
    expected: str,
    group: Sequence[tuple[int, str]],
    run: JudgeRun,
    usage: Usage,
    samples: int,
    prompt: str,
) -> dict[int, NodeVerdict]:
    """The majority verdict per node of ``samples`` sampled answers; each unusable answer is
    repaired on its own (re-asked with its problem, then split), so every vote counts."""
    ids = [k for k, _ in group]
    fmt = answer_format(template)
    answers: list[dict[int, NodeVerdict]] = []
    problems: list[str] = []
    for raw in await _sampled_answers(judge, prompt, len(group), run, usage, fmt.schema, samples):
        try:
            answers.append(fmt.verdicts(raw, ids))
        except AnswerProblem as problem:
            problems.append(str(problem))
    problems += ["the judge returned no answer"] * (samples - len(answers) - len(problems))
    if problems:
        answers += await gather_settled(
            *(_repair(judge, template, input, expected, group, run, usage, prompt, p, True) for p in problems)
        )
    return majority(answers, ids)


async def judge_nodes(
    judge: JudgeModel,
    template: type,
    prompt_version: str,
    input: str,
    expected: str,
    nodes: Sequence[str],
    run: JudgeRun,
    *,
    max_nodes_per_call: int = 20,
    usage: Usage | None = None,
    samples: int = 1,
) -> tuple[list[NodeVerdict], Usage]:
    """Verdicts for ``nodes`` (rank 1 first), in rank order, and what they cost.

    Spend is added to ``usage`` when given, so the caller still knows what was paid for when
    judging fails part-way (e.g. a repair call exhausted its retries). ``samples`` > 1: each
    verdict is the majority of that many sampled answers (a ``SampledVerdict`` with its
    agreement); a deterministic judge (``JudgeModel.deterministic``) is asked once. The caller's
    ``prompt_version`` must tell sampled configurations apart (``consistency.sampled_version``):
    it keys the cache.
    """
    usage = usage if usage is not None else Usage()
    if samples > 1 and judge.deterministic:
        samples = 1  # it would give the same answer every time
    model = judge.get_model_name()
    verdicts: dict[int, NodeVerdict] = {}
    todo: list[tuple[int, str]] = []
    keys: dict[int, bytes] = {}
    cache = run.cache
    all_keys = judgment_keys(model, prompt_version, input, expected, nodes) if cache is not None else None
    for rank, text in enumerate(nodes, start=1):
        if cache is not None and all_keys is not None:
            key = all_keys[rank - 1]
            keys[rank] = key
            hit = cache.get(key)
            if hit is not None:
                verdicts[rank] = node_verdict(rank, hit.relevant, hit.reason, agreement_of(hit))
                usage.cached_nodes += 1
                continue
        todo.append((rank, text))

    if todo:
        fast = getattr(judge, "judge_nodes", None)
        if callable(fast):  # offline judges answer directly, nothing to repair or retry
            fresh = fast(input, expected, todo)
        else:
            if len(todo) <= max_nodes_per_call:  # the common case: one call, no task to schedule
                fresh = await _judge_group(judge, template, input, expected, todo, run, usage, samples)
            else:
                groups = [todo[i : i + max_nodes_per_call] for i in range(0, len(todo), max_nodes_per_call)]
                parts = await gather_settled(
                    *(_judge_group(judge, template, input, expected, g, run, usage, samples) for g in groups)
                )
                fresh = {k: v for part in parts for k, v in part.items()}
        for rank, _ in todo:
            v = fresh[rank]
            verdicts[rank] = v
            if run.cache is not None:
                run.cache.put(keys[rank], v)
    return list(map(verdicts.__getitem__, range(1, len(nodes) + 1))), usage
