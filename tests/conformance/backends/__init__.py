"""The backends the conformance suite runs on: one module per backend, one class each.

A backend says, as data and small methods, everything the suite needs to know about it — and
nothing else differs between backends in the suite's tests:

- ``start(request)``: the backend on this pytest worker, built on its server fixture of
  ``tests/fixtures/`` (``pg_server``, ``mariadb_server``, ...);
- ``database()``: a fresh, empty database (a ``Warehouse``: its URL, how to open it in this
  process, how a ``ctxprec`` subprocess reaches it), dropped afterwards;
- ``types``: the column type the backend gives each logical kind of source column (``text``
  compares exactly: case- and accent-sensitive; ``timestamptz`` is the time-zone-aware timestamp);
  ``None`` where it has none, with the reason in ``lacks``;
- ``lacks``: capability -> why this backend does not have it. A test that needs a capability
  calls ``backend.require(name)`` and is skipped with that reason. Capabilities:
  ``time_zone`` (a server/session time zone that can be set to something other than UTC:
  ``time_zone(wh)``), ``select_only`` (an account that may only SELECT: ``select_only(wh)``),
  ``long_ids`` (a ``log_id`` holds ids of any length: 500 characters and more), and one per
  logical column type;
- ``time_zone(wh)`` / ``select_only(wh)``: context managers yielding a URL of the same database
  with a non-UTC server and session time zone / with SELECT-only rights;
- ``cli(wh, *args)``: the argv of a ``ctxprec`` process on the warehouse;
- ``create_engine(url)`` / ``create_tables(engine, metadata)``: the test's own engine and source
  tables (an emulator's client, a table engine clause).

Adding a backend (BigQuery, Databricks, ...): one module here defining a ``Backend``
subclass, and its id in ``IDS``. Every test of the suite then runs on it.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest
import sqlalchemy as sa

from tests.fixtures.warehouse_data import retrieval_table

__all__ = ["IDS", "Backend", "Warehouse", "backend_class", "release_engines"]

#: the suite's parameter ids, in the order the contract lists them; each is a module of this package
IDS = ("sqlite", "postgresql", "mariadb", "duckdb", "snowflake", "clickhouse", "redshift", "bigquery")

#: the ``ctxprec`` console script of the environment running the tests
CTXPREC = str(Path(sys.executable).with_name("ctxprec"))

#: logical source column kinds -> the SQLAlchemy type most backends give them
DEFAULT_TYPES: Mapping[str, Any] = {
    "text": sa.String(600),  # ids: compared exactly (binary), up to 600 characters
    "integer": sa.BigInteger(),
    "decimal": sa.Numeric(38, 12),
    "float": sa.Double(),
    "uuid": sa.Uuid(),
    "timestamp": sa.DateTime(),  # naive: UTC by the contract
    "timestamptz": sa.DateTime(timezone=True),
    "json": sa.Text(),  # JSON text (what every backend can hold, bad JSON included)
    "label": sa.String(64),  # segment values
}


def release_engines() -> None:
    """Close the engines ``ctxprec_ops`` cached in this process (what ``ctxprec`` does when it
    exits), so that a file database is not held open by this process."""
    from ctxprec_ops.warehouse.engine import release_sqlite_files

    release_sqlite_files()


@dataclass
class Warehouse:
    """A fresh database of one backend. ``url`` is what the product is given."""

    backend: Backend
    url: str
    #: the backend's own handle on it (a database name, a directory, ...)
    handle: Any = None
    _opened: ExitStack | None = field(default=None, repr=False)

    # -- in this process ---------------------------------------------------------------------
    def open(self) -> None:
        """Make the warehouse reachable from this process (an emulator's patch; idempotent)."""
        if self._opened is None:
            stack = ExitStack()
            stack.enter_context(self.backend.session(self))
            self._opened = stack

    def close(self) -> None:
        """Release it: this process's cached engines closed, an emulator's patch lifted."""
        release_engines()
        if self._opened is not None:
            stack, self._opened = self._opened, None
            stack.close()

    @contextmanager
    def released(self) -> Iterator[None]:
        """Closed in this process for the block (while other processes use it), open again after."""
        was_open = self._opened is not None
        self.close()
        try:
            yield
        finally:
            if was_open:
                self.open()

    @contextmanager
    def engine(self, url: str | None = None) -> Iterator[sa.Engine]:
        """An engine of the test's own (not ``ctxprec_ops``'), disposed after the block."""
        engine = self.backend.create_engine(url or self.url)
        try:
            yield engine
        finally:
            engine.dispose()

    def query(self, sql: str, **params: Any) -> list[tuple]:
        with self.engine() as engine, engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text(sql), params)]

    def create_source(
        self,
        rows: Sequence[Mapping[str, Any]],
        *,
        table: str = "retrieval_logs",
        id: str = "integer",
        event_time: str = "timestamp",
        extra: Mapping[str, str] | None = None,
    ) -> sa.Table:
        """A source table whose columns have the backend's type for each logical kind
        (``extra``: more columns, name -> kind), filled with ``rows``."""
        backend = self.backend
        md = sa.MetaData()
        t = retrieval_table(
            md,
            table,
            id_type=backend.type_of(id),
            time_type=backend.type_of(event_time),
            context_type=backend.type_of("json"),
            extra=[sa.Column(name, backend.type_of(kind)) for name, kind in (extra or {}).items()],
        )
        with self.engine() as engine:
            backend.create_tables(engine, md)
            if rows:
                backend.insert(engine, t, [backend.values(t, r) for r in rows])
        return t

    def insert(self, table: sa.Table, rows: Sequence[Mapping[str, Any]]) -> None:
        with self.engine() as engine:
            self.backend.insert(engine, table, [self.backend.values(table, r) for r in rows])

    def cli(self, *args: str) -> list[str]:
        """The argv of a ``ctxprec`` process (``args`` after the program name)."""
        return self.backend.cli(self, *args)


