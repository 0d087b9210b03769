"""BigQuery, emulated by ``bqemulator`` (tests/fixtures/bqemulator.py: DuckDB underneath, its own
environment): one emulator per pytest worker, one dataset per warehouse. The product reaches it
through its own URL parameters (``?api_endpoint=...&anonymous=true``); what only the emulator
needs (every query an ``INTERACTIVE`` job, so errors raise) is ``EmulatedBigQueryDialect``,
registered in this process while a warehouse is open and by ``tests/fixtures/bigquery_cli.py``
in a ``ctxprec`` subprocess. BigQuery has no session time zone and the emulator no IAM."""

from __future__ import annotations

import sys
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from tests.fixtures.bqemulator import BqEmulator, EmulatedBigQueryDialect, bqemulator_venv, emulated

from . import Backend, Warehouse, release_engines

BIGQUERY_CLI = Path(__file__).resolve().parents[2] / "fixtures" / "bigquery_cli.py"


def _require_emulator() -> Path:
    try:
        import google.cloud.bigquery  # noqa: F401
        import sqlalchemy_bigquery  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"google-cloud-bigquery / sqlalchemy-bigquery not installed (make venv installs both): {exc}")
    venv = bqemulator_venv()
    if not (venv / "bin" / "python").exists():
        pytest.skip(f"the BigQuery emulator's environment {venv} is missing (make bqemulator-venv)")
    return venv


class BigQueryBackend(Backend):
    id = "bigquery"
    lacks = {
        "time_zone": "BigQuery has no server or session time zone (TIMESTAMP is an instant, DATETIME has no zone)",
        "select_only": "the bqemulator emulator has no IAM: every client may write",
    }

    def __init__(self, emulator: BqEmulator) -> None:
        self.emulator = emulator

    @property
    def types(self) -> dict:  # type: ignore[override]
        from sqlalchemy_bigquery import BIGNUMERIC, TIMESTAMP

        return {"uuid": sa.String(36), "decimal": BIGNUMERIC(38, 12), "timestamptz": TIMESTAMP()}

    @classmethod
    def start(cls, request: pytest.FixtureRequest) -> BigQueryBackend:
        emulator = BqEmulator(_require_emulator())
        try:
            emulator.start()
        except RuntimeError as exc:
            pytest.skip(f"the BigQuery emulator did not start: {exc}")
        request.addfinalizer(emulator.stop)
        return cls(emulator)

    @contextmanager
    def database(self) -> Iterator[Warehouse]:
        dataset = f"conf_{uuid.uuid4().hex[:10]}"
        client = self.emulator.client()
        client.create_dataset(dataset)
        try:
            yield Warehouse(self, self.emulator.url(dataset), handle=dataset)
        finally:
            release_engines()
            client.delete_dataset(dataset, delete_contents=True, not_found_ok=True)
            client.close()

    @contextmanager
    def session(self, wh: Warehouse) -> Iterator[None]:
        with emulated():
            yield

    def create_engine(self, url: str) -> sa.Engine:
        """The test's own engine, its client made as the product makes it on the emulator."""
        family = EmulatedBigQueryDialect("bigquery")
        u = sa.engine.make_url(url)
        return sa.create_engine(family.engine_url(u), **family.engine_arguments(u))

    def insert(self, engine: sa.Engine, table: sa.Table, rows: list[dict[str, Any]]) -> None:
        """One multi-row ``INSERT`` (a statement is a job: seconds each on BigQuery)."""
        with engine.begin() as conn:
            conn.execute(sa.insert(table).values(rows))

    def cli(self, wh: Warehouse, *args: str) -> list[str]:
        return [sys.executable, str(BIGQUERY_CLI), *args]
