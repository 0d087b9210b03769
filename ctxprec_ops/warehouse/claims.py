"""Claims on chunks, so two processes scoring the same partition never pay for a row twice.

A claim is named by what it covers (source table, metric, judge model, prompt version, partition,
chunk bounds) and keyed by a 64-bit hash of that name; how it is held is the warehouse family's
(``Dialect.chunk_claim``, ``warehouse/dialects/``): a session-level advisory lock on PostgreSQL,
a named lock (``GET_LOCK``) on MySQL / MariaDB, a lease row renewed while held on DuckDB and
Snowflake (``warehouse/lease_claims.py``), none elsewhere (every claim succeeds at once: SQLite
writers queue on the database lock). A claim is held from before the chunk's rows are read until
its write has committed. A second process reaching the same chunk either waits (``wait=True``: it
then finds the rows scored and skips them) or is told the chunk is taken (``wait=False``: it
scores other chunks first). A killed process's session ends, and its locks with it; its leases
expire.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager

from sqlalchemy.engine import Engine

from .dialects import dialect_of

__all__ = ["chunk_claim", "claim_key"]


def claim_key(name: str) -> int:
    """The signed 64-bit key of a claim name (PostgreSQL's advisory-lock key)."""
    return int.from_bytes(hashlib.blake2b(name.encode("utf-8"), digest_size=8).digest(), "big", signed=True)


@contextmanager
def chunk_claim(
    engine: Engine, name: str, *, wait: bool, schema: str | None = None, lease: float | None = None
) -> Iterator[bool]:
    """Hold the claim ``name`` for the ``with`` block; yields whether it was obtained (always
    True with ``wait=True``). ``schema``: where a lease's ``ctxprec_claims`` table lives (the
    output schema); ``lease``: its length in seconds (default
    ``lease_claims.DEFAULT_LEASE_SECONDS``). Both matter only to families whose claims are leases."""
    with dialect_of(engine).chunk_claim(engine, name, claim_key(name), wait=wait, schema=schema, lease=lease) as got:
        yield got
