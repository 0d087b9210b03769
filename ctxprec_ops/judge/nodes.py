"""Judge a ranked node list: one call per group of ``max_nodes_per_call`` nodes (``calls.call_judge``:
retried on transient faults under the shared limiter and budget), validated by node id, repaired
when the answer does not cover the nodes exactly once: re-asked once with the problem, then the
group's two halves asked once each.

Repairs are bounded per case: at most ``REPAIR_CALLS`` (3) paid calls on top of the first answer
of each group, so a case of one group costs at most 4 calls whatever the judge answers (the
re-ask-then-split cascade used to recurse, about 4n - 2 calls for n unusable nodes). Every
answer's outcome goes to the run's ``AnswerWatch``: a judge whose answers keep failing the same
way stops the run's remaining calls (``answer_watch``).

With ``samples`` > 1 (self-consistency, ``scoring/consistency.py``) a group is asked for that many
sampled answers — in one request where the judge returns several choices (``n``), else one request
per answer — each unusable answer is replaced by a repaired one (within the same repair bound),
and the majority verdict per node is kept with its agreement.

With ``confidence="logprobs"`` every answer is asked with its token log-probabilities and each
verdict carries the probability of its ``true``/``false`` value (a ``ConfidentVerdict``,
``logprobs.value_confidences``): the cheap stage of a judge cascade (``cascade``). ``ranks``
judges some nodes of a case under their own ids (the cascade's escalated nodes).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

from pydantic import BaseModel

from ..errors import JudgeAnswerError
from ..scoring.confidence import ConfidentVerdict, confidence_of
from ..scoring.consistency import agreement_of, majority, node_verdict
from ..scoring.template import AnswerFormat, answer_format
from ..scoring.verdicts import AnswerProblem, NodeVerdict
from . import defaults
from .answer_watch import AnswerWatch
from .cache import judgment_keys
from .calls import JudgeRun, Usage, call_judge, gather_settled
from .logprobs import Token, value_confidences
from .models.base import ChoicesUnsupportedError, JudgeModel

__all__ = ["judge_nodes", "REPAIR_CALLS"]

#: paid repair calls one case may make on top of each group's first answer (re-ask + two halves)
REPAIR_CALLS = 3

#: a (rank, node text) pair's parts (C-level accessors: no comprehension frame per group)
_rank, _text = itemgetter(0), itemgetter(1)


@dataclass
class _Case:
    """One case's repair allowance and the problems of its answers (for the ``AnswerWatch``)."""

    watch: AnswerWatch
    repairs_left: int = REPAIR_CALLS
    problems: list[AnswerProblem] = field(default_factory=list)

    def read(
        self, fmt: AnswerFormat, raw: Any, ids: list[int], tokens: list[Token] | None = None, logprobs: bool = False
    ) -> dict[int, NodeVerdict]:
        """The answer's verdicts (``logprobs``: each with the probability of its value in
        ``tokens``, 0 where they do not spell it); an unusable answer's problem is kept and raised."""
        try:
            verdicts = fmt.verdicts(raw, ids)
        except AnswerProblem as problem:
            self.problems.append(problem)
            self.watch.unusable(self, self.problems, failed=False)
            raise
        self.watch.usable()
        if not logprobs:
            return verdicts
        conf = value_confidences(tokens, ids) if tokens else {}
        return {
            k: ConfidentVerdict(node=k, relevant=v.relevant, reason=v.reason, confidence=conf.get(k, 0.0))
            for k, v in verdicts.items()
        }

    def take(self, calls: int) -> bool:
        """Spend ``calls`` repair calls if the allowance has them."""
        if calls > self.repairs_left:
            return False
        self.repairs_left -= calls
        return True


async def _ask(
    judge: JudgeModel,
    prompt: str,
    n_nodes: int,
    run: JudgeRun,
    usage: Usage,
    fmt: AnswerFormat,
    sampled: bool,
    logprobs: bool,
) -> tuple[Any, list[Token] | None]:
    """One call: the raw answer (``sampled``: one sampled answer) and, with ``logprobs``, its tokens."""
    raw = await call_judge(judge, prompt, n_nodes, run, usage, fmt.schema, 1 if sampled else None, logprobs)
    if sampled:
        return raw[0], None
    if logprobs:
        return raw[0], raw[1]
    return raw, None


