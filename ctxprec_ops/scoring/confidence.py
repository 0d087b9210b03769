"""How sure a judge was of each node verdict, and the verdicts a judge cascade stores.

A verdict's *confidence* is the probability the judge gave its answer: the probability of the
``true``/``false`` token(s) of the node's ``relevant`` value when the endpoint returns token
log-probabilities (``ConfidentVerdict``, read by ``judge.logprobs``), or the share of sampled
answers that agreed with the majority (a ``SampledVerdict``'s ``agreement``). The cascade
(``judge.cascade``) escalates the cheap judge's verdicts whose confidence is below its threshold;
each final verdict is a ``CascadeVerdict`` saying which judge decided it and how sure the cheap
judge was.
"""

from __future__ import annotations

from pydantic import Field

from .consistency import SampledVerdict
from .verdicts import NodeVerdict

__all__ = ["CascadeVerdict", "ConfidentVerdict", "confidence_of"]


class ConfidentVerdict(NodeVerdict):
    """A verdict with the probability the judge gave it (its value token's, from log-probabilities)."""

    confidence: float = Field(description="probability of the verdict's relevant value token(s)")


class CascadeVerdict(NodeVerdict):
    """A verdict of a judge cascade: ``decided_by`` names the judge whose verdict it is (the cheap
    judge's, or the strong judge's when the cheap one was less sure than the threshold),
    ``cheap_confidence`` how sure the cheap judge was, ``cheap_relevant`` what the cheap judge had
    said of an escalated node (None when the cheap verdict stands)."""

    decided_by: str = Field(description="the judge model whose verdict this is")
    cheap_confidence: float | None = Field(default=None, description="the cheap judge's confidence")
    cheap_relevant: bool | None = Field(default=None, description="the cheap judge's verdict, on an escalated node")

    @property
    def escalated(self) -> bool:
        return self.cheap_relevant is not None


def confidence_of(v: NodeVerdict) -> float | None:
    """How sure the judge was of ``v``: a ``ConfidentVerdict``'s probability, a ``SampledVerdict``'s
    agreement; None for a single answer without log-probabilities. It is what the judgment cache
    keeps in its ``agreement`` column (the cache key's prompt version says which of the two)."""
    if isinstance(v, ConfidentVerdict):
        return v.confidence
    if isinstance(v, SampledVerdict):
        return v.agreement
    return None
