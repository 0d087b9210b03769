"""The judgment cache: a node already judged (same judge, prompt, input, expected output and
node text) is never paid for again.

The metric talks to an in-memory ``VerdictCache``; the warehouse pipeline preloads one per chunk
from ``ctxprec_judgments`` and writes back what was added.
"""

from __future__ import annotations

import hashlib
from typing import Protocol, Sequence

from .verdicts import NodeVerdict

__all__ = ["judgment_key", "judgment_keys", "VerdictCache", "DictVerdictCache"]


def judgment_key(
    judge_model: str, prompt_version: str, input: str, expected_output: str, node_text: str
) -> str:
    """A stable hex key. Fields are length-prefixed so no two tuples collide by concatenation."""
    buf = bytearray()
    for part in (judge_model, prompt_version, input, expected_output, node_text):
        data = part.encode("utf-8", "surrogatepass")
        buf += len(data).to_bytes(8, "big")
        buf += data
    return hashlib.sha256(buf).hexdigest()


def judgment_keys(
    judge_model: str, prompt_version: str, input: str, expected_output: str, nodes: Sequence[str]
) -> list[str]:
    """``judgment_key`` for every node of one case, hashing the shared prefix once."""
    prefix = hashlib.sha256()
    for part in (judge_model, prompt_version, input, expected_output):
        data = part.encode("utf-8", "surrogatepass")
        prefix.update(len(data).to_bytes(8, "big"))
        prefix.update(data)
    out = []
    for node in nodes:
        h = prefix.copy()
        data = node.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "big") + data)
        out.append(h.hexdigest())
    return out


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
