"""Choosing a cascade's threshold ``C`` for a target agreement, on a calibration sample.

A random sample of nodes is judged by both judges (the cheap one with its confidence). For a
threshold ``C`` the cascade's verdict on a sample node is the strong judge's when the cheap
confidence is below ``C``, else the cheap judge's; its *agreement* is the share of sample nodes
where that verdict equals the reference — the strong judge's verdict, or a person's label where
the sample is drawn from labelled nodes.

``C`` is the lowest threshold at which agreement is at least the target ``A`` **by a one-sided 95 %
Clopper–Pearson lower confidence bound**, not by the point estimate: a threshold chosen where the
sample's agreement is just above ``A`` would fall short of ``A`` on about half of the days it is
used (the sample's agreement is as often above the truth as below it). With the bound, agreement
on data like the sample is at least ``A`` with 95 % confidence. The thresholds are tested in a
fixed sequence — from escalating every unsure verdict (``C = 1``) down, stopping at the first that
fails — so testing many thresholds needs no multiple-comparison correction (agreement can only
fall as ``C`` falls: each step keeps more cheap verdicts). The price of the bound is a few more
escalations than the point estimate would make, and a floor on the sample size: a target ``A``
needs at least ``log(0.05) / log(A)`` nodes (59 for 0.95, 299 for 0.99) even if every verdict agrees.
"""

from __future__ import annotations

import asyncio
import math
import random
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ..errors import CtxPrecError
from .calls import JudgeRun, Usage, gather_settled
from .nodes import judge_nodes

if TYPE_CHECKING:
    from .models.base import JudgeModel

__all__ = [
    "CONFIDENCE_LEVEL",
    "Calibration",
    "CascadeCalibrationError",
    "SampleNode",
    "Stages",
    "choose_threshold",
    "draw",
    "judge_sample",
    "lower_bound",
    "min_sample_for",
]

#: the one-sided confidence level of the agreement's lower bound
CONFIDENCE_LEVEL = 0.95
METHOD = "lowest C whose agreement has a one-sided 95% Clopper-Pearson lower bound >= target (fixed sequence)"


class Stages(Protocol):
    """What calibrating asks of a cascade (``cascade.Cascade``): its strong judge, how the cheap
    confidence is taken, the target agreement."""

    strong: JudgeModel
    confidence: str
    target_agreement: float | None


class CascadeCalibrationError(CtxPrecError, ValueError):
    """No threshold meets the target agreement on the calibration sample (too few nodes to show it
    with 95 % confidence, or a strong judge that itself disagrees with the labels too often)."""

    error_type = "cascade_calibration"
    retryable = False


@dataclass(frozen=True)
class SampleNode:
    """One node of a calibration sample: the judge request it belongs to (``request``: an id shared
    by the nodes of one request), its rank in it, and a person's label when there is one."""

    request: Any
    question: str
    expected: str
    rank: int
    text: str
    gold: bool | None = None


@dataclass
class Calibration:
    """The threshold a calibration chose and the sample's figures (a ``ctxprec_cascades`` row)."""

    escalate_below: float
    target_agreement: float
    nodes: int
    #: ``strong`` (the strong judge's verdicts) or ``labels:<label set>``
    reference: str
    #: the cascade's agreement with the reference at ``escalate_below``: point estimate, lower bound
    agreement: float
    agreement_low: float
    #: the cheap judge's agreement alone (nothing escalated)
    cheap_agreement: float
    #: share of the sample's nodes below ``escalate_below``: the escalation rate to expect
    escalation_rate: float
    #: how the cheap confidence was taken (``logprobs`` / ``samples``)
    confidence: str
    cheap_cost: float | None = 0.0
    strong_cost: float | None = 0.0
    method: str = METHOD
    #: what judging the sample took (both judges)
    judge_calls: int = 0
    prompt_tokens: int | None = 0
    completion_tokens: int | None = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def summary(self) -> str:
        """One line: the threshold and what it rests on."""
        ref = "the strong judge" if self.reference == "strong" else self.reference
        return (
            f"escalate below C={self.escalate_below:.4g}: calibrated on {self.nodes} nodes against {ref}, "
            f"agreement {self.agreement:.1%} (95% lower bound {self.agreement_low:.1%} >= target "
            f"{self.target_agreement:.1%}; cheap judge alone {self.cheap_agreement:.1%}), expected escalation "
            f"{self.escalation_rate:.1%}"
        )


def lower_bound(successes: int, n: int, level: float = CONFIDENCE_LEVEL) -> float:
    """The one-sided ``level`` Clopper–Pearson lower bound of a proportion (0 for no success)."""
    if n <= 0 or successes <= 0:
        return 0.0
    if successes >= n:
        return (1.0 - level) ** (1.0 / n)
    from scipy.special import betaincinv

    return float(betaincinv(successes, n - successes + 1, 1.0 - level))


def min_sample_for(target: float, level: float = CONFIDENCE_LEVEL) -> int:
    """The fewest nodes whose lower bound can reach ``target`` (every one of them agreeing)."""
    if target >= 1:
        return 10**9
    return math.ceil(math.log(1.0 - level) / math.log(target))


