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

from ..scoring.verdicts import NodeVerdict

__all__ = [
    "judgment_key",
    "judgment_keys",
    "key_head",
    "key_range",
    "KEY_BYTES",
    "KEY_HEAD_BYTES",
    "remembered_keys",
    "VerdictCache",
    "DictVerdictCache",
]

#: bytes of a judgment key that hash (judge model, prompt version, input, expected output): every
#: node of one question shares them, so a question's entries sit side by side in the key index
KEY_HEAD_BYTES = 7
#: bytes that hash all five fields (128 bits of sha256: alone they identify the node's tuple)
KEY_TAIL_BYTES = 16
#: a judgment key's length: 23 bytes. On PostgreSQL a 23-byte ``bytea`` takes 24 bytes with its
#: length byte, so a key-index entry is 32 bytes (8 of tuple header) where 24–31 bytes would
#: round up to 40 and the former 64 hex digits took 80.
KEY_BYTES = KEY_HEAD_BYTES + KEY_TAIL_BYTES

#: where ``judgment_keys`` remembers what it computed (see ``remembered_keys``)
_memo: ContextVar[dict[tuple, list[bytes]] | None] = ContextVar("ctxprec_judgment_key_memo", default=None)


def _field_hash(parts: Sequence[str]) -> Any:
    """sha256 over length-prefixed fields (no two tuples collide by concatenation), fed in one
    ``update`` (the same digest as one ``update`` per piece)."""
    pieces: list[bytes] = []
    for part in parts:
        data = part.encode("utf-8", "surrogatepass")
        pieces += (len(data).to_bytes(8, "big"), data)
    return hashlib.sha256(b"".join(pieces))


def judgment_key(judge_model: str, prompt_version: str, input: str, expected_output: str, node_text: str) -> bytes:
    """A stable 23-byte key: 7 bytes hashing (judge model, prompt version, input, expected
    output), then 16 hashing all five fields (``KEY_HEAD_BYTES`` + ``KEY_TAIL_BYTES``).

    The shared head keeps the nodes of one question next to each other in the
    ``ctxprec_judgments`` index, so a case's cache entries are read and written on one page
    instead of one random page each (at millions of entries that is most of a chunk's I/O). Two
    questions sharing a head (2^-56 per pair) only share that locality: the tail alone
    identifies the full tuple (128 bits of sha256). Stored as binary (``bytea`` / ``BLOB``):
    half the bytes of hex text, compared with ``memcmp``.
    """
    return judgment_keys(judge_model, prompt_version, input, expected_output, [node_text])[0]


def judgment_keys(
    judge_model: str, prompt_version: str, input: str, expected_output: str, nodes: Sequence[str]
) -> list[bytes]:
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
def remembered_keys(memo: dict[tuple, list[bytes]]) -> Iterator[None]:
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
) -> list[bytes]:
    shared = _field_hash((judge_model, prompt_version, input, expected_output))
    head = shared.digest()[:KEY_HEAD_BYTES]
    out = []
    for node in nodes:
        h = shared.copy()
        data = node.encode("utf-8", "surrogatepass")
        h.update(len(data).to_bytes(8, "big") + data)
        out.append(head + h.digest()[:KEY_TAIL_BYTES])
    return out


def key_head(key: bytes) -> bytes:
    """The part of a judgment key shared by all nodes of one question (and judge, prompt)."""
    return key[:KEY_HEAD_BYTES]


def key_range(head: bytes) -> tuple[bytes, bytes]:
    """The smallest and the largest key that start with ``head`` (both inclusive)."""
    return head, head + b"\xff" * (KEY_BYTES - len(head))


class VerdictCache(Protocol):
    def get(self, key: bytes) -> NodeVerdict | None: ...

    def put(self, key: bytes, verdict: NodeVerdict) -> None: ...


class DictVerdictCache:
    """A dict-backed cache that remembers which entries were added (to persist them)."""

    def __init__(self, preloaded: dict[bytes, NodeVerdict] | None = None) -> None:
        self._data: dict[bytes, NodeVerdict] = dict(preloaded or {})
        self.added: dict[bytes, NodeVerdict] = {}
        self.hits = 0

    def get(self, key: bytes) -> NodeVerdict | None:
        v = self._data.get(key)
        if v is not None:
            self.hits += 1
        return v

    def put(self, key: bytes, verdict: NodeVerdict) -> None:
        if key not in self._data:
            self.added[key] = verdict
        self._data[key] = verdict

    def __len__(self) -> int:
        return len(self._data)