class Backend:
    """One backend of the suite. Subclasses set ``id``, ``types``/``lacks`` and implement
    ``start`` and ``database``; the rest has defaults."""

    id: ClassVar[str]
    #: logical column kind -> this backend's type, on top of ``DEFAULT_TYPES`` (None: has none)
    types: ClassVar[Mapping[str, Any]] = {}
    #: capability -> why this backend lacks it
    lacks: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def start(cls, request: pytest.FixtureRequest) -> Backend:
        raise NotImplementedError

    def database(self) -> Any:  # a context manager yielding a Warehouse
        raise NotImplementedError

    # -- capabilities --------------------------------------------------------------------------
    def has(self, capability: str) -> bool:
        return capability not in self.lacks

    def require(self, capability: str) -> None:
        """Skip the calling test, with the reason, when the backend lacks ``capability``."""
        if not self.has(capability):
            pytest.skip(f"{self.id} lacks {capability}: {self.lacks[capability]}")

    def type_of(self, kind: str) -> Any:
        self.require(kind)
        merged = {**DEFAULT_TYPES, **self.types}
        if merged.get(kind) is None:
            raise AssertionError(f"backend {self.id} declares no type for {kind!r} and no reason in lacks")
        return merged[kind]

    # -- the test's own engines and tables -------------------------------------------------------
    def create_engine(self, url: str) -> sa.Engine:
        """An engine of the test's own on ``url`` (an emulator's client, where one is needed)."""
        return sa.create_engine(url)

    def create_tables(self, engine: sa.Engine, metadata: sa.MetaData) -> None:
        """Create the source tables of ``metadata`` (a table engine clause, where one is needed)."""
        metadata.create_all(engine)

    # -- writing the source --------------------------------------------------------------------
    def values(self, table: sa.Table, row: Mapping[str, Any]) -> dict[str, Any]:
        """``row`` as this backend's driver takes it for ``table``'s column types: a UUID or a
        time-zone-aware timestamp held in a text column is written as its canonical text."""
        out = dict(row)
        for name, value in row.items():
            col = table.c[name]
            if isinstance(col.type, sa.String) and value is not None and not isinstance(value, str):
                out[name] = value.isoformat() if hasattr(value, "isoformat") else str(value)
        return out

    def insert(self, engine: sa.Engine, table: sa.Table, rows: list[dict[str, Any]]) -> None:
        with engine.begin() as conn:
            conn.execute(sa.insert(table), rows)

    # -- in-process access and other processes --------------------------------------------------
    @contextmanager
    def session(self, wh: Warehouse) -> Iterator[None]:
        """What makes the warehouse reachable from this process (nothing, but for an emulator)."""
        yield

    def cli(self, wh: Warehouse, *args: str) -> list[str]:
        return [CTXPREC, *args]

    # -- capabilities with behaviour --------------------------------------------------------------
    def time_zone(self, wh: Warehouse) -> Any:  # context manager yielding a URL
        """A URL of ``wh`` whose server and session time zones are not UTC (needs ``time_zone``)."""
        raise NotImplementedError(f"{self.id}: time_zone")

    def current_time_zones(self, url: str) -> list[str]:
        """The time zone settings a connection of ``url`` sees (server, session, ...)."""
        raise NotImplementedError(f"{self.id}: current_time_zones")

    def select_only(self, wh: Warehouse) -> Any:  # context manager yielding a URL
        """A URL of ``wh`` for an account that may only SELECT (needs ``select_only``)."""
        raise NotImplementedError(f"{self.id}: select_only")


def backend_class(backend_id: str) -> type[Backend]:
    """The ``Backend`` subclass of ``backend_id`` (its module in this package)."""
    module = importlib.import_module(f"{__name__}.{backend_id}")
    found = [
        obj
        for obj in vars(module).values()
        if isinstance(obj, type) and issubclass(obj, Backend) and getattr(obj, "id", None) == backend_id
    ]
    if len(found) != 1:
        raise LookupError(f"tests/conformance/backends/{backend_id}.py must define one Backend with id {backend_id!r}")
    return found[0]
