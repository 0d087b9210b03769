"""Compose the overall reason and verbose logs from the per-node verdicts of the same answer
(no second judge call)."""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Sequence
from functools import lru_cache
from operator import attrgetter

from ..scoring.consistency import agreement_of
from ..scoring.formula import precision_steps
from ..scoring.verdicts import NodeVerdict


def shorten(text: str, limit: int = 90) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def compose_reason(
    score: float, verdicts: Sequence[NodeVerdict], *, strict_mode: bool = False, raw_score: float | None = None
) -> str:
    prefix, shown = _reason_form(tuple(map(_relevant, verdicts)), score, strict_mode, raw_score)
    if not shown:
        return prefix
    details = "; ".join([f"node {i}: {shorten(verdicts[i - 1].reason) or 'not relevant'}" for i in shown])
    return f"{prefix}{details}."


_relevant = attrgetter("relevant")


@lru_cache(maxsize=1024)
def _reason_form(
    flags: tuple[bool, ...], score: float, strict_mode: bool, raw_score: float | None
) -> tuple[str, tuple[int, ...]]:
    """The reason for verdicts with these relevance flags, up to the reasons of the irrelevant
    nodes it quotes, and those nodes' ranks: everything but the quotes depends on the flags and
    the scores alone, so a run's few distinct rankings are composed once each."""
    n = len(flags)
    relevant: list[int] = []  # ranks, ascending
    irrelevant: list[int] = []
    for rank, flag in enumerate(flags, start=1):
        (relevant if flag else irrelevant).append(rank)
    head = f"The score is {score:.2f}"
    if strict_mode and raw_score is not None and raw_score < 1.0:
        head += f" (strict mode; {raw_score:.2f} before clamping)"
    if not relevant:
        return f"{head} because none of the {n} retrieved nodes was relevant to the expected output.", ()
    misplaced = irrelevant[: bisect_left(irrelevant, relevant[-1])]  # irrelevant, above the last relevant
    rel_txt = ", ".join(map(str, relevant))
    if not misplaced:
        return (
            f"{head} because all {len(relevant)} relevant node(s) of {n} (rank {rel_txt}) are ranked "
            "above every irrelevant one.",
            (),
        )
    shown = tuple(misplaced[:3])
    more = f" and {len(misplaced) - 3} more" if len(misplaced) > 3 else ""
    prefix = (
        f"{head} because irrelevant node(s) {', '.join(map(str, shown))}{more} are ranked "
        f"above relevant ones (relevant: rank {rel_txt} of {n}). Why they are irrelevant — "
    )
    return prefix, shown


def verbose_logs(verdicts: Sequence[NodeVerdict], score: float, *, title: str = "Verdicts") -> str:
    lines = [f"{title}:"]
    for step, v in zip(precision_steps([v.relevant for v in verdicts]), verdicts):
        mark = "relevant  " if v.relevant else "irrelevant"
        lines.append(
            f"  node {step.rank:>3} {mark}  precision@{step.rank}={step.precision_at_k:.3f}"
            f"  contributes {step.contribution:.3f}{agreement_note(v)}  | {shorten(v.reason, 120)}"
        )
    hits = sum(v.relevant for v in verdicts)
    lines.append(f"Score: sum of contributions / {hits} relevant = {score:.4f}")
    flips = flip_line(verdicts)
    if flips:
        lines.append(flips)
    return "\n".join(lines)


def agreement_note(v: NodeVerdict) -> str:
    """``  agreement 60%`` for a majority verdict of sampled answers; "" otherwise."""
    agreement = agreement_of(v)
    return "" if agreement is None else f"  agreement {agreement:.0%}"


def flip_line(verdicts: Sequence[NodeVerdict]) -> str:
    """How many majority verdicts had disagreeing samples; "" when nothing was sampled."""
    sampled = [a for a in (agreement_of(v) for v in verdicts) if a is not None]
    if not sampled:
        return ""
    flipped = sum(1 for a in sampled if a < 1.0)
    rate = flipped / len(sampled)
    return f"Self-consistency: the samples disagreed on {flipped} of {len(sampled)} node(s) (flip rate {rate:.0%})"
