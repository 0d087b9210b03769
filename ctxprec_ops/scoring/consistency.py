"""Self-consistency: ask the judge ``samples`` times per node (at a temperature above 0) and keep
the majority verdict, with the share of samples that agreed with it.

``samples=1`` is the ordinary judgment (one answer at temperature 0); 3, 5, ... ask that many
answers — in one request with ``n`` where the endpoint supports it — and vote per node. The count
must be odd so a binary vote cannot tie. A scoring configuration that samples is a different
measuring instrument, so its ``prompt_version`` says so (``v1-…+samples=5``): its scores, failures,
cached judgments and calibrations never mix with those of single answers.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import Field

from ..json_text import JSONText, verdict_item_json
from .verdicts import NodeVerdict

__all__ = [
    "SampledVerdict",
    "agreement_of",
    "majority",
    "node_verdict",
    "verdict_json",
    "verdicts_json_text",
]


class SampledVerdict(NodeVerdict):
    """A majority verdict: ``agreement`` is the share of the samples that gave this verdict
    (1.0 = unanimous; with 5 samples, 0.6 = 3 of 5)."""

    agreement: float = Field(description="share of the sampled answers agreeing with this verdict")

    @property
    def flipped(self) -> bool:
        """Whether the samples disagreed about this node."""
        return self.agreement < 1.0


def agreement_of(v: NodeVerdict) -> float | None:
    """``v``'s agreement, None for a single answer's verdict (an ``isinstance`` check: a missing
    attribute on a pydantic model costs microseconds, and this runs for every node written)."""
    return v.agreement if isinstance(v, SampledVerdict) else None


def node_verdict(node: int, relevant: bool, reason: str, agreement: float | None) -> NodeVerdict:
    """A plain verdict, or a ``SampledVerdict`` when an agreement is known."""
    if agreement is None:
        return NodeVerdict(node=node, relevant=relevant, reason=reason)
    return SampledVerdict(node=node, relevant=relevant, reason=reason, agreement=float(agreement))


def verdict_json(v: NodeVerdict) -> dict[str, Any]:
    """One node of ``ctxprec_scores.verdicts``: ``{node, relevant, reason}``, plus the fields of a
    richer verdict that are set (a majority's ``agreement``; a cascade's ``decided_by``,
    ``cheap_confidence`` and, on an escalated node, ``cheap_relevant``)."""
    if type(v) is NodeVerdict:
        return {"node": v.node, "relevant": v.relevant, "reason": v.reason}
    return v.model_dump(exclude_none=True)


def verdicts_json_text(verdicts: Sequence[NodeVerdict]) -> JSONText:
    """``json.dumps([verdict_json(v) for v in verdicts])``, built as text (``JSONText``: the bulk
    writers store it as it is). A plain verdict is formatted directly; any other (a majority
    verdict with its agreement, a subclass) goes through ``verdict_json`` and ``json.dumps``."""
    parts = []
    for v in verdicts:
        node, relevant, reason = v.node, v.relevant, v.reason
        if type(v) is NodeVerdict and type(node) is int and type(relevant) is bool and type(reason) is str:
            parts.append(verdict_item_json(node, relevant, reason))
        else:
            parts.append(json.dumps(verdict_json(v)))
    return JSONText("[" + ", ".join(parts) + "]")


def majority(answers: Sequence[Mapping[int, NodeVerdict]], ids: Sequence[int]) -> dict[int, NodeVerdict]:
    """Per node id, the verdict most answers gave, its agreement, and the reason of the first
    answer that gave it. ``answers`` holds an odd number of complete answers (one per sample)."""
    count = len(answers)
    if count == 0 or count % 2 == 0:
        raise ValueError(f"a majority needs an odd number of answers, got {count}")
    out: dict[int, NodeVerdict] = {}
    for k in ids:
        votes = [a[k] for a in answers]
        yes = sum(1 for v in votes if v.relevant)
        relevant = 2 * yes > count
        agreeing = yes if relevant else count - yes
        reason = next(v.reason for v in votes if v.relevant == relevant)
        out[k] = SampledVerdict(node=k, relevant=relevant, reason=reason, agreement=agreeing / count)
    return out
