"""Turn contextual precision: retrieval quality over a conversation, window by window.

Turns are grouped into user→assistant interaction units. For unit i the window is units
max(0, i - window_size + 1) .. i; the judge sees the window's user messages, the expected
outcome and the nodes the window's assistant turns retrieved, in conversation order. Window
score = contextual precision of that ranking (1.0 when the window retrieved nothing); the
conversation score is the mean over windows. A conversation that retrieved nothing at all is
not scorable (an error, zero judge calls) rather than a silent pass.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..cases.contexts import item_text
from ..cases.conversational import ConversationalTestCase, Turn
from ..cases.foreign import as_conversational_test_case
from ..cases.images import judged_text
from ..cases.results import MetricResult, WindowResult
from ..cases.validation import CaseModel
from ..errors import InvalidTestCaseError, NotScorableError
from ..judge.calls import JudgeRun, Usage, gather_settled
from ..scoring.formula import apply_strict, contextual_precision
from ..scoring.template import TurnContextualPrecisionTemplate
from . import names
from .base import BaseRetrievalMetric, record_usage
from .reasons import agreement_note, flip_line, shorten

__all__ = ["TurnContextualPrecisionMetric", "interaction_units", "windows"]


def interaction_units(turns: list[Turn]) -> list[list[int]]:
    """Turn indices grouped into interaction units.

    A new unit starts when a user turn follows an assistant turn in a unit that already has a
    user turn (so leading assistant turns join the first unit and consecutive turns of one role
    stay together). A trailing unit counts only if it has a user turn and ends with an assistant
    turn.
    """
    units: list[list[int]] = []
    current: list[int] = []
    has_user = False
    for i, turn in enumerate(turns):
        if turn.role == "user" and current and turns[current[-1]].role == "assistant" and has_user:
            units.append(current)
            current, has_user = [], False
        current.append(i)
        has_user = has_user or turn.role == "user"
    if current and has_user and turns[current[-1]].role == "assistant":
        units.append(current)
    return units


@dataclass
class Window:
    index: int
    turn_indices: list[int]
    user_messages: list[str]
    nodes: list[str]
    node_sources: list[tuple[int, int]]


def windows(turns: list[Turn], window_size: int) -> list[Window]:
    units = interaction_units(turns)
    out: list[Window] = []
    for i in range(len(units)):
        idx = [t for unit in units[max(0, i - window_size + 1) : i + 1] for t in unit]
        users = [judged_text(turns[t].content, f"turns[{t}].content") for t in idx if turns[t].role == "user"]
        nodes: list[str] = []
        sources: list[tuple[int, int]] = []
        for t in idx:
            context = turns[t].retrieval_context
            if turns[t].role == "assistant" and context:
                for j, node in enumerate(context):
                    nodes.append(item_text(node, f"turns[{t}].retrieval_context[{j}]"))
                    sources.append((t, j))
        out.append(Window(i, idx, users, nodes, sources))
    return out


class TurnContextualPrecisionMetric(BaseRetrievalMetric):
    """Multi-turn contextual precision (deepeval's turn metric semantics and numbers)."""

    metric_name = names.TURN_CONTEXTUAL_PRECISION
    __name__ = "Turn Contextual Precision"
    default_template = TurnContextualPrecisionTemplate

    def __init__(
        self,
        threshold: float | None = 0.5,
        model: Any = None,
        system_one_model: Any = None,
        eval_mode: str | None = None,
        include_reason: bool = True,
        async_mode: bool = True,
        strict_mode: bool = False,
        verbose_mode: bool = False,
        window_size: int = 10,
        flaky: bool = False,
        evaluation_template: type | None = None,
        **kwargs: Any,
    ) -> None:
        """deepeval's arguments and positional order (``window_size`` before ``flaky``)."""
        if not isinstance(window_size, int) or isinstance(window_size, bool) or window_size < 1:
            raise ValueError(f"window_size must be a positive integer, got {window_size!r}")
        self.window_size = window_size
        super().__init__(
            threshold,
            model,
            system_one_model,
            eval_mode,
            include_reason=include_reason,
            async_mode=async_mode,
            strict_mode=strict_mode,
            verbose_mode=verbose_mode,
            flaky=flaky,
            evaluation_template=evaluation_template,
            **kwargs,
        )

    def _reset(self) -> None:
        super()._reset()
        self.windows: list[WindowResult] = []

    def _apply(self, result: MetricResult) -> None:
        super()._apply(result)
        self.windows = list(result.windows or [])

    def accepts(self, test_case: Any) -> bool:
        return isinstance(test_case, ConversationalTestCase) or (
            not isinstance(test_case, CaseModel) and hasattr(test_case, "turns")
        )

    def coerce(self, test_case: Any) -> Any:
        return as_conversational_test_case(test_case) or test_case

    def _validate(self, test_case: Any) -> None:
        if not isinstance(test_case, ConversationalTestCase):
            raise InvalidTestCaseError(
                f"TurnContextualPrecisionMetric scores a ConversationalTestCase, got {type(test_case).__name__}"
            )
        if not test_case.expected_outcome or not test_case.expected_outcome.strip():
            raise InvalidTestCaseError(
                "cannot score turn contextual precision: empty or missing expected_outcome (no judge call was made)"
            )
        if not test_case.turns:
            raise InvalidTestCaseError("cannot score turn contextual precision: the conversation has no turns")

    def judgment_keys(self, case: ConversationalTestCase) -> list[bytes]:
        keys: list[bytes] = []
        for w in windows(case.turns, self.window_size):
            if w.nodes:
                keys += self.stage_keys(
                    "\n".join(w.user_messages), judged_text(case.expected_outcome or "", "expected_outcome"), w.nodes
                )
        return keys

    def judge_requests(self, case: Any) -> list[tuple[str, str, list[str]]]:
        """What scoring ``case`` sends the judge: one ``(user messages, expected outcome, nodes)``
        per window with retrieval context. Validates first; ``NotScorableError`` when no window
        has any (as ``measure`` reports it); no judge call."""
        self._validate(case)
        wins = [w for w in windows(case.turns, self.window_size) if w.nodes]
        if not wins:
            raise NotScorableError("not scorable: no window has any retrieval context (no judge call was made)")
        outcome = judged_text(case.expected_outcome or "", "expected_outcome")
        return [("\n".join(w.user_messages), outcome, list(w.nodes)) for w in wins]

    async def _evaluate(self, case: ConversationalTestCase, run: JudgeRun, result: MetricResult) -> None:
        assert case.expected_outcome is not None
        outcome: str = judged_text(case.expected_outcome, "expected_outcome")
        wins = windows(case.turns, self.window_size)
        if not wins:
            raise NotScorableError(
                "not scorable: the conversation has no complete user→assistant interaction (no judge call was made)"
            )
        if not any(w.nodes for w in wins):
            raise NotScorableError(
                "not scorable: no assistant turn retrieved any context, so there is no ranking to judge "
                "(no judge call was made)"
            )

        async def judge(w: Window, usage: Usage):
            if not w.nodes:
                return [], usage
            return await self.judge_node_list(run, "\n".join(w.user_messages), outcome, list(w.nodes), usage), usage

        usages = [Usage() for _ in wins]
        total = Usage()
        try:
            answers = await gather_settled(*(judge(w, u) for w, u in zip(wins, usages)))
        finally:  # a failed conversation still reports the calls it paid for
            for u in usages:
                total.merge(u)
            record_usage(result, total)
        results: list[WindowResult] = []
        for w, (verdicts, usage) in zip(wins, answers):
            score = (
                1.0
                if not w.nodes
                else apply_strict(contextual_precision([v.relevant for v in verdicts]), self.strict_mode)
            )
            results.append(WindowResult(w.index, w.turn_indices, w.node_sources, verdicts, score, usage.calls))
        score = sum(r.score for r in results) / len(results)
        result.score = score
        result.windows = results
        # the per-node verdicts of the last window cover the most recent context
        result.verdicts = [v for r in results for v in r.verdicts]
        result.reason = _turn_reason(score, results, case.turns)
        result.verbose_logs = lambda: _turn_logs(results, case.turns)


def _misranked(r: WindowResult) -> list[int]:
    rel = [v.relevant for v in r.verdicts]
    if True not in rel:
        return list(range(len(rel)))
    last = max(i for i, x in enumerate(rel) if x)
    return [i for i in range(last) if not rel[i]]


def _turn_reason(score: float, results: list[WindowResult], turns: list[Turn]) -> str:
    bad = [(r, _misranked(r)) for r in results if r.verdicts and r.score < 1.0]
    n = len(results)
    if not bad:
        return f"The score is {score:.2f}: in all {n} window(s) the relevant nodes were ranked first."
    parts = []
    for r, idx in bad[:4]:
        end_turn = r.turn_indices[-1] + 1
        turns_named = sorted({r.node_sources[i][0] + 1 for i in idx})
        if idx:
            first = r.verdicts[idx[0]]
            parts.append(
                f"window ending at turn {end_turn} (score {r.score:.2f}) ranked irrelevant nodes from "
                f"turn(s) {', '.join(map(str, turns_named))} first "
                f"(e.g. node {idx[0] + 1}: {shorten(first.reason, 70)})"
            )
        else:
            parts.append(f"window ending at turn {end_turn} scored {r.score:.2f}")
    more = f"; and {len(bad) - 4} more window(s)" if len(bad) > 4 else ""
    return f"The score is {score:.2f} (mean of {n} window(s)): " + "; ".join(parts) + more + "."


def _turn_logs(results: list[WindowResult], turns: list[Turn]) -> str:
    lines = []
    for r in results:
        t0, t1 = r.turn_indices[0] + 1, r.turn_indices[-1] + 1
        lines.append(f"Window {r.index + 1} (turns {t0}-{t1}): score {r.score:.4f}, {r.judge_calls} judge call(s)")
        if not r.verdicts:
            lines.append("  no retrieval context in this window: scores 1.0")
        for k, (v, (t, j)) in enumerate(zip(r.verdicts, r.node_sources), start=1):
            mark = "relevant  " if v.relevant else "irrelevant"
            lines.append(f"  node {k:>3} (turn {t + 1}, #{j + 1}) {mark}{agreement_note(v)} | {shorten(v.reason, 100)}")
    flips = flip_line([v for r in results for v in r.verdicts])
    if flips:
        lines.append(flips)
    return "\n".join(lines)