def choose_threshold(
    confidence: Sequence[float],
    cheap: Sequence[bool],
    strong: Sequence[bool],
    reference: Sequence[bool],
    target: float,
    level: float = CONFIDENCE_LEVEL,
) -> tuple[float, float, float, float, float]:
    """``(C, agreement, lower bound, cheap agreement, escalation rate)`` on the sample (see the
    module docstring); ``CascadeCalibrationError`` when even ``C = 1`` does not meet ``target``."""
    n = len(confidence)
    if n == 0:
        raise CascadeCalibrationError("the calibration sample is empty: the partition has no nodes to judge")
    rows = list(zip(confidence, cheap, strong, reference))

    def agreeing(c: float) -> int:
        return sum((s if conf < c else ch) == ref for conf, ch, s, ref in rows)

    candidates = sorted({0.0, 1.0, *(min(1.0, max(0.0, float(c))) for c in confidence)}, reverse=True)
    chosen: tuple[float, int] | None = None
    for c in candidates:  # fixed sequence: from escalating the most down, stop at the first failure
        k = agreeing(c)
        if lower_bound(k, n, level) < target:
            break
        chosen = (c, k)
    cheap_agreement = sum(ch == ref for _, ch, _, ref in rows) / n
    if chosen is None:
        k = agreeing(1.0)
        low = lower_bound(k, n, level)
        need = min_sample_for(target, level)
        why = (
            f"a sample of {n} nodes cannot show {target:.1%} with 95% confidence (at least {need} are needed: raise "
            "calibration_nodes)"
            if n < need and k == n
            else f"escalating every unsure verdict agrees with the reference on {k / n:.1%} of them (95% lower "
            f"bound {low:.1%})"
        )
        raise CascadeCalibrationError(f"no cascade threshold meets the target agreement {target:.1%}: {why}")
    c, k = chosen
    rate = sum(1 for conf in confidence if conf < c) / n
    return c, k / n, lower_bound(k, n, level), cheap_agreement, rate


def draw(pool_size: int, k: int, seed: Any) -> list[int]:
    """``k`` of ``range(pool_size)`` drawn at random (reproducible by ``seed``), in order."""
    return sorted(random.Random(str(seed)).sample(range(pool_size), min(k, pool_size)))


async def judge_sample(
    sample: Sequence[SampleNode],
    cheap: JudgeModel,
    cascade: Stages,
    template: type,
    versions: tuple[str, str],
    run: JudgeRun,
    *,
    max_nodes_per_call: int,
    samples: int = 1,
) -> tuple[list[float], list[bool], list[bool], Usage, Usage]:
    """Judge the sample's nodes with both judges (each request's nodes in as few calls as allowed):
    per node the cheap confidence, the cheap verdict, the strong verdict; and what each judge cost."""
    from ..scoring.confidence import confidence_of

    groups: dict[Any, list[int]] = {}
    for i, node in enumerate(sample):
        groups.setdefault(node.request, []).append(i)
    cheap_usage, strong_usage = Usage(), Usage()
    conf: list[float] = [0.0] * len(sample)
    cheap_rel: list[bool] = [False] * len(sample)
    strong_rel: list[bool] = [False] * len(sample)

    async def one(members: list[int]) -> None:
        first = sample[members[0]]
        texts, ranks = [sample[i].text for i in members], [sample[i].rank for i in members]
        (a, _), (b, _) = await asyncio.gather(
            judge_nodes(
                cheap, template, versions[0], first.question, first.expected, texts, run,
                max_nodes_per_call=max_nodes_per_call, usage=cheap_usage, samples=samples, ranks=ranks,
                confidence=cascade.confidence,
            ),
            judge_nodes(
                cascade.strong, template, versions[1], first.question, first.expected, texts, run,
                max_nodes_per_call=max_nodes_per_call, usage=strong_usage, ranks=ranks,
            ),
        )  # fmt: skip
        for i, v, s in zip(members, a, b):
            sure = confidence_of(v)
            conf[i] = 0.0 if sure is None else sure
            cheap_rel[i], strong_rel[i] = v.relevant, s.relevant

    await gather_settled(*(one(m) for m in groups.values()))
    return conf, cheap_rel, strong_rel, cheap_usage, strong_usage


async def calibrate(
    sample: Sequence[SampleNode],
    cheap: JudgeModel,
    cascade: Stages,
    template: type,
    versions: tuple[str, str],
    run: JudgeRun,
    *,
    max_nodes_per_call: int,
    samples: int = 1,
    label_set: str | None = None,
) -> Calibration:
    """Judge ``sample`` with both judges and choose ``C`` for ``cascade.target_agreement``; the
    reference is the strong judge, or the nodes' labels (``label_set``) when every node has one."""
    target = cascade.target_agreement
    if target is None:
        raise ValueError("calibrate() needs a cascade with a target_agreement")
    conf, cheap_rel, strong_rel, cu, su = await judge_sample(
        sample, cheap, cascade, template, versions, run, max_nodes_per_call=max_nodes_per_call, samples=samples
    )
    gold = [n.gold for n in sample]
    labelled = label_set is not None and all(g is not None for g in gold)
    reference = [bool(g) for g in gold] if labelled else strong_rel
    c, agreement, low, cheap_agreement, rate = choose_threshold(conf, cheap_rel, strong_rel, reference, target)
    return Calibration(
        escalate_below=c,
        target_agreement=target,
        nodes=len(sample),
        reference=f"labels:{label_set}" if labelled else "strong",
        agreement=agreement,
        agreement_low=low,
        cheap_agreement=cheap_agreement,
        escalation_rate=rate,
        confidence=cascade.confidence,
        cheap_cost=cu.cost,
        strong_cost=su.cost,
        judge_calls=cu.calls + su.calls,
        prompt_tokens=None
        if cu.prompt_tokens is None or su.prompt_tokens is None
        else cu.prompt_tokens + su.prompt_tokens,
        completion_tokens=None
        if cu.completion_tokens is None or su.completion_tokens is None
        else cu.completion_tokens + su.completion_tokens,
    )
