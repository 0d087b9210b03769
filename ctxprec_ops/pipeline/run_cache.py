"""The judgment cache a stream's chunk judges with: the verdicts its read found, plus those of
the stream's other chunks (``RunCache``), or only the former (``SnapshotCache``); new verdicts go
to the chunk's write and, where they are written as they arrive, to the stream's ``VerdictFlush``
(the case judging them keeps a ticket: ``verdicts_ticket``)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from ..judge.cache import DictVerdictCache
from ..scoring.verdicts import NodeVerdict
from .verdict_flush import VerdictFlush

__all__ = ["RunCache", "SnapshotCache", "verdicts_ticket"]

#: the case being judged in this task: the highest flush ticket of its new verdicts (0: none)
_ticket: ContextVar[list[int] | None] = ContextVar("ctxprec_verdicts_ticket", default=None)


@contextmanager
def verdicts_ticket() -> Iterator[list[int]]:
    """Inside the block (one case's judging, in its own task), new verdicts put in a ``RunCache``
    with a flush record the flush that commits them: ``box[0]``, to wait for (0: nothing new)."""
    box = [0]
    token = _ticket.set(box)
    try:
        yield box
    finally:
        _ticket.reset(token)


class RunCache:
    """A chunk's judgment cache that also sees verdicts judged by this run's other chunks and not
    yet known to be written (``recent``), so a node repeated in neighbouring chunks is judged once.
    Without a ``flush``, a verdict taken from ``recent`` is written again with this chunk (an
    insert-ignore), so every chunk's transaction holds the verdicts its scores used; with one,
    every new verdict is committed as it arrives."""

    def __init__(
        self, own: DictVerdictCache, recent: dict[bytes, NodeVerdict], flush: VerdictFlush | None = None
    ) -> None:
        self.own, self.recent, self.flush = own, recent, flush

    def get(self, key: bytes) -> NodeVerdict | None:
        v = self.own.get(key)
        if v is None and (v := self.recent.get(key)) is not None:
            self.own.put(key, v)
        return v

    def put(self, key: bytes, verdict: NodeVerdict) -> None:
        self.own.put(key, verdict)
        self.recent[key] = verdict
        if self.flush is not None:
            ticket = self.flush.add(key, verdict)
            box = _ticket.get()
            if box is not None and ticket > box[0]:
                box[0] = ticket


class SnapshotCache:
    """A chunk's judgment cache for a judge that answers by prompt (``stable_prompts``: a deferred
    transport matching answers to the requests it recorded): lookups see the verdicts the chunk's
    read found, never ones judged during this pass, so a case asks exactly the prompt it asked when
    its request was recorded. New verdicts are still kept for the chunk's write."""

    def __init__(self, own: DictVerdictCache) -> None:
        self.own = own

    def get(self, key: bytes) -> NodeVerdict | None:
        return None if key in self.own.added else self.own.get(key)

    def put(self, key: bytes, verdict: NodeVerdict) -> None:
        self.own.put(key, verdict)
