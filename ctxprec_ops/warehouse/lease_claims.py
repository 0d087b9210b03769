"""Chunk claims as leases in a table, for warehouses without advisory or named locks (DuckDB,
Snowflake).

A claim is a row of ``ctxprec_claims`` (in the output schema): the claim's key, a random holder
id, and the time its lease expires. The holder renews the lease from a daemon thread every third
of its length and deletes the row when the claim is released; a process that dies leaves its row
behind, and the next claimer deletes it once it has expired. Every step is a short transaction
of its own, so no transaction is ever held open while a chunk is scored.

The algorithm does not rely on the primary key being enforced (Snowflake does not enforce it):

1. delete the name's row if its lease has expired;
2. insert my row unless a row for the name exists (``INSERT ... SELECT ... WHERE NOT EXISTS``);
   a duplicate-key or write-write-conflict error means another claimer got there first;
3. read the name's live rows, after my insert has committed: I hold the claim when mine is the
   only one. Two claimers whose inserts both got through (keys not enforced, and each inserted
   before it could see the other's row) cannot both see only their own row: the later of the two
   commits sees the earlier. A claimer that sees another live row deletes its own;
4. if both deleted theirs, the name is free again and the attempt is repeated; with
   ``wait=True`` the claimer polls until it holds the claim.

Times are computed in Python (UTC) and bound as parameters, so the hosts' clocks are what the
leases are measured against: keep them in sync (the default lease, 10 minutes, leaves room).
"""

from __future__ import annotations

import logging
import random
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from functools import cache
from typing import Any

from sqlalchemy import Column, DateTime, MetaData, String, Table, and_, delete, exists, insert, literal, select, update
from sqlalchemy.engine import Engine
from sqlalchemy.exc import IntegrityError

from ..errors import CtxPrecError
from .ddl import create_table
from .dialects import dialect_of
from .reflect import has_table

__all__ = [
    "CLAIMS_TABLE",
    "DEFAULT_LEASE_SECONDS",
    "LeaseSettingError",
    "claims_table",
    "ensure_claims_table",
    "lease_claim",
    "lease_name",
    "lease_seconds",
]

log = logging.getLogger(__name__)

CLAIMS_TABLE = "ctxprec_claims"
#: seconds a claim's lease lasts without renewal (the heartbeat renews it every third of that)
DEFAULT_LEASE_SECONDS = 600.0
#: seconds between two attempts of a waiting claimer (plus up to as much again of jitter)
POLL_SECONDS = 0.25
#: attempts of a non-waiting claimer whose row and a rival's were both withdrawn
_FREE_RETRIES = 8


class LeaseSettingError(CtxPrecError, ValueError):
    """A ``lease`` argument (``CTXPREC_CLAIM_LEASE_SECONDS`` through the pipeline) is not a positive number."""


def lease_seconds(value: float | str | None = None) -> float:
    """The lease length: ``value`` if given, else ``DEFAULT_LEASE_SECONDS``."""
    source = "lease"
    if value is None:
        return DEFAULT_LEASE_SECONDS
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        raise LeaseSettingError(f"{source} must be a positive number of seconds, got {value!r}") from None
    if not seconds > 0 or seconds == float("inf"):
        raise LeaseSettingError(f"{source} must be a positive number of seconds, got {value!r}")
    return seconds


def lease_name(key: int) -> str:
    """The row key of a claim whose 64-bit key is ``key`` (as the MySQL lock name)."""
    return f"ctxprec:{key & (2**64 - 1):016x}"


@cache
def claims_table(schema: str | None = None) -> Table:
    """The ``ctxprec_claims`` table of ``schema`` (None: the connection's default schema)."""
    return Table(
        CLAIMS_TABLE,
        MetaData(schema=schema),
        Column("name", String(64), primary_key=True),
        Column("holder", String(64), nullable=False),
        Column("expires_at", DateTime(timezone=True), nullable=False),
        Column("claimed_at", DateTime(timezone=True), nullable=True),
    )


_created: set[tuple[str, str | None]] = set()
_created_lock = threading.Lock()


def ensure_claims_table(engine: Engine, schema: str | None = None) -> Table:
    """Create ``ctxprec_claims`` unless it exists; a concurrent creator's table is accepted."""
    table = claims_table(schema)
    marker = (engine.url.render_as_string(hide_password=True), schema)
    if marker in _created:
        return table
    with _created_lock:
        if marker in _created:
            return table
        for attempt in range(5):
            try:
                if not _table_exists(engine, schema):
                    with engine.begin() as conn:  # the family's DDL (ClickHouse: its table engine)
                        create_table(conn, table, checkfirst=False)
                break
            except Exception:
                # another process or thread created it between the check and the CREATE
                # ("already exists", DuckDB's "Catalog write-write conflict")
                if _table_exists(engine, schema):
                    break
                if attempt == 4:
                    raise
                time.sleep(0.05 * (attempt + 1))
        _created.add(marker)
    return table


def _table_exists(engine: Engine, schema: str | None) -> bool:
    """Whether the table exists in ``schema`` (``reflect.has_table``: on DuckDB, in the default
    schema, not in any schema as duckdb-engine's ``has_table`` would answer)."""
    with engine.connect() as conn:
        return has_table(conn, CLAIMS_TABLE, schema)


def _now() -> datetime:
    return datetime.now(UTC)


def _contention(engine: Engine, exc: Exception) -> bool:
    """A duplicate key (``IntegrityError``) or a write conflict with a concurrent claimer, as the
    dialect recognises them (``Dialect.write_conflict``: DuckDB's optimistic concurrency, and
    fakesnow's unwrapped DuckDB errors out of ``commit()``); not a real error."""
    return isinstance(exc, IntegrityError) or dialect_of(engine).write_conflict(exc)


