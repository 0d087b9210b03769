"""The judge's answer format and its validation against the nodes that were asked about."""

from __future__ import annotations

import json
import re
from typing import Any, Iterable

from pydantic import BaseModel, ConfigDict, Field, ValidationError

__all__ = ["NodeVerdict", "JudgeAnswer", "parse_answer", "check_coverage", "AnswerProblem"]


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
    if isinstance(raw, JudgeAnswer):
        return raw
    if isinstance(raw, BaseModel):
        raw = raw.model_dump()
    if isinstance(raw, (bytes, bytearray)):
        raw = raw.decode("utf-8", "replace")
    if isinstance(raw, str):
        raw = _loads_tolerant(raw)
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


def check_coverage(answer: JudgeAnswer, expected_ids: Iterable[int]) -> dict[int, NodeVerdict]:
    """Map verdicts to nodes by id; the answer must cover every asked node exactly once."""
    expected = list(expected_ids)
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
