"""The judgment cache: a node already judged (same judge, prompt, input, expected output and
node text) is never paid for again.

The metric talks to an in-memory ``VerdictCache``; the warehouse pipeline preloads one per chunk
from ``ctxprec_judgments`` and writes back what was added.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Protocol

from .verdicts import NodeVerdict

__all__ = [
    "judgment_key",
    "judgment_keys",
    "key_head",
    "KEY_HEAD_CHARS",
    "remembered_keys",
    "VerdictCache",
    "DictVerdictCache",
]

#: hex digits of a judgment key that hash (judge model, prompt version, input, expected output):
#: every node of one question shares them
KEY_HEAD_CHARS = 32

#: where ``judgment_keys`` remembers what it computed (see ``remembered_keys``)
_memo: ContextVar[dict[tuple, list[str]] | None] = ContextVar("ctxprec_judgment_key_memo", default=None)


def _field_hash(parts: Sequence[str]) -> Any:
    """sha256 over length-prefixed fields (no two tuples collide by concatenation)."""
    h = hashlib.sha256()
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "big"))
        h.update(data)
    return h


def judgment_key(judge_model: str, prompt_version: str, input: str, expected_output: str, node_text: str) -> str:
    """A stable 64-hex-digit key: 32 digits hashing (judge model, prompt version, input, expected
    output), then 32 hashing all five fields.

    The shared first half keeps the nodes of one question next to each other in the
    ``ctxprec_judgments`` index, so a case's cache entries are read and written on one page
    instead of one random page each (at millions of entries that is most of a chunk's I/O).
    The second half alone identifies the full tuple (128 bits of sha256).
    """
    return judgment_keys(judge_model, prompt_version, input, expected_output, [node_text])[0]


def judgment_keys(
    judge_model: str, prompt_version: str, input: str, expected_output: str, nodes: Sequence[str]
) -> list[str]:
    """``judgment_key`` for every node of one case, hashing the shared fields once."""
    memo = _memo.get()
    if memo is None:
        return _judgment_keys(judge_model, prompt_version, input, expected_output, nodes)
    args = (judge_model, prompt_version, input, expected_output, tuple(nodes))
    keys = memo.get(args)
    if keys is None:
        keys = memo[args] = _judgment_keys(judge_model, prompt_version, input, expected_output, nodes)
    return keys


@contextmanager
def remembered_keys(memo: dict[tuple, list[str]]) -> Iterator[None]:
    """Inside the block (this context: tasks created in it inherit it), ``judgment_keys`` looks
    its arguments up in ``memo`` and stores what it computes there. The pipeline computes a
    chunk's keys once to preload the cache and finds them again when the metric judges the case."""
    token = _memo.set(memo)
    try:
        yield
    finally:
        _memo.reset(token)


def _judgment_keys(
    judge_model: str, prompt_version: str, input: str, expected_output: str, nodes: Sequence[str]
) -> list[str]:
    shared = _field_hash((judge_model, prompt_version, input, expected_output))
    head = shared.hexdigest()[:KEY_HEAD_CHARS]
    out = []
    for node in nodes:
        h = shared.copy()
        data = node.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "big") + data)
        out.append(head + h.hexdigest()[:32])
    return out


def key_head(key: str) -> str:
    """The part of a judgment key shared by all nodes of one question (and judge, prompt)."""
    return key[:KEY_HEAD_CHARS]


class VerdictCache(Protocol):
    def get(self, key: str) -> NodeVerdict | None: ...

    def put(self, key: str, verdict: NodeVerdict) -> None: ...


class DictVerdictCache:
    """A dict-backed cache that remembers which entries were added (to persist them)."""

    def __init__(self, preloaded: dict[str, NodeVerdict] | None = None) -> None:
        self._data: dict[str, NodeVerdict] = dict(preloaded or {})
        self.added: dict[str, NodeVerdict] = {}
        self.hits = 0

    def get(self, key: str) -> NodeVerdict | None:
        v = self._data.get(key)
        if v is not None:
            self.hits += 1
        return v

    def put(self, key: str, verdict: NodeVerdict) -> None:
        if key not in self._data:
            self.added[key] = verdict
        self._data[key] = verdict

    def __len__(self) -> int:
        return len(self._data)
