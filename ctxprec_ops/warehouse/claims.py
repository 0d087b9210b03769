"""Claims on the rows being judged, so concurrent runs never pay twice for a row — whatever chunks
each of them planned.

A claim names the rows themselves: the ids of a chunk's rows that are about to be judged (its
cases, after the rows already scored are skipped), in one row of ``ctxprec_claims``
(``lease_claims.py``: generic SQL, so every warehouse family has claims). Two runs that planned
different chunks (rows arrived between their plans, other chunk sizes) still meet on the ids.
One stream of chunks is one *holder* (``RowClaims``): a run's single process, each ``--workers``
process, each Airflow chunk task. Per chunk:

1. insert my claim row with the chunk's case ids, then (after it committed) read the other
   holders' claim rows of the same scope (source table, scoring key, partition);
2. an id that a live holder's row also names is not mine: I narrow my row to the rest. Two
   claimers racing for an id cannot both keep it: the later of the two inserts to commit sees
   the earlier row (unless its holder already gave the id up). Both may give it up; it is then
   claimed again later;
3. the ids I kept are checked against the scores again (a row scored and released between the
   chunk's first read and my claim is not judged again);
4. the claim row is deleted in the transaction that writes the chunk.

Rows held by another live holder are scored after the free ones: the stream waits until they are
released (saying which run holds them, since when, until when its lease runs) and reads the
chunk again, finding them scored.

A holder that died leaves its rows behind. They are taken over at once when the holder provably
cannot be alive: its process on this host has ended (``holders.process_gone``: pid and start
time), its stream in this process has ended, or its warehouse family knows
(``Dialect.claim_holder_gone``: PostgreSQL's and MySQL's session locks, DuckDB's one writing
process). Otherwise they are taken over when their lease expires (``CTXPREC_CLAIM_LEASE_SECONDS``,
default 600 s), which its holder renews every third of it.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import uuid
from collections.abc import Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from sqlalchemy.engine import Engine

from .dialects import dialect_of
from .holders import ClaimHolder, describe, process_gone, this_process
from .lease_claims import (
    claims_of_others,
    claims_table,
    delete_claim,
    delete_holder,
    ensure_claims_table,
    insert_claim,
    lease_seconds,
    now,
    renew,
    set_ids,
)

__all__ = ["RowClaims", "Claim", "claim_key", "claim_scope", "id_hash", "holder_gone", "waiting_text"]

log = logging.getLogger(__name__)

#: holders whose stream is running in this process (a row of this process naming another is dead)
_live: set[str] = set()


def claim_key(name: str) -> int:
    """The signed 64-bit key of a name (PostgreSQL's advisory-lock key)."""
    return int.from_bytes(hashlib.blake2b(name.encode("utf-8"), digest_size=8).digest(), "big", signed=True)


def claim_scope(*parts: str) -> str:
    """What a claim's ids are ids of, as 32 hex digits (source table, scoring key, partition)."""
    text = "\x1f".join(parts)
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()


def id_hash(log_id: str) -> str:
    """An id as a claim row lists it: 16 hex digits of a hash of its text."""
    return hashlib.blake2b(log_id.encode("utf-8", "surrogatepass"), digest_size=8).hexdigest()


def holder_gone(engine: Engine, holder: ClaimHolder) -> str | None:
    """Why ``holder`` cannot be alive (its claims may be taken over), or None."""
    if holder.expires_at < now():
        return "its lease expired"
    me = this_process()
    if holder.process is not None and holder.process.same(me):
        return None if holder.holder in _live else "its stream in this process has ended"
    why = dialect_of(engine).claim_holder_gone(engine, holder)
    if why is None and holder.process is not None:
        why = process_gone(holder.process)
    return why


@dataclass
class Claim:
    """One chunk's claim: the ids it kept, and those a live holder has (id -> that holder)."""

    name: str | None
    kept: list[str]
    held: dict[str, ClaimHolder] = field(default_factory=dict)


class RowClaims:
    """One holder's claims (a stream of chunks), in ``scope``; use as a context manager: it
    registers the holder (and the family's sign of life, ``Dialect.claim_liveness``), renews its
    leases from a daemon thread and deletes its rows at the end."""

    def __init__(
        self, engine: Engine, scope: str, *, run_id: str, schema: str | None = None, lease: float | None = None
    ) -> None:
        self.engine, self.scope, self.run_id, self.schema = engine, scope, run_id, schema
        self.seconds = lease_seconds(lease)
        self.holder = uuid.uuid4().hex
        self.table = claims_table(schema)
        self._stack = ExitStack()
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None

    def __enter__(self) -> RowClaims:
        self.table = ensure_claims_table(self.engine, self.schema)
        self._stack.enter_context(dialect_of(self.engine).claim_liveness(self.engine, self.holder))
        _live.add(self.holder)
        self._beat = threading.Thread(target=self._heartbeat, name=f"ctxprec-claims-{self.holder[:8]}", daemon=True)
        self._beat.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
        try:
            delete_holder(self.engine, self.table, self.holder)
        except Exception as error:  # they expire with their lease
            log.warning("claims: deleting this run's claim rows failed (%s); they expire", type(error).__name__)
        finally:
            _live.discard(self.holder)
            self._stack.close()

    def _heartbeat(self) -> None:
        while not self._stop.wait(self.seconds / 3):
            try:
                renew(self.engine, self.table, self.holder, now() + timedelta(seconds=self.seconds))
            except Exception as exc:  # retried at the next beat; the lease has two more in hand
                log.warning("claims: renewing this run's leases failed (%s); retrying", type(exc).__name__)

    def _row(self, name: str, hashes: Sequence[str]) -> dict[str, Any]:
        process = this_process()
        at = now()
        return {
            "name": name,
            "holder": self.holder,
            "scope": self.scope,
            "run_id": self.run_id[:255],
            "host": process.host[:255],
            "pid": process.pid,
            "process_start": process.started,
            "claimed_at": at,
            "expires_at": at + timedelta(seconds=self.seconds),
            "ids": "".join(hashes),
        }

    def claim(self, ids: Sequence[str]) -> Claim:
        """Claim ``ids`` (distinct log ids); ids a live holder has are left to it."""
        if not ids:
            return Claim(None, [])
        by_hash = {id_hash(i): i for i in ids}
        name = uuid.uuid4().hex
        insert_claim(self.engine, self.table, self._row(name, list(by_hash)))
        held = self._held(by_hash)
        if not held:
            return Claim(name, list(ids))
        kept = [i for i in ids if i not in held]
        set_ids(self.engine, self.table, name, [h for h, i in by_hash.items() if i not in held])
        return Claim(name, kept, held)

    def holders_of(self, ids: Sequence[str]) -> dict[str, ClaimHolder]:
        """Which of ``ids`` a live holder (not this one) has claimed now."""
        return self._held({id_hash(i): i for i in ids})

    def _held(self, by_hash: dict[str, str]) -> dict[str, ClaimHolder]:
        held: dict[str, ClaimHolder] = {}
        verdict: dict[str, str | None] = {}
        for row in claims_of_others(self.engine, self.table, self.scope, self.holder):
            mine = row.ids & by_hash.keys()
            if not mine:
                continue
            who = row.holder
            if who.holder not in verdict:
                verdict[who.holder] = why = holder_gone(self.engine, who)
                if why is not None:
                    n = delete_holder(self.engine, self.table, who.holder)
                    log.warning("claims: took over %d claim row(s) of %s: %s", n, describe(who), why)
            if verdict[who.holder] is None:
                for h in mine:
                    held.setdefault(by_hash[h], who)
        return held

    def release_in(self, conn: Any, claim: Claim | None) -> None:
        """Delete ``claim``'s row inside ``conn``'s transaction (the chunk's write)."""
        if claim is not None and claim.name is not None:
            delete_claim(conn, self.table, claim.name)


def waiting_text(held: dict[str, ClaimHolder]) -> str:
    """``N row(s) held by run R (pid P on H, claimed at T; its lease runs until E unless
    renewed)``, one clause per holder."""
    by: dict[str, tuple[ClaimHolder, int]] = {}
    for who in held.values():
        seen = by.get(who.holder)
        by[who.holder] = (who, (seen[1] if seen else 0) + 1)
    return "; ".join(f"{n} row(s) held by {describe(who)}" for who, n in by.values())
