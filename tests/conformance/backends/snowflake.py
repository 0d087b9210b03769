"""Snowflake, emulated by ``fakesnow`` (DuckDB underneath): one database per warehouse, persisted
in a directory of its own so that every process (this one, a ``ctxprec`` subprocess started
through ``tests/fixtures/fakesnow_cli.py``) sees the same tables. The emulator holds the database
file open while its patch is active: the suite lifts it (``Warehouse.released``) while another
process works. fakesnow emulates no session ``TIMEZONE`` and no roles or grants."""

from __future__ import annotations

import shutil
import sys
import tempfile
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.fixtures.fakesnow_env import FAKESNOW_CLI

from . import Backend, Warehouse, release_engines


def _require_emulator() -> None:
    try:
        import fakesnow  # noqa: F401
        import snowflake.sqlalchemy  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"fakesnow / snowflake-sqlalchemy not installed (make venv installs both): {exc}")


class SnowflakeBackend(Backend):
    id = "snowflake"
    lacks = {
        "time_zone": "fakesnow runs every session in UTC (it emulates no TIMEZONE parameter)",
        "select_only": "fakesnow emulates no roles or grants",
        "long_ids": "log_id is VARCHAR(255) in the tables ctxprec creates on Snowflake, which enforces string "
        "lengths (fakesnow does not; the product refuses longer ids as Snowflake would)",
    }

    def __init__(self, base: Path) -> None:
        self.base = base

    @property
    def types(self) -> dict:  # type: ignore[override]
        from snowflake.sqlalchemy import TIMESTAMP_NTZ, TIMESTAMP_TZ

        return {"uuid": sa.String(36), "timestamp": TIMESTAMP_NTZ(), "timestamptz": TIMESTAMP_TZ()}

    @classmethod
    def start(cls, request: pytest.FixtureRequest) -> SnowflakeBackend:
        _require_emulator()
        base = Path(tempfile.mkdtemp(prefix="ctxprec-conformance-fakesnow-"))
        request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
        return cls(base)

    @contextmanager
    def database(self) -> Iterator[Warehouse]:
        directory = Path(tempfile.mkdtemp(dir=self.base))
        name = f"DB_{uuid.uuid4().hex[:8]}".upper()
        try:
            yield Warehouse(self, f"snowflake://user:pass@account/{name}/PUBLIC", handle=directory)
        finally:
            release_engines()
            shutil.rmtree(directory, ignore_errors=True)

    @contextmanager
    def session(self, wh: Warehouse) -> Iterator[None]:
        import fakesnow

        with fakesnow.patch(db_path=wh.handle, create_database_on_connect=True, create_schema_on_connect=True):
            yield

    def cli(self, wh: Warehouse, *args: str) -> list[str]:
        return [sys.executable, str(FAKESNOW_CLI), str(wh.handle), *args]
