"""DuckDB: a database file per warehouse (duckdb-engine), embedded like SQLite. A file is open in
one process at a time, and in one configuration per process: the suite closes this process's
engines before it opens the file otherwise. Non-UTC time zone: the connection's ``TimeZone``
(DuckDB has no server); SELECT-only access: the file opened with ``access_mode=read_only``."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from . import Backend, Warehouse, release_engines

SESSION_TIME_ZONE = "Asia/Kolkata"


def _require_driver() -> None:
    try:
        import duckdb  # noqa: F401
        import duckdb_engine  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"duckdb / duckdb-engine not installed (make venv installs both): {exc}")


class DuckDbBackend(Backend):
    id = "duckdb"

    def __init__(self, base: Path) -> None:
        self.base = base

    @classmethod
    def start(cls, request: pytest.FixtureRequest) -> DuckDbBackend:
        _require_driver()
        base = Path(tempfile.mkdtemp(prefix="ctxprec-conformance-duckdb-"))
        request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
        return cls(base)

    @contextmanager
    def database(self) -> Iterator[Warehouse]:
        directory = Path(tempfile.mkdtemp(dir=self.base))
        try:
            yield Warehouse(self, f"duckdb:///{directory / 'warehouse.duckdb'}", handle=directory)
        finally:
            release_engines()
            shutil.rmtree(directory, ignore_errors=True)

    def insert(self, engine: sa.Engine, table: sa.Table, rows: list[dict[str, Any]]) -> None:
        """Through the driver's own parameters: duckdb-engine's ``Numeric`` binding goes through a
        float (a 26-digit DECIMAL id would be stored rounded)."""
        quote = engine.dialect.identifier_preparer
        columns = list(table.c.keys())
        sql = (
            f"INSERT INTO {quote.format_table(table)} ({', '.join(quote.quote(c) for c in columns)}) "
            f"VALUES ({', '.join('?' for _ in columns)})"
        )
        with engine.begin() as conn:
            conn.exec_driver_sql(sql, [tuple(r.get(c) for c in columns) for r in rows])

    @contextmanager
    def _configured(self, wh: Warehouse, **config: str) -> Iterator[str]:
        release_engines()  # the file in another configuration: no other connection of this process
        try:
            yield sa.engine.make_url(wh.url).update_query_dict(config).render_as_string(hide_password=False)
        finally:
            release_engines()

    def time_zone(self, wh: Warehouse) -> AbstractContextManager[str]:
        # lower case: duckdb-engine runs ``SET timezone = ...`` once connected (the ICU extension
        # is loaded by then), where ``TimeZone`` would go to the start-up configuration (too early)
        return self._configured(wh, timezone=SESSION_TIME_ZONE)

    def current_time_zones(self, url: str) -> list[str]:
        engine = sa.create_engine(url)
        try:
            with engine.connect() as conn:
                session = conn.exec_driver_sql("SELECT current_setting('TimeZone')").scalar_one()
        finally:
            engine.dispose()
        return [f"session {session}"]

    def select_only(self, wh: Warehouse) -> AbstractContextManager[str]:
        return self._configured(wh, access_mode="read_only")
