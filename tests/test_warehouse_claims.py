"""Chunk claims on a real PostgreSQL server: a session-level advisory lock held on a connection of
its own, which never keeps a transaction open and goes back to the pool as it came."""

from __future__ import annotations

import sqlalchemy as sa

from ctxprec_ops.warehouse.claims import chunk_claim, claim_key
from ctxprec_ops.warehouse.engine import get_engine


def _advisory_holders(engine: sa.Engine, key: int) -> list[tuple[int, str]]:
    """(pid, state) of the sessions holding advisory lock ``key`` (a bigint key is split in two)."""
    with engine.connect() as conn:
        return [
            (r.pid, r.state)
            for r in conn.execute(
                sa.text(
                    "SELECT l.pid, a.state FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid "
                    "WHERE l.locktype = 'advisory' AND l.granted "
                    "AND ((l.classid::bigint << 32) | l.objid::bigint) = :k"
                ),
                {"k": key},
            )
        ]


def test_a_claim_holds_its_lock_in_no_transaction_and_releases_it(pg_url):
    engine = get_engine(pg_url)
    key = claim_key("claims-test")
    with chunk_claim(engine, "claims-test", wait=False) as got:
        assert got is True
        holders = _advisory_holders(engine, key)
        # one session holds it, and that session is idle, not "idle in transaction"
        assert [state for _, state in holders] == ["idle"]
        with chunk_claim(engine, "claims-test", wait=False) as second:
            assert second is False  # taken: another session is told so at once
        assert len(_advisory_holders(engine, key)) == 1
    assert _advisory_holders(engine, key) == []


def test_a_pooled_connection_used_for_a_claim_comes_back_transactional(pg_url):
    """The claim runs its connection in autocommit mode; the pool must hand the same connection
    out again as an ordinary one, whose work a rollback undoes."""
    engine = get_engine(pg_url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE IF NOT EXISTS claims_probe (x int)"))
    for _ in range(3):  # the pool holds a few connections: every one of them has been a claim's
        with chunk_claim(engine, "claims-pool", wait=True):
            pass
    with engine.connect() as conn:
        conn.execute(sa.text("INSERT INTO claims_probe VALUES (1)"))
        assert conn.in_transaction()
        level = conn.execute(sa.text("SHOW transaction_isolation")).scalar_one()
        conn.rollback()
    assert level == "read committed"
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM claims_probe")).scalar_one() == 0
