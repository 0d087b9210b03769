"""Chunk claims as leases (``warehouse/lease_claims.py``) on DuckDB and on Snowflake emulated by
fakesnow: one holder at a time, a released or expired claim is taken over, a waiting claimer
blocks until the holder releases, the heartbeat keeps a lease alive, and without an enforced
primary key (as on Snowflake) racing claimers still end with one holder."""

from __future__ import annotations

import threading
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from ctxprec_ops.warehouse.claims import chunk_claim, claim_key
from ctxprec_ops.warehouse.dialects import for_dialect
from ctxprec_ops.warehouse.engine import get_engine
from ctxprec_ops.warehouse.lease_claims import (
    CLAIMS_TABLE,
    DEFAULT_LEASE_SECONDS,
    LeaseSettingError,
    claims_table,
    lease_claim,
    lease_name,
    lease_seconds,
)


@pytest.fixture(params=["duckdb", "snowflake"])
def url(request) -> str:
    """A fresh DuckDB file, or a fresh fakesnow database (its patch active for the whole test)."""
    return str(request.getfixturevalue(f"{request.param}_url"))


def _name() -> str:
    return f"lease-test-{uuid.uuid4().hex[:8]}"


def _rows(engine: sa.Engine, name: str) -> list[tuple[str, datetime]]:
    t = claims_table(None)
    with engine.connect() as conn:
        key = lease_name(claim_key(name))
        return [(r.holder, r.expires_at) for r in conn.execute(sa.select(t).where(t.c.name == key))]


