"""A claim holder's sign of life on a real PostgreSQL server: a session-level advisory lock held on
a connection of its own while the holder runs, which never keeps a transaction open and goes back
to the pool as it came; a holder whose lock is free has ended."""

from __future__ import annotations

import sqlalchemy as sa

from ctxprec_ops.warehouse.claims import RowClaims, claim_key
from ctxprec_ops.warehouse.dialects import for_dialect
from ctxprec_ops.warehouse.engine import get_engine
from ctxprec_ops.warehouse.holders import ClaimHolder
from ctxprec_ops.warehouse.lease_claims import now


def _key(holder: str) -> int:
    return claim_key(f"ctxprec-claim-holder:{holder}")


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


def test_a_holders_lock_is_held_in_no_transaction_and_released(pg_url):
    engine = get_engine(pg_url)
    family = for_dialect("postgresql")
    with RowClaims(engine, "scope", run_id="r") as claims:
        holders = _advisory_holders(engine, _key(claims.holder))
        # one session holds it, and that session is idle, not "idle in transaction"
        assert [state for _, state in holders] == ["idle"]
        me = ClaimHolder(claims.holder, "r", None, None, now())
        assert family.claim_holder_gone(engine, me) is None  # its lock is held: alive
        assert len(_advisory_holders(engine, _key(claims.holder))) == 1  # asking took nothing
    assert _advisory_holders(engine, _key(claims.holder)) == []
    assert family.claim_holder_gone(engine, me) == "its PostgreSQL session has ended"


def test_a_pooled_connection_used_for_a_holders_lock_comes_back_transactional(pg_url):
    """The lock's connection runs in autocommit mode; the pool must hand the same connection
    out again as an ordinary one, whose work a rollback undoes."""
    engine = get_engine(pg_url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE IF NOT EXISTS claims_probe (x int)"))
    for _ in range(3):  # the pool holds a few connections: every one of them has held a lock
        with RowClaims(engine, "scope", run_id="r"):
            pass
    with engine.connect() as conn:
        conn.execute(sa.text("INSERT INTO claims_probe VALUES (1)"))
        assert conn.in_transaction()
        level = conn.execute(sa.text("SHOW transaction_isolation")).scalar_one()
        conn.rollback()
    assert level == "read committed"
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM claims_probe")).scalar_one() == 0
