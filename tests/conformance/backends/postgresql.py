"""PostgreSQL: the embedded server of ``tests/fixtures/postgres.py`` (server ``TimeZone``
America/New_York), one ``CREATE DATABASE`` per warehouse. Non-UTC time zones: the server's, the
database's (a role-like default for every session) and the session's own (``options``);
SELECT-only access: a login role granted ``CONNECT``, ``USAGE`` on the schema and ``SELECT`` on
its tables."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import sqlalchemy as sa

from tests.fixtures.postgres import PgServer

from . import Backend, Warehouse, release_engines

#: the database's default session time zone and the session's own (both non-UTC, both unlike the
#: server's America/New_York; a half-hour offset catches hour-only arithmetic)
DATABASE_TIME_ZONE = "Asia/Tokyo"
SESSION_TIME_ZONE = "Asia/Kolkata"


class PostgresBackend(Backend):
    id = "postgresql"
    types = {"text": sa.Text()}

    def __init__(self, server: PgServer) -> None:
        self.server = server

    @classmethod
    def start(cls, request: pytest.FixtureRequest) -> PostgresBackend:
        return cls(request.getfixturevalue("pg_server"))

    @contextmanager
    def database(self) -> Iterator[Warehouse]:
        name = self.server.create_database("conf")
        try:
            yield Warehouse(self, self.server.url(name), handle=name)
        finally:
            release_engines()
            self.server.drop_database(name)

    @contextmanager
    def time_zone(self, wh: Warehouse) -> Iterator[str]:
        from psycopg import sql

        self.server.admin(
            sql.SQL("ALTER DATABASE {} SET timezone = {}")
            .format(sql.Identifier(wh.handle), sql.Literal(DATABASE_TIME_ZONE))
            .as_string()
        )
        url = sa.engine.make_url(wh.url).update_query_dict({"options": f"-c timezone={SESSION_TIME_ZONE}"})
        yield url.render_as_string(hide_password=False)

    def current_time_zones(self, url: str) -> list[str]:
        engine = sa.create_engine(url)
        try:
            with engine.connect() as conn:
                session = conn.exec_driver_sql("SHOW timezone").scalar_one()
        finally:
            engine.dispose()
        (server,) = self.server.admin("SELECT setting FROM pg_settings WHERE name = 'TimeZone'")[0]
        return [f"server {server}", f"session {session}"]

    @contextmanager
    def select_only(self, wh: Warehouse) -> Iterator[str]:
        from psycopg import sql

        role = f"reader_{uuid.uuid4().hex[:8]}"
        db = sql.Identifier(wh.handle)
        self.server.admin(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)).as_string())
        with wh.engine() as engine, engine.begin() as conn:
            conn.exec_driver_sql(
                sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(db, sql.Identifier(role)).as_string()
            )
            conn.exec_driver_sql(f'GRANT USAGE ON SCHEMA public TO "{role}"')
            conn.exec_driver_sql(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"')
        try:
            yield sa.engine.make_url(wh.url).set(username=role).render_as_string(hide_password=False)
        finally:
            release_engines()
            with wh.engine() as engine, engine.begin() as conn:
                conn.exec_driver_sql(f'REVOKE ALL ON ALL TABLES IN SCHEMA public FROM "{role}"')
                conn.exec_driver_sql(f'REVOKE ALL ON SCHEMA public FROM "{role}"')
                conn.exec_driver_sql(
                    sql.SQL("REVOKE ALL ON DATABASE {} FROM {}").format(db, sql.Identifier(role)).as_string()
                )
            self.server.admin(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)).as_string())