def _race(engine: sa.Engine, name: str, n: int = 2) -> list[bool]:
    """``n`` threads claim ``name`` with ``wait=False`` at the same moment; each stays in its
    ``with`` block until all have decided, so the winner holds while the others look."""
    start, decided = threading.Barrier(n), threading.Barrier(n)
    results: list[bool] = []
    errors: list[BaseException] = []

    def claimer() -> None:
        try:
            start.wait(timeout=60)
            with chunk_claim(engine, name, wait=False) as got:
                results.append(got)
                decided.wait(timeout=60)
        except BaseException as exc:  # reported by the test, not lost in the thread
            errors.append(exc)
            decided.abort()

    threads = [threading.Thread(target=claimer) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not errors, errors
    return results


def test_duckdb_and_snowflake_claim_with_leases():
    assert for_dialect("duckdb").claims == "lease" and for_dialect("snowflake").claims == "lease"


def test_racing_claimers_one_wins_and_a_released_claim_is_taken_again(url):
    engine = get_engine(url)
    name = _name()
    assert sorted(_race(engine, name)) == [False, True]
    assert _rows(engine, name) == []  # the winner's row went with its release
    with chunk_claim(engine, name, wait=False) as got:
        assert got is True
        assert len(_rows(engine, name)) == 1
    with chunk_claim(engine, name, wait=False) as again:
        assert again is True


def test_a_claim_is_taken_only_by_one_holder_at_a_time_and_other_names_are_free(url):
    engine = get_engine(url)
    a, b = _name(), _name()
    with chunk_claim(engine, a, wait=False) as first:
        assert first is True
        with chunk_claim(engine, a, wait=False) as second:
            assert second is False
        with chunk_claim(engine, b, wait=False) as other:
            assert other is True
    assert _rows(engine, a) == [] and _rows(engine, b) == []


def test_a_dead_holders_expired_lease_is_taken_over(url):
    engine = get_engine(url)
    name = _name()
    with chunk_claim(engine, name, wait=False):  # creates the table
        pass
    past = datetime.now(UTC) - timedelta(seconds=5)
    with engine.begin() as conn:  # a holder killed after its lease ran out left its row behind
        conn.execute(
            sa.insert(claims_table(None)).values(
                name=lease_name(claim_key(name)), holder="f" * 32, expires_at=past, claimed_at=past
            )
        )
    with chunk_claim(engine, name, wait=False) as got:
        assert got is True
        assert [h for h, _ in _rows(engine, name)] != ["f" * 32]


def test_a_holder_without_heartbeat_loses_its_lease_once_it_expires(url):
    engine = get_engine(url)
    name = _name()
    key = lease_name(claim_key(name))
    with lease_claim(engine, key, wait=False, lease=1, heartbeat=False) as held:
        assert held is True
        with chunk_claim(engine, name, wait=False) as early:
            assert early is False  # the lease still runs
        time.sleep(1.5)
        with chunk_claim(engine, name, wait=False) as late:
            assert late is True  # expired: taken over
            # the first holder leaving now must not delete the new holder's row
            taker = [h for h, _ in _rows(engine, name)]
    assert [h for h, _ in _rows(engine, name)] == []
    assert len(taker) == 1


def test_the_dead_holders_release_leaves_the_new_holders_row(url):
    engine = get_engine(url)
    name = _name()
    key = lease_name(claim_key(name))
    stale = lease_claim(engine, key, wait=False, lease=1, heartbeat=False)
    assert stale.__enter__() is True
    time.sleep(1.5)
    with chunk_claim(engine, name, wait=False) as got:
        assert got is True
        mine = _rows(engine, name)
        stale.__exit__(None, None, None)  # the old holder comes back and releases
        assert _rows(engine, name) == mine
        with chunk_claim(engine, name, wait=False) as third:
            assert third is False


def test_a_waiting_claimer_blocks_until_the_holder_releases(url):
    engine = get_engine(url)
    name = _name()
    order: list[str] = []
    waiting, got = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def waiter() -> None:
        try:
            waiting.set()
            with chunk_claim(engine, name, wait=True) as held:
                order.append(f"waiter got {held}")
                got.set()
        except BaseException as exc:
            errors.append(exc)
            got.set()

    with chunk_claim(engine, name, wait=False) as first:
        assert first is True
        thread = threading.Thread(target=waiter)
        thread.start()
        assert waiting.wait(timeout=30)
        assert not got.wait(timeout=1.0)  # still blocked while the claim is held
        order.append("holder releases")
    assert got.wait(timeout=60)
    thread.join(timeout=60)
    assert not errors, errors
    assert order == ["holder releases", "waiter got True"]


def test_a_waiting_claimer_takes_over_from_a_holder_that_died(url):
    engine = get_engine(url)
    name = _name()
    dead = lease_claim(engine, lease_name(claim_key(name)), wait=False, lease=1, heartbeat=False)
    assert dead.__enter__() is True  # and never renews nor releases it
    try:
        with chunk_claim(engine, name, wait=True) as got:
            assert got is True
            assert len(_rows(engine, name)) == 1
    finally:
        dead.__exit__(None, None, None)
    assert _rows(engine, name) == []


def test_the_heartbeat_keeps_a_short_lease_alive(url):
    engine = get_engine(url)
    name = _name()
    with chunk_claim(engine, name, wait=False, lease=1) as got:
        assert got is True
        time.sleep(2.5)  # two and a half lease lengths: only renewals keep it
        with chunk_claim(engine, name, wait=False) as other:
            assert other is False
        [(_, expires)] = _rows(engine, name)
        if expires.tzinfo is None:  # a driver returning naive UTC
            expires = expires.replace(tzinfo=UTC)
        assert expires > datetime.now(UTC)
    assert _rows(engine, name) == []


def test_without_an_enforced_primary_key_racing_claimers_still_have_one_winner(url):
    """Snowflake does not enforce primary keys: a table made without one (here on purpose)
    lets both claimers' inserts through, and the read after the insert must settle it."""
    engine = get_engine(url)
    with engine.begin() as conn:
        conn.execute(
            sa.text(
                f"CREATE TABLE {CLAIMS_TABLE} (name VARCHAR(64) NOT NULL, holder VARCHAR(64) NOT NULL, "
                "expires_at TIMESTAMP WITH TIME ZONE NOT NULL, claimed_at TIMESTAMP WITH TIME ZONE)"
            )
        )
    for round_ in range(20):
        name = f"nopk-{round_}-{uuid.uuid4().hex[:6]}"
        results = _race(engine, name)
        assert sorted(results) == [False, True], (round_, results)
        assert _rows(engine, name) == []
    for round_ in range(5):  # more claimers than two
        results = _race(engine, f"nopk4-{round_}-{uuid.uuid4().hex[:6]}", n=4)
        assert sorted(results) == [False, False, False, True], (round_, results)


def test_the_claims_table_lives_in_the_given_schema(duckdb_url):
    """... and one in another schema is not taken for the default schema's (duckdb-engine's
    ``has_table`` without a schema finds a table of that name in any schema)."""
    engine = get_engine(duckdb_url)
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE SCHEMA out_tables"))

    def tables() -> set[str]:
        with engine.connect() as conn:
            query = "SELECT table_schema FROM information_schema.tables WHERE table_name = :t"
            return set(conn.execute(sa.text(query), {"t": CLAIMS_TABLE}).scalars())

    with chunk_claim(engine, _name(), wait=False, schema="out_tables") as got:
        assert got is True
    assert tables() == {"out_tables"}
    with chunk_claim(engine, _name(), wait=False) as got:
        assert got is True
    assert tables() == {"out_tables", "main"}


def test_the_lease_length():
    assert lease_seconds() == DEFAULT_LEASE_SECONDS
    assert lease_seconds(30) == 30.0 and lease_seconds("2") == 2.0
    for bad in (0, -5, "ten", "nan", "inf"):
        with pytest.raises(LeaseSettingError, match="lease must be a positive number of seconds"):
            lease_seconds(bad)


def test_the_lease_setting_reaches_the_claim_and_a_bad_one_names_its_variable(duckdb_url):
    """CTXPREC_CLAIM_LEASE_SECONDS is read by the configuration and reaches the chunk claim through
    ``PipelineConfig.claim_lease_seconds``; a bad value stops the run before any claim."""
    from ctxprec_ops.config import Settings, SettingsError

    assert Settings.from_env({"CTXPREC_CLAIM_LEASE_SECONDS": "30"}).pipeline_config().claim_lease_seconds == 30.0
    assert Settings.from_env({}).pipeline_config().claim_lease_seconds is None  # the warehouse's default
    for bad in ("0", "ten minutes", "nan"):
        with pytest.raises(SettingsError, match="CTXPREC_CLAIM_LEASE_SECONDS must be"):
            Settings.from_env({"CTXPREC_CLAIM_LEASE_SECONDS": bad})
    engine = get_engine(duckdb_url)
    with pytest.raises(LeaseSettingError, match="lease must be a positive number of seconds"):
        with chunk_claim(engine, _name(), wait=False, lease=0):
            pass
