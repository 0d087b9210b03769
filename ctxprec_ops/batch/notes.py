"""What a batch-mode run says about the requests it asks in a further batch round: how many were
left unanswered by the earlier batches (asked again) and how many are follow-ups (re-asks of
unusable answers, asked for the first time), of how many rows, in which mode and at which price."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..judge.calls import estimate_cost
from ..judge.models.base import JudgeModel
from .judge import RecordedPrompt

__all__ = ["round_note"]


def round_note(
    round_number: int, prompts: Sequence[tuple[str, RecordedPrompt]], unanswered: Mapping[str, str], judge: JudgeModel
) -> str:
    """The note of round ``round_number``: ``prompts`` (prompt hash, request) are submitted, those
    whose hash is in ``unanswered`` were asked before; ``judge`` prices them (the batch price)."""
    again = [p for h, p in prompts if h in unanswered]
    escalated = [p for h, p in prompts if h not in unanswered and p.escalation]
    follow = [p for h, p in prompts if h not in unanswered and not p.escalation]
    est = [estimate_cost(p.judge or judge, p.prompt, max(1, p.prompt.count('<node id="'))) for _, p in prompts]
    price = "unknown" if any(e is None for e in est) else f"~${sum(e for e in est if e is not None):.4f}"
    parts = []
    if again:
        rows = len({p.case_id for p in again})
        parts.append(f"{len(again)} request(s) of {rows} row(s) the earlier batch(es) did not answer, asked again")
    if follow:
        rows = len({p.case_id for p in follow})
        parts.append(f"{len(follow)} follow-up request(s) of {rows} row(s) (re-asks of unusable answers)")
    if escalated:
        rows = len({p.case_id for p in escalated})
        strong = escalated[0].judge.model if escalated[0].judge is not None else "the strong judge"
        parts.append(
            f"{len(escalated)} escalation request(s) of {rows} row(s) to {strong} (the nodes the cheap judge was "
            "unsure of)"
        )
    how = "submitted at the batch price" if not (again or follow) else "submitted again at the batch price"
    return f"round {round_number}: {' and '.join(parts)}: {how}, in a new batch (batch mode, {price} estimated)"
