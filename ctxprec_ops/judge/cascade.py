"""A confidence-gated judge cascade: a cheap judge for every node, a strong one where it is unsure.

Every node of a case is judged by the cheap judge, with a confidence per verdict: the probability
of its ``true``/``false`` token when the endpoint returns log-probabilities (``confidence =
"logprobs"``), else the agreement of ``samples`` sampled answers (``"samples"``). The nodes whose
confidence is below the threshold ``C`` (``escalate_below``) are judged again by the strong judge,
grouped into as few calls as ``max_nodes_per_call`` allows, and its verdict replaces the cheap one.
Each final verdict is a ``CascadeVerdict``: which judge decided it, and how sure the cheap judge was.

The judgment cache works per stage: the cheap stage's verdicts (with their confidence) are keyed by
the cheap model and a prompt version that says how the confidence was taken (``+logprobs`` or
``+samples=N``), the strong stage's by the strong model and the plain prompt version — so a node the
strong judge already judged (in a strong-only run, or in a calibration) is never paid for again.

A cascade's scores are a measuring instrument of their own: ``cascade_name`` (both models and the
threshold or the target agreement) is the ``judge_model`` of its scores, so they never mix with a
single judge's. ``C`` is given, or chosen for a target agreement on a calibration sample
(``escalation``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import JudgeConfigurationError
from ..scoring.confidence import CascadeVerdict, confidence_of
from ..scoring.samples import sampled_version
from . import defaults
from .calls import JudgeRun, Usage
from .nodes import judge_nodes

if TYPE_CHECKING:
    from .escalation import Calibration
    from .models.base import JudgeModel

__all__ = [
    "Cascade",
    "DEFAULT_CALIBRATION_NODES",
    "cascade_name",
    "check_cascade_settings",
    "confidence_source",
    "judge_cascade",
    "parse_cascade_name",
]

#: nodes of the calibration sample judged by both judges when ``C`` is chosen for a target
DEFAULT_CALIBRATION_NODES = defaults.CALIBRATION_NODES

_NAME = re.compile(r"^(?P<cheap>[^>\[\]]+)>(?P<strong>[^>\[\]]+)\[(?P<rule>below|agreement)=(?P<value>[0-9.eE+-]+)\]$")


def cascade_name(cheap: str, strong: str, escalate_below: float | None, target_agreement: float | None) -> str:
    """The ``judge_model`` of a cascade's scores: ``cheap>strong[below=C]`` (a given threshold) or
    ``cheap>strong[agreement=A]`` (a threshold chosen for a target agreement: recalibrating keeps
    the name, the target is what the scores promise)."""
    rule = f"below={escalate_below:g}" if target_agreement is None else f"agreement={target_agreement:g}"
    return f"{cheap}>{strong}[{rule}]"


def parse_cascade_name(name: str | None) -> tuple[str, str, str, float] | None:
    """``(cheap, strong, "below" | "agreement", value)`` of a cascade's ``judge_model``; None for a
    single judge's name (model names never hold ``>`` or brackets)."""
    m = _NAME.match(name or "")
    if m is None:
        return None
    return m["cheap"], m["strong"], m["rule"], float(m["value"])


def check_cascade_settings(
    escalate_to: Any, escalate_below: float | None, target_agreement: float | None, calibration_nodes: int
) -> None:
    """``ValueError`` unless exactly one of ``escalate_below`` (in [0, 1]) and ``target_agreement``
    (in (0, 1]) is given with ``escalate_to``, and neither without it."""
    if escalate_to is None:
        given = [
            n for n, v in (("escalate_below", escalate_below), ("target_agreement", target_agreement)) if v is not None
        ]
        if given:
            raise ValueError(f"{' and '.join(given)} needs escalate_to: the strong judge a cascade escalates to")
        return
    if (escalate_below is None) == (target_agreement is None):
        raise ValueError(
            "a cascade needs one of escalate_below (the confidence threshold C) and target_agreement (the "
            "agreement with the strong judge C is chosen for), not both and not neither"
        )
    if escalate_below is not None and not (isinstance(escalate_below, (int, float)) and 0 <= escalate_below <= 1):
        raise ValueError(f"escalate_below must be a confidence between 0 and 1, got {escalate_below!r}")
    if target_agreement is not None and not (isinstance(target_agreement, (int, float)) and 0 < target_agreement <= 1):
        raise ValueError(f"target_agreement must be a share in (0, 1], got {target_agreement!r}")
    if isinstance(calibration_nodes, bool) or not isinstance(calibration_nodes, int) or calibration_nodes < 10:
        raise ValueError(f"calibration_nodes must be a whole number >= 10, got {calibration_nodes!r}")


