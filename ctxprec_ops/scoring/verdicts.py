"""The judge's answer format and its validation against the nodes that were asked about."""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from operator import attrgetter
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = [
    "AnswerProblem",
    "JudgeAnswer",
    "NodeVerdict",
    "YesNoAnswer",
    "YesNoVerdict",
    "check_coverage",
    "parse_answer",
    "parse_in_order",
]


class NodeVerdict(BaseModel):
    """The judge's verdict on one node. ``node`` is the node's rank (1 = best)."""

    model_config = ConfigDict(extra="ignore")

    node: int = Field(description="the id of the <node> block this verdict is about")
    relevant: bool = Field(description="true if the node helps reach the expected output")
    reason: str = Field(default="", description="one short sentence")

    @property
    def verdict(self) -> str:
        """deepeval's spelling: ``"yes"`` / ``"no"``."""
        return "yes" if self.relevant else "no"


class JudgeAnswer(BaseModel):
    """What the judge must answer: one verdict per node it was shown."""

    model_config = ConfigDict(extra="ignore")

    verdicts: list[NodeVerdict]


class AnswerProblem(Exception):
    """The answer cannot be used as is; the message is shown to the judge when re-asking.

    ``kind`` names the way it is unusable (``empty``, ``not_json``, ``zero_based``,
    ``relevant_not_boolean``, ``missing``, ...), ``pattern`` says it in a few words for people
    ("node ids start at 0", "relevant is not a boolean: 'oui'", "empty answer"): a judge whose
    answers keep failing the same way is told apart from one that slipped once
    (``judge.answer_watch``)."""

    def __init__(self, message: str, kind: str = "format", pattern: str | None = None) -> None:
        super().__init__(message)
        self.kind = kind
        self.pattern = pattern or message


#: ``JudgeAnswer.model_validate_json`` without its wrapper's argument checks (the same validator)
_validate_answer_json = JudgeAnswer.__pydantic_validator__.validate_json

_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.DOTALL)


def _loads_tolerant(text: str) -> Any:
    text = text.strip()
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        pass
    m = _FENCE.search(text)
    if m:
        try:
            return json.loads(m.group(1))
        except json.JSONDecodeError:
            pass
    start, end = text.find("{"), text.rfind("}")
    if start != -1 and end > start:
        try:
            return json.loads(text[start : end + 1])
        except json.JSONDecodeError:
            pass
    if not text:
        raise AnswerProblem("the answer was empty", "empty", "empty answer")
    raise AnswerProblem("the answer was not valid JSON", "not_json", "the answer is not JSON")


def parse_answer(raw: Any) -> JudgeAnswer:
    """Turn whatever a judge returned (JSON text, dict, pydantic object) into a JudgeAnswer."""
    if type(raw) is str:  # the usual answer, tested first (no isinstance through pydantic's metaclass)
        try:  # clean JSON in the format: parsed and validated in one pass
            return _validate_answer_json(raw)
        except ValueError:  # anything else (fenced, bare list, not the format...): the tolerant path
            return _parse_loaded(_loads_tolerant(raw))
    if raw is None:
        raise AnswerProblem("the answer was empty", "empty", "empty answer")
    if isinstance(raw, JudgeAnswer):
        return raw
    if isinstance(raw, BaseModel):
        return _parse_loaded(raw.model_dump())
    if isinstance(raw, (bytes, bytearray)):
        return parse_answer(raw.decode("utf-8", "replace"))
    if isinstance(raw, str):  # a subclass of str
        return parse_answer(str(raw))
    return _parse_loaded(raw)


def _parse_loaded(raw: Any) -> JudgeAnswer:
    """An answer already loaded from JSON (a dict, or a bare list of verdicts) as a JudgeAnswer."""
    if isinstance(raw, list):  # a bare list of verdicts
        raw = {"verdicts": raw}
    if not isinstance(raw, dict):
        raise AnswerProblem(
            "the answer must be a JSON object with a 'verdicts' list", "not_object", "the answer is not a JSON object"
        )
    try:
        return JudgeAnswer.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        loc = first.get("loc", ())
        where = ".".join(str(p) for p in loc)
        message = f"the answer does not match the format ({where}: {first['msg']})"
        field = str(loc[-1]) if loc else ""
        value = first.get("input")
        if field == "relevant":
            raise AnswerProblem(
                f"{message}: 'relevant' must be true or false, got {value!r}",
                "relevant_not_boolean",
                f"relevant is not a boolean: {value!r}",
            ) from None
        if field == "node":
            raise AnswerProblem(
                f"{message}: 'node' must be the node's id, got {value!r}", "node_not_integer",
                f"node is not an integer id: {value!r}",
            ) from None  # fmt: skip
        if field == "verdicts" or not loc:
            raise AnswerProblem(message, "no_verdicts", "no 'verdicts' list") from None
        raise AnswerProblem(message, "format", f"{field or 'the answer'} does not match the format") from None


_node_of = attrgetter("node")


