"""Tell a judge that slipped once from one whose answers are systematically unusable.

An unusable answer is repaired (``nodes``: re-asked, then split), at most ``REPAIR_CALLS`` paid
calls per case on top of its first answer. A judge that never follows the answer format — node
ids counted from 0, ``"oui"``/``"non"`` for ``relevant``, empty answers — would still pay that for
every row, and an orchestrator would retry the run and pay it again.

``AnswerWatch`` (one per partition run, or per ``evaluate()`` call) counts the cases whose answers
were all unusable in the same way (``AnswerProblem.kind``), in a row: a usable answer anywhere
resets the count. A case counts once its re-ask failed like its first answer when the problem is
one of form that splitting the nodes cannot fix (``FORM_KINDS``: empty answers, ids from 0, a
``relevant`` that is not a boolean, ...), otherwise once it failed outright (a judge that skips
nodes of long lists may well answer their halves). After ``trip_after`` such cases (default 3) the
watch trips: every later judge request of the run is refused before it is sent, with
``JudgeAnswersUnusableError`` naming the pattern ("node ids start at 0"). That is a
configuration error (the model, endpoint or template is wrong), which the outcome policy fails
rather than retries: a retry would pay for the same unusable answers again.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass, field

from ..errors import JudgeAnswersUnusableError
from ..scoring.verdicts import AnswerProblem

__all__ = ["AnswerWatch", "DEFAULT_UNUSABLE_CASES", "FORM_KINDS"]

log = logging.getLogger("ctxprec_ops.judging")

#: cases in a row whose answers were all unusable in the same way before the watch trips
DEFAULT_UNUSABLE_CASES = 3

#: problems of form: asking about fewer nodes does not change them (``AnswerProblem.kind``)
FORM_KINDS = frozenset(
    {"empty", "zero_based", "relevant_not_boolean", "node_not_integer", "not_object", "no_verdicts",
     "verdict_not_yes_no"}
)  # fmt: skip


@dataclass
class AnswerWatch:
    """See the module docstring. One event loop judges a run's cases (not thread-safe)."""

    trip_after: int = DEFAULT_UNUSABLE_CASES
    kind: str | None = None
    pattern: str | None = None
    #: the cases counted in the current run of same-kind unusable cases (the objects, told apart by
    #: identity: an ``id()`` is reused once its case is gone, and a later case would not count)
    cases: list[object] = field(default_factory=list)
    #: the message every later request fails with, once tripped
    tripped: str | None = None
    #: judge requests refused since it tripped (each would have been paid for)
    refused: int = 0

    def usable(self) -> None:
        """An answer could be used: the judge follows the format, at least sometimes."""
        if self.kind is not None and self.tripped is None:  # the common case (nothing counted): no work
            self.kind, self.pattern = None, None
            self.cases.clear()

    def unusable(self, case: object, problems: Sequence[AnswerProblem], *, failed: bool) -> None:
        """The answers of ``case`` so far were all unusable (``problems``); ``failed``: the case
        gave up. Counts the case when the pattern is settled (see the module docstring)."""
        if self.tripped is not None or not problems:
            return
        kinds = {p.kind for p in problems}
        if len(kinds) != 1:
            if failed:  # unusable in several ways: no one systematic pattern
                self.usable()
            return
        (kind,) = kinds
        if not failed and not (kind in FORM_KINDS and len(problems) >= 2):
            return  # not settled yet: the re-ask (or the halves) may still work
        if kind != self.kind:
            self.kind, self.cases = kind, []
        self.pattern = problems[0].pattern
        if not any(seen is case for seen in self.cases):  # at most ``trip_after`` of them
            self.cases.append(case)
        if len(self.cases) >= max(1, self.trip_after):
            self.tripped = (
                f"the judge's answers are systematically unusable: {self.pattern} (every answer of "
                f"{len(self.cases)} cases in a row); the rest were not sent to the judge: check that the judge "
                "model follows the answer format (model, endpoint, template)"
            )
            log.error("%s", self.tripped)

    def check(self) -> None:
        """Raise ``JudgeAnswersUnusableError`` once tripped (before a request that would be paid for)."""
        if self.tripped is not None:
            self.refused += 1
            raise JudgeAnswersUnusableError(self.tripped)