def _step(engine: Engine, fn: Callable[[], Any]) -> bool:
    """Run one short transaction; False when it lost a race with another claimer."""
    try:
        fn()
    except Exception as exc:
        if not _contention(engine, exc):
            raise
        return False
    return True


class _Lease:
    """One claimer's attempts on one name, and its heartbeat once it holds it."""

    def __init__(self, engine: Engine, table: Table, name: str, seconds: float) -> None:
        self.engine, self.table, self.name, self.seconds = engine, table, name, seconds
        self.holder = uuid.uuid4().hex
        self._stop = threading.Event()
        self._beat: threading.Thread | None = None
        #: whether my row may be in the table (set before my insert, cleared once it is not)
        self.row = False

    def _is_mine(self) -> Any:
        t = self.table
        return and_(t.c.name == self.name, t.c.holder == self.holder)

    def _expire_dead(self) -> None:
        t = self.table
        with self.engine.begin() as conn:
            conn.execute(delete(t).where(t.c.name == self.name, t.c.expires_at < _now()))

    def _insert(self) -> None:
        t, now = self.table, _now()
        # FROM a one-row derived table: a SELECT with a WHERE but no FROM is not standard SQL
        one = select(literal(1).label("one")).subquery("ctxprec_one")
        row = (
            select(
                literal(self.name, String(64)),
                literal(self.holder, String(64)),
                literal(now + timedelta(seconds=self.seconds), DateTime(timezone=True)),
                literal(now, DateTime(timezone=True)),
            )
            .select_from(one)
            .where(~exists().where(t.c.name == self.name))
        )
        with self.engine.begin() as conn:
            conn.execute(insert(t).from_select(["name", "holder", "expires_at", "claimed_at"], row))

    def _live_holders(self) -> list[str]:
        t = self.table
        with self.engine.begin() as conn:
            rows = conn.execute(select(t.c.holder).where(t.c.name == self.name, t.c.expires_at >= _now()))
            return [r[0] for r in rows]

    def _withdraw(self) -> bool:
        t = self.table
        for attempt in range(5):

            def remove() -> None:
                with self.engine.begin() as conn:
                    conn.execute(delete(t).where(self._is_mine()))

            if _step(self.engine, remove):
                self.row = False
                return True
            time.sleep(0.02 * (attempt + 1) * (1 + random.random()))
        return False

    def attempt(self) -> bool | None:
        """One try: True (held), False (another holder has it) or None (free again: both
        claimers withdrew)."""
        _step(self.engine, self._expire_dead)
        self.row = True
        _step(self.engine, self._insert)
        holders = self._live_holders()
        self.row = self.holder in holders
        if holders == [self.holder]:
            return True
        if self.holder in holders:  # a rival's row got in as well: withdraw mine
            self._withdraw()
            holders = [h for h in self._live_holders() if h != self.holder]
        return False if holders else None

    def start_heartbeat(self) -> None:
        self._beat = threading.Thread(target=self._heartbeat, name=f"ctxprec-lease-{self.name}", daemon=True)
        self._beat.start()

    def _heartbeat(self) -> None:
        t = self.table
        while not self._stop.wait(self.seconds / 3):
            try:
                with self.engine.begin() as conn:
                    renewed = conn.execute(
                        update(t).where(self._is_mine()).values(expires_at=_now() + timedelta(seconds=self.seconds))
                    ).rowcount
            except Exception as exc:  # retried at the next beat; the lease has two more in hand
                log.warning("claim %s: renewing its lease failed (%s); retrying", self.name, type(exc).__name__)
                continue
            if renewed == 0:
                log.warning("claim %s: its lease had expired and was taken over by another claimer", self.name)
                return

    def withdraw_quietly(self) -> None:
        """Delete my row if it is there, logging (not raising) a failure: it then expires."""
        if not self.row:
            return
        try:
            if self._withdraw():
                return
        except Exception as exc:
            log.warning("claim %s: deleting its row failed (%s)", self.name, type(exc).__name__)
        log.warning("claim %s: its row could not be deleted; it expires with its lease", self.name)

    def release(self) -> None:
        self._stop.set()
        if self._beat is not None:
            self._beat.join()
        self.withdraw_quietly()


@contextmanager
def lease_claim(
    engine: Engine,
    name: str,
    *,
    wait: bool,
    schema: str | None = None,
    lease: float | None = None,
    heartbeat: bool = True,
) -> Iterator[bool]:
    """Hold the claim row ``name`` (a key from :func:`lease_name`) for the ``with`` block;
    yields whether it was obtained (always True with ``wait=True``). ``lease``: seconds (default
    :func:`lease_seconds`); ``heartbeat=False`` never renews it (tests: a holder that dies)."""
    seconds = lease_seconds(lease)
    table = ensure_claims_table(engine, schema)
    claim = _Lease(engine, table, name, seconds)
    try:
        got = _acquire(claim, wait=wait)
    except BaseException:
        claim.withdraw_quietly()  # an error or an interrupt between the insert and the decision
        raise
    if not got:
        claim.withdraw_quietly()  # a row whose withdrawal lost every race would block the name
        yield False
        return
    if heartbeat:
        claim.start_heartbeat()
    try:
        yield True
    finally:
        claim.release()


def _acquire(claim: _Lease, *, wait: bool) -> bool:
    free_retries = 0
    while True:
        got = claim.attempt()
        if got:
            return True
        if got is None and free_retries < _FREE_RETRIES:
            free_retries += 1  # no holder left: try again at once, after a little jitter
            time.sleep(random.random() * 0.05)
            continue
        if not wait:
            return False
        free_retries = 0
        time.sleep(POLL_SECONDS * (1 + random.random()))
