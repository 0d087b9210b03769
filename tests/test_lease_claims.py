"""Claims on the rows being judged (``warehouse/claims.py``, rows of ``ctxprec_claims``) on every
warehouse family: ids a live holder has claimed are left to it, racing claimers never both keep an
id (no enforced key needed), a claim ends with its chunk's write, and a holder that provably
cannot be alive is taken over at once — its process on this host has ended, its database session
has ended (PostgreSQL, MySQL), another process wrote a DuckDB file only one process can write —
while a holder that may be alive keeps its rows until its lease expires."""

from __future__ import annotations

import logging
import signal
import subprocess
import sys
import textwrap
import threading
import uuid
from datetime import timedelta

import pytest
import sqlalchemy as sa

from ctxprec_ops.warehouse.claims import RowClaims, claim_scope, id_hash
from ctxprec_ops.warehouse.dialects import for_dialect
from ctxprec_ops.warehouse.engine import get_engine, release_sqlite_files
from ctxprec_ops.warehouse.lease_claims import (
    CLAIMS_TABLE,
    DEFAULT_LEASE_SECONDS,
    LeaseSettingError,
    claims_table,
    ensure_claims_table,
    insert_claim,
    lease_seconds,
    now,
)
from tests.fixtures.isolation import clean_cwd, clean_env

FAMILIES = ["sqlite", "postgresql", "mariadb", "duckdb", "snowflake"]
#: families whose dead holders are known at once whatever host they ran on
KNOWN_AT_ONCE = {"advisory", "named_lock", "file_lock"}


def _url(request, tmp_path, family: str) -> str:
    if family == "sqlite":
        return f"sqlite:///{tmp_path / 'claims.db'}"
    return str(request.getfixturevalue(f"{'pg' if family == 'postgresql' else family}_url"))


@pytest.fixture(params=FAMILIES)
def url(request, tmp_path) -> str:
    return _url(request, tmp_path, request.param)


@pytest.fixture(params=[f for f in FAMILIES if f != "snowflake"])  # a subprocess cannot share the emulator
def shared_url(request, tmp_path) -> str:
    return _url(request, tmp_path, request.param)


def _scope() -> str:
    return claim_scope("claims-test", uuid.uuid4().hex)


def _ids(n: int, prefix: str = "row") -> list[str]:
    return [f"{prefix}-{i}" for i in range(n)]


def _foreign_row(engine: sa.Engine, scope: str, ids: list[str], *, host: str, pid: int, expires_in: float) -> str:
    """A claim row of a holder elsewhere (another host, or a process of this one), as its process
    would have written it; returns the holder's id."""
    holder = uuid.uuid4().hex
    at = now()
    insert_claim(
        engine,
        ensure_claims_table(engine),
        {
            "name": uuid.uuid4().hex,
            "holder": holder,
            "scope": scope,
            "run_id": "elsewhere-run",
            "host": host,
            "pid": pid,
            "process_start": 1.0,
            "claimed_at": at,
            "expires_at": at + timedelta(seconds=expires_in),
            "ids": "".join(id_hash(i) for i in ids),
        },
    )
    return holder


def test_ids_a_live_holder_has_claimed_are_left_to_it(url):
    engine = get_engine(url)
    scope = _scope()
    with RowClaims(engine, scope, run_id="first") as first, RowClaims(engine, scope, run_id="second") as second:
        mine = first.claim(_ids(6))
        assert mine.kept == _ids(6) and not mine.held
        theirs = second.claim(_ids(10))  # 0-5 are the first's: the second keeps 6-9
        assert theirs.kept == _ids(10)[6:]
        assert sorted(theirs.held) == _ids(6) and {h.run_id for h in theirs.held.values()} == {"first"}
        assert second.holders_of(_ids(3)).keys() == set(_ids(3))
        with engine.begin() as conn:  # the first's chunk is written: its claim ends with it
            first.release_in(conn, mine)
        assert second.holders_of(_ids(6)) == {}
        assert second.claim(_ids(6)).kept == _ids(6)
    with RowClaims(engine, scope, run_id="third") as third:  # ended holders' rows are gone
        assert third.claim(_ids(10)).kept == _ids(10)