async def _judge_group(
    judge: JudgeModel,
    template: type,
    input: str,
    expected: str,
    group: Sequence[tuple[int, str]],
    run: JudgeRun,
    usage: Usage,
    case: _Case,
    samples: int = 1,
    sampled: bool = False,
    logprobs: bool = False,
) -> dict[int, NodeVerdict]:
    """The group's verdicts: one answer (``sampled``: one sampled answer, at the sampling
    temperature; ``logprobs``: with each value's probability), or with ``samples`` > 1 the
    majority of that many sampled answers."""
    ids = list(map(_rank, group))
    fmt = answer_format(template)  # by node id (ctxprec templates) or in node order (deepeval-style)
    prompt = fmt.prompt(input, expected, list(map(_text, group)), ids)
    case.watch.check()
    if samples > 1:
        return await _majority_of(judge, template, input, expected, group, run, usage, case, samples, prompt)
    raw, tokens = await _ask(judge, prompt, len(group), run, usage, fmt, sampled, logprobs)
    try:
        return case.read(fmt, raw, ids, tokens, logprobs)
    except AnswerProblem as problem:
        first_problem = str(problem)
    return await _repair(
        judge, template, input, expected, group, run, usage, case, prompt, first_problem, sampled, logprobs
    )


def _unusable(ids: list[int], problem: str, how: str) -> JudgeAnswerError:
    what = f"node {ids[0]}" if len(ids) == 1 else f"nodes {ids[0]}-{ids[-1]}"
    return JudgeAnswerError(f"the judge's answer for {what} was unusable even after {how}: {problem}")


async def _repair(
    judge: JudgeModel,
    template: type,
    input: str,
    expected: str,
    group: Sequence[tuple[int, str]],
    run: JudgeRun,
    usage: Usage,
    case: _Case,
    prompt: str,
    problem: str,
    sampled: bool,
    logprobs: bool = False,
) -> dict[int, NodeVerdict]:
    """An unusable answer: re-ask once with the problem, then ask the group's halves once each,
    within the case's repair allowance."""
    ids = [k for k, _ in group]
    fmt = answer_format(template)
    if not case.take(1):
        raise _unusable(ids, problem, "the case's repair calls were spent")
    case.watch.check()
    usage.repairs += 1
    run.stats["repairs"] += 1
    repair = fmt.repair(prompt, problem, ids)
    raw, tokens = await _ask(judge, repair, len(group), run, usage, fmt, sampled, logprobs)
    try:
        return case.read(fmt, raw, ids, tokens, logprobs)
    except AnswerProblem as again:
        second_problem = str(again)
    if len(group) == 1 or not case.take(2):
        raise _unusable(ids, second_problem, "re-asking")
    mid = len(group) // 2
    left, right = await gather_settled(
        _ask_once(judge, template, input, expected, group[:mid], run, usage, case, sampled, logprobs),
        _ask_once(judge, template, input, expected, group[mid:], run, usage, case, sampled, logprobs),
    )
    return {**left, **right}


async def _ask_once(
    judge: JudgeModel,
    template: type,
    input: str,
    expected: str,
    group: Sequence[tuple[int, str]],
    run: JudgeRun,
    usage: Usage,
    case: _Case,
    sampled: bool,
    logprobs: bool = False,
) -> dict[int, NodeVerdict]:
    """Half a group whose answers were unusable twice: asked once, not repaired further."""
    ids = list(map(_rank, group))
    fmt = answer_format(template)
    case.watch.check()
    prompt = fmt.prompt(input, expected, list(map(_text, group)), ids)
    raw, tokens = await _ask(judge, prompt, len(group), run, usage, fmt, sampled, logprobs)
    try:
        return case.read(fmt, raw, ids, tokens, logprobs)
    except AnswerProblem as problem:
        raise _unusable(ids, str(problem), "re-asking and asking its half of the nodes alone") from None


