"""A Batch API result file (output or error file) read line by line, trusting nothing.

One unreadable line never makes the file unreadable: a line that is not JSON, not an object, or
carries no ``custom_id`` is counted (``bad_lines``, with its line number and what is wrong) and
the rest is used. A ``custom_id`` that appears twice is used when both lines carry the same
answer (``identical_duplicates``) and never trusted when they differ (``conflicting``): the request
is asked again, as an unanswered one.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

from ..judge.logprobs import tokens_of
from ..secrets import redact

__all__ = ["BatchAnswer", "ResultFile", "parse_result_file", "request_hash", "requested_ids"]


@dataclass(frozen=True)
class BatchAnswer:
    """One line of a batch's output or error file."""

    custom_id: str
    content: str | None = None
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    #: why the line has no answer (an HTTP error, ``batch_expired``...), else None
    error: str | None = None
    #: the answer's tokens ``(bytes, log-probability)`` when the request asked for them
    logprobs: tuple[tuple[bytes, float], ...] | None = None


@dataclass
class ResultFile:
    """What a result file says, line by line."""

    answers: dict[str, BatchAnswer] = field(default_factory=dict)
    #: (1-based line number, what is wrong with it)
    bad_lines: list[tuple[int, str]] = field(default_factory=list)
    identical_duplicates: int = 0
    #: custom ids answered twice with different answers (removed from ``answers``)
    conflicting: set[str] = field(default_factory=set)

    def merge(self, other: ResultFile) -> None:
        """Add another file of the same batch (the error file after the output file)."""
        for cid, answer in other.answers.items():
            self._add(cid, answer)
        self.bad_lines += other.bad_lines
        self.identical_duplicates += other.identical_duplicates
        self.conflicting |= other.conflicting

    def _add(self, cid: str, answer: BatchAnswer) -> None:
        if cid in self.conflicting:
            return
        seen = self.answers.get(cid)
        if seen is None:
            self.answers[cid] = answer
        elif seen == answer:
            self.identical_duplicates += 1
        else:
            del self.answers[cid]
            self.conflicting.add(cid)

    def bad_line_note(self) -> str:
        """``N unreadable line(s) (line 7: not JSON, ...)`` (the first three named)."""
        named = ", ".join(f"line {n}: {why}" for n, why in self.bad_lines[:3])
        more = f", +{len(self.bad_lines) - 3} more" if len(self.bad_lines) > 3 else ""
        return f"{len(self.bad_lines)} unreadable line(s) ({named}{more})"


def _answer(cid: str, line: dict[str, Any]) -> BatchAnswer:
    response = line.get("response") or {}
    if not isinstance(response, dict):
        return BatchAnswer(cid, error="malformed line: 'response' is not an object")
    err = line.get("error")
    status = response.get("status_code")
    body = response.get("body") or {}
    if not isinstance(body, dict):
        body = {}
    if err or status != 200:
        detail = err if isinstance(err, dict) else (body.get("error") or {})
        if not isinstance(detail, dict):
            detail = {"message": str(detail)}
        code = detail.get("code") or detail.get("type") or (f"HTTP {status}" if status else "error")
        return BatchAnswer(cid, error=redact(f"{code}: {detail.get('message') or ''}")[:300])
    choices = body.get("choices") or []
    first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else {}
    message = first.get("message") or {}
    content = (message.get("content") if isinstance(message, dict) else None) or ""
    usage = body.get("usage") or {}
    if not isinstance(usage, dict):
        usage = {}
    lp = first.get("logprobs")
    tokens = tokens_of(lp.get("content")) if isinstance(lp, dict) and isinstance(lp.get("content"), list) else None
    return BatchAnswer(
        cid,
        str(content),
        usage.get("prompt_tokens"),
        usage.get("completion_tokens"),
        logprobs=tuple(tokens) if tokens else None,
    )


def parse_result_file(text: str) -> ResultFile:
    """Answers by ``custom_id`` from an output or error file (both have the same line shape)."""
    out = ResultFile()
    for n, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            line = json.loads(raw)
        except ValueError:
            out.bad_lines.append((n, "not JSON"))
            continue
        if not isinstance(line, dict):
            out.bad_lines.append((n, f"a JSON {type(line).__name__}, not an object"))
            continue
        cid = line.get("custom_id")
        if not isinstance(cid, str) or not cid:
            out.bad_lines.append((n, "no custom_id"))
            continue
        out._add(cid, _answer(cid, line))
    return out


def request_hash(custom_id: str) -> str:
    """The prompt hash a request line's ``custom_id`` ends with (``metric|log id|call|hash``)."""
    return custom_id.rsplit("|", 1)[-1]


def requested_ids(input_file: str) -> list[str]:
    """The ``custom_id`` of every request line of an input file (lines it cannot read skipped)."""
    out = []
    for raw in input_file.splitlines():
        try:
            line = json.loads(raw) if raw.strip() else None
        except ValueError:
            continue
        if isinstance(line, dict) and isinstance(line.get("custom_id"), str):
            out.append(line["custom_id"])
    return out
