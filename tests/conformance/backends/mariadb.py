"""MariaDB: the throwaway server of ``tests/fixtures/mariadb.py`` (Debian's defaults: utf8mb4,
a case- and accent-insensitive default collation, strict mode), one ``CREATE DATABASE`` per
warehouse.

Exact text ids are a binary-collated column (``utf8mb4_bin``), timestamps keep microseconds
(``DATETIME(6)``), the time-zone-aware column is ``TIMESTAMP(6)`` (stored as UTC, shown in the
session's zone). Non-UTC time zones: the server's (``SET GLOBAL time_zone``, what
``default_time_zone`` sets at start, for the duration of the block) and the session's
(``init_command``). SELECT-only access: a user granted ``SELECT`` on the database.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from typing import Any

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects import mysql

from tests.fixtures.mariadb import MariaDbServer

from . import Backend, Warehouse, release_engines

#: offsets (the server has no time zone tables loaded): a western server, an eastern session
SERVER_TIME_ZONE = "-05:00"
SESSION_TIME_ZONE = "+05:30"


class MariaDbBackend(Backend):
    id = "mariadb"
    types = {
        "text": sa.String(600, collation="utf8mb4_bin"),
        "uuid": sa.UUID(),
        "timestamp": mysql.DATETIME(fsp=6),
        "timestamptz": mysql.TIMESTAMP(fsp=6),
    }
    lacks = {
        "long_ids": "log_id is VARCHAR(255) here: InnoDB caps a key at 3,072 bytes (docs/warehouses.md)",
    }

    def __init__(self, server: MariaDbServer) -> None:
        self.server = server

    @classmethod
    def start(cls, request: pytest.FixtureRequest) -> MariaDbBackend:
        return cls(request.getfixturevalue("mariadb_server"))

    @contextmanager
    def database(self) -> Iterator[Warehouse]:
        name = self.server.create_database("conf")
        try:
            yield Warehouse(self, self.server.url(name), handle=name)
        finally:
            release_engines()
            self.server.drop_database(name)

    def insert(self, engine: sa.Engine, table: sa.Table, rows: list[dict[str, Any]]) -> None:
        """A ``TIMESTAMP`` takes its literal in the session's zone: aware values are written as
        UTC from a UTC session."""
        utc_rows = [
            {k: _utc(v) if isinstance(table.c[k].type, mysql.TIMESTAMP) else v for k, v in r.items()} for r in rows
        ]
        with engine.begin() as conn:
            conn.exec_driver_sql("SET time_zone = '+00:00'")
            conn.execute(sa.insert(table), utc_rows)

    @contextmanager
    def time_zone(self, wh: Warehouse) -> Iterator[str]:
        ((before,),) = self.server.admin("SELECT @@global.time_zone")
        self.server.admin(f"SET GLOBAL time_zone = '{SERVER_TIME_ZONE}'")
        try:
            url = sa.engine.make_url(wh.url).update_query_dict(
                {"init_command": f"SET time_zone = '{SESSION_TIME_ZONE}'"}
            )
            yield url.render_as_string(hide_password=False)
        finally:
            release_engines()
            self.server.admin(f"SET GLOBAL time_zone = '{before}'")

    def current_time_zones(self, url: str) -> list[str]:
        engine = sa.create_engine(url)
        try:
            with engine.connect() as conn:
                server, session = conn.exec_driver_sql("SELECT @@global.time_zone, @@session.time_zone").one()
        finally:
            engine.dispose()
        return [f"server {server}", f"session {session}"]

    @contextmanager
    def select_only(self, wh: Warehouse) -> Iterator[str]:
        user, password = f"reader_{uuid.uuid4().hex[:8]}", f"pw-{uuid.uuid4().hex[:12]}"
        self.server.admin(f"CREATE USER '{user}'@'localhost' IDENTIFIED BY '{password}'")
        self.server.admin(f"GRANT SELECT ON `{wh.handle}`.* TO '{user}'@'localhost'")
        try:
            url = sa.engine.make_url(wh.url).set(username=user, password=password)
            yield url.render_as_string(hide_password=False)
        finally:
            release_engines()
            self.server.admin(f"DROP USER '{user}'@'localhost'")


def _utc(value: Any) -> Any:
    if isinstance(value, datetime) and value.tzinfo is not None:
        return value.astimezone(UTC).replace(tzinfo=None)
    return value
