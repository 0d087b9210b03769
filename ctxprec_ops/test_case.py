"""Test cases: the data a metric scores. Validated on construction with clear messages."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Sequence

from .errors import InvalidTestCaseError

__all__ = ["LLMTestCase", "ModelTestCase", "Turn", "ConversationalTestCase"]


def _opt_str(value: Any, name: str) -> str | None:
    if value is None or isinstance(value, str):
        return value
    raise InvalidTestCaseError(f"{name} must be a string or None, got {type(value).__name__}")


def _opt_context(value: Any, name: str) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise InvalidTestCaseError(
            f"{name} must be a list of strings (ranked, best first), got {type(value).__name__}"
        )
    nodes = list(value)
    for i, node in enumerate(nodes):
        if not isinstance(node, str):
            raise InvalidTestCaseError(
                f"{name}[{i}] must be a string, got {type(node).__name__}"
            )
    return nodes


def _opt_id(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise InvalidTestCaseError(f"id must be a string or an integer, got {type(value).__name__}")
    return str(value)


@dataclass
class LLMTestCase:
    """One retrieval: the query, the ranked retrieved nodes, and the answer it should lead to.

    ``retrieval_context`` is ranked best first; node K (1-based) is what the judge sees as
    ``<node id="K">``.
    """

    input: str
    actual_output: str | None = None
    expected_output: str | None = None
    retrieval_context: list[str] | None = None
    id: str | None = None
    metadata: dict[str, Any] | None = None
    # deepeval compatibility: accepted and kept, not used by contextual precision
    context: list[str] | None = None
    name: str | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        if not isinstance(self.input, str):
            raise InvalidTestCaseError(f"input must be a string, got {type(self.input).__name__}")
        self.actual_output = _opt_str(self.actual_output, "actual_output")
        self.expected_output = _opt_str(self.expected_output, "expected_output")
        self.retrieval_context = _opt_context(self.retrieval_context, "retrieval_context")
        self.context = _opt_context(self.context, "context")
        self.id = _opt_id(self.id)
        if self.metadata is not None and not isinstance(self.metadata, dict):
            raise InvalidTestCaseError("metadata must be a dict or None")


#: agensight's name for the same thing
ModelTestCase = LLMTestCase

_ROLES = ("user", "assistant")


@dataclass
class Turn:
    """One message of a conversation. Assistant turns may carry the nodes they retrieved."""

    role: str
    content: str
    retrieval_context: list[str] | None = None

    def __post_init__(self) -> None:
        if self.role not in _ROLES:
            raise InvalidTestCaseError(f"Turn.role must be 'user' or 'assistant', got {self.role!r}")
        if not isinstance(self.content, str):
            raise InvalidTestCaseError(
                f"Turn.content must be a string, got {type(self.content).__name__}"
            )
        self.retrieval_context = _opt_context(self.retrieval_context, "Turn.retrieval_context")


@dataclass
class ConversationalTestCase:
    """A conversation (list of turns) and the outcome it should reach."""

    turns: list[Turn]
    expected_outcome: str | None = None
    id: str | None = None
    metadata: dict[str, Any] | None = None

    def __post_init__(self) -> None:
        if isinstance(self.turns, (str, bytes)) or not isinstance(self.turns, Sequence):
            raise InvalidTestCaseError("turns must be a list of Turn")
        turns: list[Turn] = []
        for i, turn in enumerate(self.turns):
            if isinstance(turn, dict):
                try:
                    turn = Turn(**turn)
                except TypeError as exc:
                    raise InvalidTestCaseError(f"turns[{i}]: {exc}") from None
            if not isinstance(turn, Turn):
                raise InvalidTestCaseError(f"turns[{i}] must be a Turn, got {type(turn).__name__}")
            turns.append(turn)
        self.turns = turns
        self.expected_outcome = _opt_str(self.expected_outcome, "expected_outcome")
        self.id = _opt_id(self.id)
        if self.metadata is not None and not isinstance(self.metadata, dict):
            raise InvalidTestCaseError("metadata must be a dict or None")