def confidence_source(judge: JudgeModel, samples: int) -> str:
    """How the cheap judge's confidence is taken: ``samples`` (``samples`` > 1 sampled answers per
    node: their agreement) or ``logprobs`` (the judge returns token log-probabilities). A judge that
    gives neither cannot be a cheap stage: ``JudgeConfigurationError``, before any call."""
    if samples > 1 and not judge.deterministic:
        return "samples"
    if getattr(judge, "gives_logprobs", False):
        return "logprobs"
    why = (
        "it is deterministic (sampled answers would all agree)"
        if judge.deterministic
        else "judge_samples is 1 (no sampled answers to compare)"
    )
    raise JudgeConfigurationError(
        f"judge {judge.get_model_name()!r} cannot be the cheap stage of a cascade: it gives no token "
        f"log-probabilities and {why}, so its verdicts have no confidence to escalate on; use an "
        "OpenAI-compatible judge (logprobs), or judge_samples >= 3 with a judge that samples"
    )


@dataclass
class Cascade:
    """The strong stage of a cascade and its threshold (see the module docstring)."""

    strong: JudgeModel
    escalate_below: float | None = None
    target_agreement: float | None = None
    calibration_nodes: int = DEFAULT_CALIBRATION_NODES
    #: how the cheap judge's confidence is taken (``confidence_source``)
    confidence: str = "logprobs"
    #: the calibration that chose ``escalate_below`` (a target agreement), once it is known
    calibration: Calibration | None = field(default=None, repr=False)

    @property
    def strong_model(self) -> str:
        return self.strong.get_model_name()

    @property
    def calibrated(self) -> bool:
        return self.escalate_below is not None

    def name(self, cheap: str) -> str:
        return cascade_name(cheap, self.strong_model, self.escalate_below, self.target_agreement)

    def threshold(self) -> float:
        """``C``; a target agreement not calibrated yet is a ``JudgeConfigurationError``."""
        if self.escalate_below is None:
            raise JudgeConfigurationError(
                f"the cascade's threshold for a target agreement of {self.target_agreement:g} is not chosen yet: "
                "calibrate first (metric.calibrate(cases), or score through evaluate() or the pipeline, which "
                "calibrate on a sample)"
            )
        return self.escalate_below

    def versions(self, prompt_version: str, samples: int) -> tuple[str, str]:
        """The prompt versions that key the cheap stage's and the strong stage's cached verdicts
        (``prompt_version``: the template's, without a samples suffix)."""
        cheap = (
            sampled_version(prompt_version, samples) if self.confidence == "samples" else f"{prompt_version}+logprobs"
        )
        return cheap, prompt_version


def _plus(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None else a + b


async def judge_cascade(
    cheap: JudgeModel,
    cascade: Cascade,
    template: type,
    versions: tuple[str, str],
    input: str,
    expected: str,
    nodes: Sequence[str],
    run: JudgeRun,
    *,
    usage: Usage,
    max_nodes_per_call: int = defaults.MAX_NODES_PER_CALL,
    samples: int = 1,
) -> list[CascadeVerdict]:
    """The cascade's verdicts for ``nodes`` (rank 1 first); spend goes to ``usage`` as it is paid
    (``strong_cost``: the strong judge's part), the node counts once every verdict is known."""
    threshold = cascade.threshold()
    cheap_usage, strong_usage = Usage(), Usage()
    try:
        first, _ = await judge_nodes(
            cheap, template, versions[0], input, expected, nodes, run,
            max_nodes_per_call=max_nodes_per_call, usage=cheap_usage, samples=samples, confidence=cascade.confidence,
        )  # fmt: skip
        sure = [confidence_of(v) for v in first]
        low = [i for i, c in enumerate(sure) if c is None or math.isnan(c) or c < threshold]
        decided: dict[int, Any] = {}
        if low:
            got, _ = await judge_nodes(
                cascade.strong, template, versions[1], input, expected, [nodes[i] for i in low], run,
                max_nodes_per_call=max_nodes_per_call, usage=strong_usage, ranks=[i + 1 for i in low],
            )  # fmt: skip
            decided = {v.node: v for v in got}
    finally:  # what was paid for counts, whatever happened after
        usage.merge(cheap_usage)
        usage.merge(strong_usage)
        usage.strong_cost = _plus(usage.strong_cost, strong_usage.cost)
    cheap_model, strong_model = cheap.get_model_name(), cascade.strong_model
    out = []
    for i, v in enumerate(first):
        rank, s = i + 1, decided.get(i + 1)
        if s is None:
            out.append(
                CascadeVerdict(
                    node=rank, relevant=v.relevant, reason=v.reason, decided_by=cheap_model, cheap_confidence=sure[i]
                )
            )
        else:
            out.append(
                CascadeVerdict(
                    node=rank,
                    relevant=s.relevant,
                    reason=s.reason,
                    decided_by=strong_model,
                    cheap_confidence=sure[i],
                    cheap_relevant=v.relevant,
                )  # fmt: skip
            )
    usage.cascade_nodes += len(nodes)
    usage.escalated_nodes += len(low)
    return out
