"""Amazon Redshift, stood in for by the embedded PostgreSQL of ``tests/fixtures/postgres.py``
through sqlalchemy-redshift (``redshift+psycopg2://``), one database per warehouse — the same
server, time zones and SELECT-only role as the ``postgresql`` backend.

What this stand-in does not reproduce of Redshift (docs/warehouses.md says which of the product's
SQL is verified here and which only against Redshift's grammar): keys are enforced here (Redshift's
are informational), ``VARCHAR`` lengths count characters (bytes on Redshift), and PostgreSQL's
``MERGE`` accepts more than Redshift's (the product writes the Redshift form, which both take)."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import sqlalchemy as sa

from tests.fixtures.postgres import PgServer

from . import Warehouse, release_engines
from .postgresql import PostgresBackend

DRIVER = "redshift+psycopg2"


def _require_dialect() -> None:
    try:
        import psycopg2  # noqa: F401
        import sqlalchemy_redshift  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"sqlalchemy-redshift / psycopg2 not installed (make venv installs both): {exc}")


class RedshiftBackend(PostgresBackend):
    id = "redshift"
    # Redshift has no UUID type: the canonical text
    types = {"text": sa.String(600), "uuid": sa.String(36)}

    def __init__(self, server: PgServer) -> None:
        super().__init__(server)

    @classmethod
    def start(cls, request: pytest.FixtureRequest) -> RedshiftBackend:
        _require_dialect()
        return cls(request.getfixturevalue("pg_server"))

    @contextmanager
    def database(self) -> Iterator[Warehouse]:
        name = self.server.create_database("rs")
        try:
            yield Warehouse(self, self.server.url(name, driver=DRIVER), handle=name)
        finally:
            release_engines()
            self.server.drop_database(name)