def test_racing_claimers_never_both_keep_an_id(url):
    """Four holders claim the same ids at the same moment, many times: an id is kept by at most
    one of them (some may be kept by none: then they are claimed again later)."""
    engine = get_engine(url)
    scope = _scope()
    ids = _ids(40)
    holders = [RowClaims(engine, scope, run_id=f"racer-{i}") for i in range(4)]
    for h in holders:
        h.__enter__()
    try:
        for round_ in range(8):
            start = threading.Barrier(len(holders))
            kept: list[list[str]] = [[] for _ in holders]
            errors: list[BaseException] = []

            def race(i: int, start: threading.Barrier, kept: list[list[str]], errors: list[BaseException]) -> None:
                try:
                    start.wait(timeout=60)
                    kept[i] = holders[i].claim(ids).kept
                except BaseException as exc:
                    errors.append(exc)

            threads = [threading.Thread(target=race, args=(i, start, kept, errors)) for i in range(len(holders))]
            for t in threads:
                t.start()
            for t in threads:
                t.join(timeout=120)
            assert not errors, errors
            everything = [i for k in kept for i in k]
            assert len(everything) == len(set(everything)), f"round {round_}: an id kept twice"
            for h in holders:  # released, as a chunk's write would
                table = claims_table(None)
                with engine.begin() as conn:
                    conn.execute(sa.delete(table).where(table.c.holder == h.holder))
    finally:
        for h in holders:
            h.__exit__(None, None, None)


def test_a_holder_that_may_be_alive_keeps_its_rows_until_its_lease_expires(url):
    """A holder on another host is alive as far as its process can tell, unless the family knows
    better (its session lock is free; DuckDB's one writing process is this one): then its rows are
    taken over at once. An expired lease is taken over on every family."""
    engine = get_engine(url)
    scope = _scope()
    _foreign_row(engine, scope, _ids(4), host="another-host pid:[1]", pid=4242, expires_in=600)
    with RowClaims(engine, scope, run_id="mine") as mine:
        claim = mine.claim(_ids(4))
    if for_dialect(engine.dialect.name).claims in KNOWN_AT_ONCE:
        assert claim.kept == _ids(4)
    else:
        assert claim.kept == [] and {h.run_id for h in claim.held.values()} == {"elsewhere-run"}
    expired_scope = _scope()
    _foreign_row(engine, expired_scope, _ids(4), host="another-host pid:[1]", pid=4242, expires_in=-1)
    with RowClaims(engine, expired_scope, run_id="mine") as mine:
        assert mine.claim(_ids(4)).kept == _ids(4)


def test_the_heartbeat_keeps_a_short_lease_alive(url):
    engine = get_engine(url)
    scope = _scope()
    # 2 s: MySQL / MariaDB keep whole seconds of expires_at, which shortens a lease by up to 1 s
    with RowClaims(engine, scope, run_id="short", lease=2) as holder:
        assert holder.claim(_ids(3)).kept == _ids(3)
        threading.Event().wait(5)  # two and a half leases: only renewals keep it
        with RowClaims(engine, scope, run_id="other") as other:
            assert other.claim(_ids(3)).kept == []


_CLAIMER = textwrap.dedent(
    """
    import sys, time
    from ctxprec_ops.warehouse.claims import RowClaims
    from ctxprec_ops.warehouse.engine import get_engine
    url, scope = sys.argv[1], sys.argv[2]
    claims = RowClaims(get_engine(url), scope, run_id="killed-run").__enter__()
    assert claims.claim([f"row-{i}" for i in range(5)]).kept
    print("claimed", flush=True)
    time.sleep(600)
    """
)


