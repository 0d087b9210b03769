"""Claims on chunks, so two processes scoring the same partition never pay for a row twice.

On PostgreSQL a chunk is claimed with a session-level advisory lock keyed by a 64-bit hash of
(source table, metric, judge model, prompt version, partition, chunk bounds), held on a connection
of its own from before the chunk's rows are read until its write has committed. A second process
reaching the same chunk either waits (``wait=True``: it then finds the rows scored and skips them)
or is told the chunk is taken (``wait=False``: it scores other chunks first). A killed process's
session ends, and its locks with it. MySQL / MariaDB: the same with the server's named locks
(``GET_LOCK`` / ``RELEASE_LOCK``, also held by the session; the name is the key in hex, well under
their 64-character limit). DuckDB and Snowflake, which have neither: a lease, a row of the
``ctxprec_claims`` table in the output schema renewed by a heartbeat while held
(``warehouse/lease_claims.py``; a killed process's lease expires). Other backends: every claim
succeeds at once (SQLite writers queue on the database lock; their judging is not coordinated).
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy import func, select
from sqlalchemy.engine import Engine

from .dialects import for_dialect
from .lease_claims import lease_claim, lease_name

__all__ = ["chunk_claim", "claim_key"]


def claim_key(name: str) -> int:
    """The signed 64-bit advisory-lock key of a claim name."""
    return int.from_bytes(hashlib.blake2b(name.encode("utf-8"), digest_size=8).digest(), "big", signed=True)


@contextmanager
def chunk_claim(
    engine: Engine, name: str, *, wait: bool, schema: str | None = None, lease: float | None = None
) -> Iterator[bool]:
    """Hold the claim ``name`` for the ``with`` block; yields whether it was obtained (always
    True with ``wait=True``). ``schema``: where a lease's ``ctxprec_claims`` table lives (the
    output schema); ``lease``: its length in seconds (default
    ``lease_claims.DEFAULT_LEASE_SECONDS``). Both matter only to dialects whose claims are leases."""
    kind = for_dialect(engine.dialect.name).claims
    if kind == "lease":
        with lease_claim(engine, lease_name(claim_key(name)), wait=wait, schema=schema, lease=lease) as got:
            yield got
        return
    if kind == "named_lock":
        with _named_lock(engine, name, wait=wait) as got:
            yield got
        return
    if kind != "advisory":
        yield True
        return
    key = claim_key(name)
    # a session lock on a connection in autocommit mode: no transaction is ever open on it, and
    # taking and releasing the claim is one round trip each (no BEGIN / COMMIT around them)
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        if wait:
            conn.execute(select(func.pg_advisory_lock(key)))
            got = True
        else:
            got = bool(conn.execute(select(func.pg_try_advisory_lock(key))).scalar_one())
        try:
            yield got
        finally:
            if got:
                conn.execute(select(func.pg_advisory_unlock(key)))


#: seconds a waiting MySQL claim waits (GET_LOCK has no portable "forever": a year is)
_MYSQL_WAIT = 365 * 24 * 3600


@contextmanager
def _named_lock(engine: Engine, name: str, *, wait: bool) -> Iterator[bool]:
    lock = f"ctxprec:{claim_key(name) & (2**64 - 1):016x}"
    with engine.connect().execution_options(isolation_level="AUTOCOMMIT") as conn:
        got = conn.execute(select(func.get_lock(lock, _MYSQL_WAIT if wait else 0))).scalar_one() == 1
        try:
            yield got
        finally:
            if got:
                conn.execute(select(func.release_lock(lock)))
