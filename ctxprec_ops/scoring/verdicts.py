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
    """The answer cannot be used as is; the message is shown to the judge when re-asking."""


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
    raise AnswerProblem("the answer was not valid JSON")


def parse_answer(raw: Any) -> JudgeAnswer:
    """Turn whatever a judge returned (JSON text, dict, pydantic object) into a JudgeAnswer."""
    if type(raw) is str:  # the usual answer, tested first (no isinstance through pydantic's metaclass)
        try:  # clean JSON in the format: parsed and validated in one pass
            return _validate_answer_json(raw)
        except ValueError:  # anything else (fenced, bare list, not the format...): the tolerant path
            return _parse_loaded(_loads_tolerant(raw))
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
        raise AnswerProblem("the answer must be a JSON object with a 'verdicts' list")
    try:
        return JudgeAnswer.model_validate(raw)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ()))
        raise AnswerProblem(f"the answer does not match the format ({where}: {first['msg']})") from None


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
    problems = []
    if missing:
        problems.append(f"no verdict for node(s) {', '.join(map(str, missing))}")
    if duplicated:
        problems.append(f"more than one verdict for node(s) {', '.join(map(str, sorted(duplicated)))}")
    if unknown:
        problems.append(f"verdicts for node id(s) that were not shown: {', '.join(map(str, sorted(unknown)))}")
    if problems:
        raise AnswerProblem("; ".join(problems))
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
    raise AnswerProblem(f'verdict {position} is {value!r}, not "yes" or "no"')


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
        raise AnswerProblem("the answer must be a JSON object with a 'verdicts' list")
    if len(items) != len(ids):
        raise AnswerProblem(f"the answer has {len(items)} verdict(s) for {len(ids)} document(s)")
    out: dict[int, NodeVerdict] = {}
    for position, (node, item) in enumerate(zip(ids, items), start=1):
        if isinstance(item, BaseModel):
            item = item.model_dump()
        if not isinstance(item, dict) or ("verdict" not in item and "relevant" not in item):
            raise AnswerProblem(f"verdict {position} is not an object with a 'verdict' field")
        relevant = _yes_no(item.get("verdict", item.get("relevant")), position)
        reason = item.get("reason")
        out[node] = NodeVerdict(node=node, relevant=relevant, reason=reason if isinstance(reason, str) else "")
    return out