def test_a_holder_killed_on_this_host_is_taken_over_at_once(shared_url, caplog):
    """A ``SIGKILL``ed process leaves its claim rows (and a lease of 600 s) behind: its pid on
    this host is free now, so they are taken over at the first look, naming why."""
    url = shared_url
    engine = get_engine(url)
    scope = _scope()
    ensure_claims_table(engine)
    release_sqlite_files()  # a DuckDB file: one process writes it at a time
    proc = subprocess.Popen(
        [sys.executable, "-c", _CLAIMER, url, scope], cwd=clean_cwd(), env=clean_env({}), stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == b"claimed"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
    engine = get_engine(url)
    with caplog.at_level(logging.WARNING, logger="ctxprec_ops.warehouse"), RowClaims(engine, scope, run_id="me") as me:
        assert me.claim(_ids(5)).kept == _ids(5)
    assert "run killed-run" in caplog.text and "has ended" in caplog.text, caplog.text


def test_an_earlier_versions_claims_table_gets_the_new_columns(tmp_path):
    """DuckDB and Snowflake warehouses hold the first version's table (a row per chunk, keyed by
    its name): it gets the new columns in place, and its rows are never read as claims."""
    engine = get_engine(f"sqlite:///{tmp_path / 'old.db'}")
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE {CLAIMS_TABLE} (name VARCHAR(64) PRIMARY KEY, holder VARCHAR(64) NOT NULL, "
            "expires_at TIMESTAMP NOT NULL, claimed_at TIMESTAMP)"
        )
        conn.exec_driver_sql(f"INSERT INTO {CLAIMS_TABLE} VALUES ('ctxprec:00ff', 'old', '2999-01-01', NULL)")
    with RowClaims(engine, _scope(), run_id="new") as claims:
        assert claims.claim(_ids(2)).kept == _ids(2)
    with engine.connect() as conn:
        columns = [r[1] for r in conn.exec_driver_sql(f"PRAGMA table_info({CLAIMS_TABLE})")]
        rows = conn.exec_driver_sql(f"SELECT name, holder FROM {CLAIMS_TABLE}").all()
    assert {"scope", "run_id", "host", "pid", "process_start", "ids"} <= set(columns)
    assert rows == [("ctxprec:00ff", "old")]


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

    with RowClaims(engine, _scope(), run_id="r", schema="out_tables") as claims:
        assert claims.claim(_ids(1)).kept == _ids(1)
    assert tables() == {"out_tables"}
    with RowClaims(engine, _scope(), run_id="r") as claims:
        assert claims.claim(_ids(1)).kept == _ids(1)
    assert tables() == {"out_tables", "main"}


def test_the_lease_length():
    assert lease_seconds() == DEFAULT_LEASE_SECONDS
    assert lease_seconds(30) == 30.0 and lease_seconds("2") == 2.0
    for bad in (0, -5, "ten", "nan", "inf"):
        with pytest.raises(LeaseSettingError, match="lease must be a positive number of seconds"):
            lease_seconds(bad)


def test_the_lease_setting_reaches_the_claims_and_a_bad_one_names_its_variable(duckdb_url):
    """CTXPREC_CLAIM_LEASE_SECONDS is read by the configuration and reaches the claims through
    ``PipelineConfig.claim_lease_seconds``; a bad value stops the run before any claim."""
    from ctxprec_ops.config import Settings, SettingsError

    assert Settings.from_env({"CTXPREC_CLAIM_LEASE_SECONDS": "30"}).pipeline_config().claim_lease_seconds == 30.0
    assert Settings.from_env({}).pipeline_config().claim_lease_seconds is None  # the warehouse's default
    for bad in ("0", "ten minutes", "nan"):
        with pytest.raises(SettingsError, match="CTXPREC_CLAIM_LEASE_SECONDS must be"):
            Settings.from_env({"CTXPREC_CLAIM_LEASE_SECONDS": bad})
    with pytest.raises(LeaseSettingError, match="lease must be a positive number of seconds"):
        RowClaims(get_engine(duckdb_url), _scope(), run_id="r", lease=0)
