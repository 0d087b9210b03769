"""Engines: URL normalisation, secret-free display, SQLite settings for concurrent workers."""

from __future__ import annotations

import threading

import pytest
import sqlalchemy as sa

from ctxprec_ops.warehouse.dialects.sqlite.session import CACHE_KIB, WAL_AUTOCHECKPOINT_PAGES
from ctxprec_ops.warehouse.engine import display_url, get_engine, normalize_url, write_transaction


def test_postgres_urls_use_psycopg3_and_passwords_never_show():
    for raw in ("postgresql://u:s3cretpw@db.example/wh", "postgres://u:s3cretpw@db.example/wh"):
        u = normalize_url(raw)
        assert u.drivername == "postgresql+psycopg" and u.password == "s3cretpw"
        assert "s3cretpw" not in display_url(u) and "s3cretpw" not in display_url(raw)
    assert normalize_url("postgresql+psycopg2://u@h/db").drivername == "postgresql+psycopg2"  # explicit driver kept
    with pytest.raises(ValueError) as exc:
        normalize_url("::not a url:s3cretpw@")
    assert "s3cretpw" not in str(exc.value)


def test_sqlite_engine_settings_and_cache(tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    assert get_engine(url) is engine and get_engine(engine) is engine
    with engine.connect() as conn:
        assert conn.exec_driver_sql("PRAGMA journal_mode").scalar_one() == "wal"
        assert conn.exec_driver_sql("PRAGMA busy_timeout").scalar_one() >= 10_000
        assert conn.exec_driver_sql("PRAGMA synchronous").scalar_one() == 1  # NORMAL
        assert conn.exec_driver_sql("PRAGMA cache_size").scalar_one() == -CACHE_KIB
        assert conn.exec_driver_sql("PRAGMA wal_autocheckpoint").scalar_one() == WAL_AUTOCHECKPOINT_PAGES


def test_concurrent_sqlite_writers_queue_instead_of_failing(tmp_path):
    engine = get_engine(f"sqlite:///{tmp_path / 'wh.db'}")
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE counter (n INTEGER)")
        conn.exec_driver_sql("INSERT INTO counter VALUES (0)")
    errors: list[BaseException] = []

    def bump() -> None:
        try:
            for _ in range(25):
                with write_transaction(engine) as conn:  # read-then-write: needs BEGIN IMMEDIATE
                    n = conn.exec_driver_sql("SELECT n FROM counter").scalar_one()
                    conn.execute(sa.text("UPDATE counter SET n = :n"), {"n": n + 1})
        except BaseException as exc:  # pragma: no cover - the assertion below shows it
            errors.append(exc)

    threads = [threading.Thread(target=bump) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT n FROM counter").scalar_one() == 100
