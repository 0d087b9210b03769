"""SQLite: a file per database (the embedded default). No server, so no time zone to set;
read-only access is the file opened read-only (``mode=ro``), as on a read-only mount."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from . import Backend, Warehouse


class SqliteBackend(Backend):
    id = "sqlite"
    types = {
        # no exact decimal type: NUMERIC affinity stores a REAL
        "decimal": None,
        # a UUID as its canonical text; an aware timestamp as ISO-8601 text with its offset
        "uuid": sa.String(36),
        "timestamptz": sa.Text(),
    }
    lacks = {
        "decimal": "SQLite has no exact decimal type (NUMERIC affinity stores a REAL)",
        "time_zone": "SQLite has no server or session time zone",
    }

    def __init__(self, base: Path) -> None:
        self.base = base

    @classmethod
    def start(cls, request: pytest.FixtureRequest) -> SqliteBackend:
        base = Path(tempfile.mkdtemp(prefix="ctxprec-conformance-sqlite-"))
        request.addfinalizer(lambda: shutil.rmtree(base, ignore_errors=True))
        return cls(base)

    @contextmanager
    def database(self) -> Iterator[Warehouse]:
        directory = Path(tempfile.mkdtemp(dir=self.base))
        try:
            yield Warehouse(self, f"sqlite:///{directory / 'warehouse.db'}", handle=directory / "warehouse.db")
        finally:
            shutil.rmtree(directory, ignore_errors=True)

    @contextmanager
    def select_only(self, wh: Warehouse) -> Iterator[str]:
        path: Any = wh.handle
        yield f"sqlite:///file:{path}?mode=ro&uri=true"
