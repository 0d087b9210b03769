"""Each node verdict's confidence from the token log-probabilities of the judge's answer.

A chat completion asked with ``logprobs: true`` returns its answer as a list of tokens, each with
its text (and its UTF-8 ``bytes``) and log-probability. The answer is the JSON object
``{"verdicts": [{"node": K, "relevant": true|false, "reason": "…"}, …]}``: this module finds, in
the text the tokens spell, the literal of each verdict's ``relevant`` value, and multiplies the
probabilities of the tokens that spell it. Tokens are matched by the text they cover, so a value
token with a leading space (``" true"``), one glued to punctuation (``"true},"``) and a value split
over several tokens (``"tr"``, ``"ue"``) all give the probability of the value the judge chose. A
deepeval-style answer (``{"verdict": "yes"|"no"}`` in node order) is read the same way, by position.

The scanner walks the JSON structure byte by byte (strings, escapes, nesting), so a reason that
contains ``"relevant": true`` or braces never passes for a verdict.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["Token", "tokens_of", "value_confidences"]

#: one token of an answer: its UTF-8 bytes and its natural log-probability
Token = tuple[bytes, float]

_SPACE = frozenset(b" \t\r\n")
_LITERAL = frozenset(b"abcdefghijklmnopqrstuvwxyz")
_NUMBER = frozenset(b"0123456789+-.eE")


def tokens_of(content: Iterable[Any] | None) -> list[Token] | None:
    """The ``(bytes, logprob)`` tokens of a choice's ``logprobs.content`` (the openai client's
    objects or plain dicts, as a batch result line holds them); None when there are none."""
    if content is None:
        return None
    out: list[Token] = []
    for item in content:
        get = item.get if isinstance(item, dict) else lambda name, _i=item: getattr(_i, name, None)
        raw, text, logprob = get("bytes"), get("token"), get("logprob")
        if not isinstance(logprob, (int, float)) or isinstance(logprob, bool):
            return None
        if isinstance(raw, list) and all(isinstance(b, int) and 0 <= b < 256 for b in raw):
            data = bytes(raw)
        elif isinstance(text, str):
            data = text.encode("utf-8")
        else:
            return None
        out.append((data, float(logprob)))
    return out or None


@dataclass
class _Object:
    """A JSON object being scanned: the key whose value comes next, and what it said so far."""

    key: str | None = None
    expect_key: bool = True
    node: int | None = None
    #: (start, end) byte offsets of the ``relevant`` literal / the ``verdict`` string's text
    span: tuple[int, int] | None = None


def _value_spans(data: bytes) -> list[tuple[int | None, tuple[int, int]]]:
    """``(node id or None, value span)`` of every object with a ``relevant`` literal (or a
    ``verdict`` string), in the order they close."""
    stack: list[_Object | None] = []  # None: an array
    found: list[tuple[int | None, tuple[int, int]]] = []
    i, n = 0, len(data)
    while i < n:
        c = data[i]
        top = stack[-1] if stack else None
        if c in _SPACE:
            i += 1
        elif c == 0x7B:  # {
            stack.append(_Object())
            i += 1
        elif c == 0x5B:  # [
            stack.append(None)
            i += 1
        elif c in (0x7D, 0x5D):  # } ]
            done = stack.pop() if stack else None
            if isinstance(done, _Object) and done.span is not None:
                found.append((done.node, done.span))
            i += 1
        elif c == 0x3A:  # :
            if top is not None:
                top.expect_key = False
            i += 1
        elif c == 0x2C:  # ,
            if top is not None:
                top.expect_key, top.key = True, None
            i += 1
        elif c == 0x22:  # a string
            start = i + 1
            j = start
            while j < n and data[j] != 0x22:
                j += 2 if data[j] == 0x5C else 1
            text = data[start:j]
            if top is not None and top.expect_key:
                top.key = text.decode("utf-8", "replace")
            elif top is not None and top.key == "verdict" and text.strip().lower() in (b"yes", b"no"):
                top.span = (start, j)
            i = j + 1
        elif c in _LITERAL:
            j = i
            while j < n and data[j] in _LITERAL:
                j += 1
            if top is not None and top.key == "relevant" and data[i:j] in (b"true", b"false"):
                top.span = (i, j)
            i = j
        elif c in _NUMBER:
            j = i
            while j < n and data[j] in _NUMBER:
                j += 1
            if top is not None and top.key == "node":
                try:
                    top.node = int(data[i:j])
                except ValueError:
                    pass
            i = j
        else:  # anything else (text around the JSON): skipped
            i += 1
    return found


def value_confidences(tokens: Sequence[Token], ids: Sequence[int]) -> dict[int, float]:
    """``{node id: probability of its relevant value}`` for the nodes ``ids`` an answer judged;
    a node whose value the tokens do not spell is left out (the caller treats it as unsure).
    Verdicts without node ids (a deepeval-style answer) are mapped to ``ids`` in order."""
    data = b"".join(t for t, _ in tokens)
    starts: list[int] = []
    at = 0
    for t, _ in tokens:
        starts.append(at)
        at += len(t)
    spans = _value_spans(data)
    by_position = all(node is None for node, _ in spans)
    wanted = set(ids)
    out: dict[int, float] = {}
    for position, (node, (lo, hi)) in enumerate(spans):
        if by_position:
            node = ids[position] if position < len(ids) else None
        if node is None or node not in wanted or node in out or hi <= lo:
            continue
        total = 0.0
        k = max(0, bisect_right(starts, lo) - 1)  # the token the value starts in
        while k < len(tokens) and starts[k] < hi:  # every token covering part of the value
            total += tokens[k][1]
            k += 1
        out[node] = math.exp(min(total, 0.0))
    return out