async def _sampled_answers(
    judge: JudgeModel, prompt: str, n_nodes: int, run: JudgeRun, usage: Usage, schema: type[BaseModel], samples: int
) -> list[Any]:
    """``samples`` raw sampled answers: in one request where the judge returns several choices,
    topped up (or, for a judge without ``n``, all asked) one request per answer, concurrently."""
    answers: list[Any] = []
    per_request = max(1, int(getattr(judge, "choices_per_request", 1) or 1))
    if per_request > 1:
        try:
            answers = list(await call_judge(judge, prompt, n_nodes, run, usage, schema, min(samples, per_request)))
        except ChoicesUnsupportedError:  # the judge now asks one answer per request
            answers = []
    missing = samples - len(answers)
    if missing > 0:
        more = await gather_settled(
            *(call_judge(judge, prompt, n_nodes, run, usage, schema, 1) for _ in range(missing))
        )
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
    case: _Case,
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
            answers.append(case.read(fmt, raw, ids))
        except AnswerProblem as problem:
            problems.append(str(problem))
    problems += ["the judge returned no answer"] * (samples - len(answers) - len(problems))
    if problems:
        answers += await gather_settled(
            *(_repair(judge, template, input, expected, group, run, usage, case, prompt, p, True) for p in problems)
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
    max_nodes_per_call: int = defaults.MAX_NODES_PER_CALL,
    usage: Usage | None = None,
    samples: int = 1,
    ranks: Sequence[int] | None = None,
    confidence: str | None = None,
) -> tuple[list[NodeVerdict], Usage]:
    """Verdicts for ``nodes`` (rank 1 first), in rank order, and what they cost.

    Spend is added to ``usage`` when given, so the caller still knows what was paid for when
    judging fails part-way (e.g. a repair call exhausted its retries). ``samples`` > 1: each
    verdict is the majority of that many sampled answers (a ``SampledVerdict`` with its
    agreement); a deterministic judge (``JudgeModel.deterministic``) is asked once. The caller's
    ``prompt_version`` must tell sampled configurations apart (``consistency.sampled_version``):
    it keys the cache. ``confidence="logprobs"``: each verdict is a ``ConfidentVerdict`` (the
    caller's ``prompt_version`` says so too: a cached verdict must carry its confidence).
    ``ranks``: the ids of ``nodes`` when they are not 1..n (some nodes of a case), in their order.
    """
    usage = usage if usage is not None else Usage()
    if samples > 1 and judge.deterministic:
        samples = 1  # it would give the same answer every time
    logprobs = confidence == "logprobs" and samples == 1
    model = judge.get_model_name()
    ids = list(ranks) if ranks is not None else list(range(1, len(nodes) + 1))
    verdicts: dict[int, NodeVerdict] = {}
    todo: list[tuple[int, str]] = []
    keys: dict[int, bytes] = {}
    cache = run.cache
    all_keys = judgment_keys(model, prompt_version, input, expected, nodes) if cache is not None else None
    for i, (rank, text) in enumerate(zip(ids, nodes)):
        if cache is not None and all_keys is not None:
            key = all_keys[i]
            keys[rank] = key
            hit = cache.get(key)
            if hit is not None:
                if logprobs:
                    sure = confidence_of(hit)
                    verdicts[rank] = ConfidentVerdict(
                        node=rank, relevant=hit.relevant, reason=hit.reason, confidence=0.0 if sure is None else sure
                    )
                else:
                    verdicts[rank] = node_verdict(rank, hit.relevant, hit.reason, agreement_of(hit))
                usage.cached_nodes += 1
                continue
        todo.append((rank, text))

    if todo:
        fast = getattr(judge, "judge_nodes", None)
        if callable(fast) and not logprobs:  # offline judges answer directly, nothing to repair or retry
            fresh = fast(input, expected, todo)
        else:
            assert run.answers is not None  # set by JudgeRun.__post_init__
            case = _Case(run.answers)
            try:
                if len(todo) <= max_nodes_per_call:  # the common case: one call, no task to schedule
                    fresh = await _judge_group(
                        judge, template, input, expected, todo, run, usage, case, samples, logprobs=logprobs
                    )
                else:
                    groups = [todo[i : i + max_nodes_per_call] for i in range(0, len(todo), max_nodes_per_call)]
                    parts = await gather_settled(
                        *(
                            _judge_group(
                                judge, template, input, expected, g, run, usage, case, samples, logprobs=logprobs
                            )
                            for g in groups
                        )
                    )
                    fresh = {k: v for part in parts for k, v in part.items()}
            except JudgeAnswerError:
                case.watch.unusable(case, case.problems, failed=True)
                raise
        for rank, _ in todo:
            v = fresh[rank]
            verdicts[rank] = v
            if run.cache is not None:
                run.cache.put(keys[rank], v)
    return list(map(verdicts.__getitem__, ids)), usage