def check_coverage(answer: JudgeAnswer, expected_ids: Iterable[int]) -> dict[int, NodeVerdict]:
    """Map verdicts to nodes by id; the answer must cover every asked node exactly once."""
    expected = list(expected_ids)
    verdicts = answer.verdicts
    nodes = list(map(_node_of, verdicts))
    if nodes == expected and len(set(expected)) == len(expected):
        return dict(zip(nodes, verdicts))  # the usual answer: every id once, in the order asked
    return _check_coverage(answer, expected)


def _check_coverage(answer: JudgeAnswer, expected: list[int]) -> dict[int, NodeVerdict]:
    """``check_coverage`` without its shortcut: any answer, any order, every problem named."""
    wanted = set(expected)
    by_id: dict[int, NodeVerdict] = {}
    duplicated: set[int] = set()
    unknown: set[int] = set()
    for v in answer.verdicts:
        if v.node not in wanted:
            unknown.add(v.node)
        elif v.node in by_id:
            duplicated.add(v.node)
        else:
            by_id[v.node] = v
    missing = [k for k in expected if k not in by_id]
    answered = sorted(v.node for v in answer.verdicts)
    if missing and answered and answered == sorted(k - 1 for k in expected):
        raise AnswerProblem(
            f'the node ids were counted from 0; use the id of each <node id="K"> block '
            f"({', '.join(map(str, expected))})",
            "zero_based",
            "node ids start at 0",
        )
    problems = []
    if missing:
        problems.append(f"no verdict for node(s) {', '.join(map(str, missing))}")
    if duplicated:
        problems.append(f"more than one verdict for node(s) {', '.join(map(str, sorted(duplicated)))}")
    if unknown:
        problems.append(f"verdicts for node id(s) that were not shown: {', '.join(map(str, sorted(unknown)))}")
    if problems:
        kind = "unknown_ids" if unknown else "duplicated" if duplicated else "missing"
        pattern = {"unknown_ids": "verdicts for node ids never shown", "duplicated": "a node judged twice",
                   "missing": "verdicts missing"}[kind]  # fmt: skip
        raise AnswerProblem("; ".join(problems), kind, pattern)
    return by_id


# -- deepeval-style answers: yes/no verdicts in node order ---------------------------------------


class YesNoVerdict(BaseModel):
    """One verdict of a deepeval-style answer: ``verdict`` is ``"yes"`` or ``"no"``."""

    model_config = ConfigDict(extra="ignore")

    verdict: str
    reason: str = ""


class YesNoAnswer(BaseModel):
    """A deepeval-style answer: one verdict per node, in the order the nodes were shown."""

    model_config = ConfigDict(extra="ignore")

    verdicts: list[YesNoVerdict]


#: strict JSON schema of ``YesNoAnswer`` (structured-output modes need every property required)
YES_NO_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "verdicts": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {"verdict": {"type": "string", "enum": ["yes", "no"]}, "reason": {"type": "string"}},
                "required": ["verdict", "reason"],
                "additionalProperties": False,
            },
        }
    },
    "required": ["verdicts"],
    "additionalProperties": False,
}


def _yes_no(value: Any, position: int) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("yes", "no"):
        return value.strip().lower() == "yes"
    raise AnswerProblem(
        f'verdict {position} is {value!r}, not "yes" or "no"', "verdict_not_yes_no", f"verdict is not yes/no: {value!r}"
    )


def parse_in_order(raw: Any, expected_ids: Iterable[int]) -> dict[int, NodeVerdict]:
    """Map an in-order yes/no answer onto the node ids it was asked about (position i -> id i).

    The count must match exactly: a short or long answer cannot be mapped by position, so it
    is an ``AnswerProblem`` (the caller re-asks, then splits the group).
    """
    ids = list(expected_ids)
    if isinstance(raw, BaseModel):
        raw = raw.model_dump()
    if isinstance(raw, (bytes, bytearray)):
        raw = raw.decode("utf-8", "replace")
    if isinstance(raw, str):
        raw = _loads_tolerant(raw)
    if isinstance(raw, list):
        raw = {"verdicts": raw}
    items = raw.get("verdicts") if isinstance(raw, dict) else None
    if not isinstance(items, list):
        raise AnswerProblem(
            "the answer must be a JSON object with a 'verdicts' list", "no_verdicts", "no 'verdicts' list"
        )
    if len(items) != len(ids):
        raise AnswerProblem(
            f"the answer has {len(items)} verdict(s) for {len(ids)} document(s)", "wrong_count", "wrong verdict count"
        )
    out: dict[int, NodeVerdict] = {}
    for position, (node, item) in enumerate(zip(ids, items), start=1):
        if isinstance(item, BaseModel):
            item = item.model_dump()
        if not isinstance(item, dict) or ("verdict" not in item and "relevant" not in item):
            raise AnswerProblem(
                f"verdict {position} is not an object with a 'verdict' field", "format", "verdicts without 'verdict'"
            )
        relevant = _yes_no(item.get("verdict", item.get("relevant")), position)
        reason = item.get("reason")
        out[node] = NodeVerdict(node=node, relevant=relevant, reason=reason if isinstance(reason, str) else "")
    return out
