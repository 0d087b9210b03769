"""ClickHouse, in process: chDB (ClickHouse 26.9 as a library) through clickhouse-connect's
SQLAlchemy dialect (``clickhousedb://`` with ``interface=chdb``), one data directory per
warehouse. The directory is one process's at a time: the suite closes this process's engines
(``Warehouse.released``) while a ``ctxprec`` subprocess works on it.

Source tables are ``MergeTree`` tables (ClickHouse needs a table engine) with ClickHouse's own
column types (``DateTime64(6)`` keeps microseconds, ``Nullable`` where a column takes NULL).
A non-UTC session: the connection's ``session_timezone`` setting (``ch_session_timezone`` in the
URL). chDB runs without users or grants: no SELECT-only account."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa

from . import Backend, Warehouse, release_engines

SESSION_TIME_ZONE = "Asia/Kolkata"


def _ch(name: str) -> sa.types.TypeEngine:
    from clickhouse_connect.cc_sqlalchemy.datatypes.base import sqla_type_from_name

    return sqla_type_from_name(name)


def _require_driver() -> None:
    try:
        import chdb  # noqa: F401
        import clickhouse_connect  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"chdb / clickhouse-connect not installed (make venv installs both): {exc}")


class ClickHouseBackend(Backend):
    id = "clickhouse"
    lacks = {"select_only": "chDB (ClickHouse in process) has no users or grants"}

    def __init__(self, base: Path) -> None:
        self.base = base

    @property
    def types(self) -> dict:  # type: ignore[override]
        return {
            "text": _ch("String"),
            "integer": _ch("Int64"),
            "decimal": _ch("Decimal(38, 12)"),
            "float": _ch("Float64"),
            "uuid": _ch("UUID"),
            "timestamp": _ch("Nullable(DateTime64(6))"),
            "timestamptz": _ch("Nullable(DateTime64(6, 'UTC'))"),
            "json": _ch("Nullable(String)"),
            "label": _ch("Nullable(String)"),
        }

    @classmethod
    def start(cls, request: pytest.FixtureRequest) -> ClickHouseBackend:
        _require_driver()
        base = Path(tempfile.mkdtemp(prefix="ctxprec-conformance-chdb-"))
        request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
        return cls(base)

    @contextmanager
    def database(self) -> Iterator[Warehouse]:
        directory = Path(tempfile.mkdtemp(dir=self.base))
        try:
            yield Warehouse(self, f"clickhousedb:///?interface=chdb&path={directory}", handle=directory)
        finally:
            release_engines()
            shutil.rmtree(directory, ignore_errors=True)

    def create_engine(self, url: str) -> sa.Engine:
        """The test reads what a ClickHouse reader should: each key's latest row (``final``)."""
        return sa.create_engine(sa.engine.make_url(url).update_query_dict({"ch_final": "1"}))

    def create_tables(self, engine: sa.Engine, metadata: sa.MetaData) -> None:
        from clickhouse_connect.cc_sqlalchemy.ddl.tableengine import MergeTree

        for table in metadata.sorted_tables:
            key = [c.name for c in table.primary_key.columns]
            table.engine = MergeTree(  # type: ignore[attr-defined]
                order_by=", ".join(key) if key else "tuple()",
                settings={"enable_block_number_column": 1, "enable_block_offset_column": 1},  # UPDATE
            )
        metadata.create_all(engine)

    @contextmanager
    def time_zone(self, wh: Warehouse) -> Iterator[str]:
        release_engines()
        try:
            url = sa.engine.make_url(wh.url).update_query_dict({"ch_session_timezone": SESSION_TIME_ZONE})
            yield url.render_as_string(hide_password=False)
        finally:
            release_engines()

    def current_time_zones(self, url: str) -> list[str]:
        engine = sa.create_engine(url)
        try:
            with engine.connect() as conn:
                session = conn.exec_driver_sql("SELECT timezone()").scalar_one()
        finally:
            engine.dispose()
        return [f"session {session}"]
