"""SQLAlchemy engines for the warehouse: URL normalisation, SQLite pragmas, write transactions.

- ``postgresql://`` and ``postgres://`` URLs use psycopg 3 (``postgresql+psycopg://``).
- SQLite gets WAL journaling and a busy timeout, and write transactions start with
  ``BEGIN IMMEDIATE`` so concurrent workers queue for the write lock instead of failing.
- Engines are cached per URL within a process (and their pools are reset in forked children).
- ``release_sqlite_files()`` (called when the ``ctxprec`` command exits) closes the cached
  engines and puts each SQLite file back in rollback-journal mode when no other process has it
  open: the WAL is checkpointed into the ``.db`` file and the ``-wal``/``-shm`` files are removed,
  so copying the ``.db`` file alone copies every row.
- ``check_dialect()`` turns an unknown dialect or a missing DB driver into a one-line error that
  names the package to install.
- ``require_sqlite_file()`` refuses a SQLite URL whose database file does not exist (SQLite would
  create an empty one): every entry point (CLI, Dagster resources, Airflow hook) calls it.
- ``get_engine(url, read_only=True)`` is for commands that only read (``trend``, ``check``,
  ``compare``, ``report``, ``estimate``, ``batches list``): a SQLite file is opened read-only
  (``mode=ro``, plus ``PRAGMA query_only``) without the WAL switch, and is left as it was on exit
  (no checkpoint, no journal-mode change), so a read-only file or directory works and a writable
  file is not written. Other dialects get their usual engine: reading needs only SELECT there.
"""

from __future__ import annotations

import functools
import logging
import os
import random
import sqlite3
import threading
import time
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlalchemy import create_engine, event
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.engine.url import URL
from sqlalchemy.pool import StaticPool

from ..errors import CtxPrecError
from ..secrets import redact_url, register_secret
from .dialects import for_dialect

log = logging.getLogger(__name__)
T = TypeVar("T")

__all__ = [
    "normalize_url",
    "get_engine",
    "display_url",
    "write_transaction",
    "read_connection",
    "stream_batches",
    "SQLITE_BUSY_TIMEOUT_MS",
    "check_dialect",
    "release_sqlite_files",
    "UnknownDialectError",
    "MissingDriverError",
    "MissingWarehouseFileError",
    "require_sqlite_file",
]

SQLITE_BUSY_TIMEOUT_MS = 60_000
_WRITE_OPTION = "ctxprec_write"
#: the cache key suffix of a read-only engine (``get_engine(url, read_only=True)``)
_READ_ONLY = "#read-only"

_engines: dict[str, Engine] = {}
_lock = threading.Lock()


def normalize_url(url: str | URL) -> URL:
    """Parse ``url``; PostgreSQL URLs without a driver get psycopg 3."""
    try:
        u = make_url(url)
    except Exception:  # sqlalchemy.exc.ArgumentError; never echo a password
        shown = redact_url(str(url)) if "://" in str(url) else "(not shown)"
        raise ValueError(
            f"invalid warehouse URL {shown}: expected a SQLAlchemy URL such as sqlite:///ctxprec.db "
            "or postgresql://user:password@host/db"
        ) from None
    if u.host and "@" in u.host:
        # an unencoded "@" in the password: the rest of the password would be taken for the
        # host name and echoed by the driver's "cannot resolve host" error
        raise ValueError(
            f"invalid warehouse URL {redact_url(str(url))}: a '@' in the user name or password must be written %40"
        )
    if u.password:
        # redact() then masks it wherever it shows up, even in a form its URL patterns miss
        # (an unencoded space, a driver quoting it in an error)
        register_secret(str(u.password))
    if u.drivername in ("postgresql", "postgres"):
        u = u.set(drivername="postgresql+psycopg")
    return u


class UnknownDialectError(ValueError):
    """The URL names a database SQLAlchemy does not know (a malformed URL: exit code 2)."""


class MissingDriverError(ImportError):
    """The URL's database driver is not installed; the message names the package."""


#: DB-API module -> the pip package that provides it
DRIVER_PACKAGES = {
    "MySQLdb": "mysqlclient", "pymysql": "pymysql", "mysql": "mysql-connector-python",
    "mariadb": "mariadb", "aiomysql": "aiomysql", "asyncmy": "asyncmy",
    "psycopg": '"psycopg[binary]" (or install ctxprec-ops with the postgres extra)',
    "psycopg2": "psycopg2-binary", "pg8000": "pg8000", "asyncpg": "asyncpg",
    "pyodbc": "pyodbc", "pymssql": "pymssql", "oracledb": "oracledb", "cx_Oracle": "cx_Oracle",
    "aiosqlite": "aiosqlite", "duckdb": "duckdb-engine", "snowflake": "snowflake-sqlalchemy",
}  # fmt: skip
#: dialects that live in their own package (SQLAlchemy names the dialect, not the package)
DIALECT_PACKAGES = {
    "snowflake": "snowflake-sqlalchemy", "bigquery": "sqlalchemy-bigquery", "redshift": "sqlalchemy-redshift",
    "duckdb": "duckdb-engine", "clickhouse": "clickhouse-sqlalchemy", "trino": "trino", "databricks":
    "databricks-sqlalchemy", "awsathena": "pyathena", "hana": "sqlalchemy-hana", "db2": "ibm_db_sa",
}  # fmt: skip


def check_dialect(url: str | URL) -> None:
    """Load the URL's dialect and DB-API driver; raise ``UnknownDialectError`` for a dialect
    SQLAlchemy cannot find and ``MissingDriverError`` (naming the pip package) for a driver that
    is not installed. Never connects."""
    from sqlalchemy.exc import NoSuchModuleError

    u = normalize_url(url)
    backend = u.get_backend_name()
    try:
        dialect_cls = u.get_dialect()
    except NoSuchModuleError:
        pkg = DIALECT_PACKAGES.get(backend)
        if pkg:
            raise MissingDriverError(f"the warehouse URL needs the {backend} dialect: pip install {pkg}") from None
        raise UnknownDialectError(
            f"unknown database {u.drivername!r} in the warehouse URL {redact_url(str(url))} "
            "(expected e.g. sqlite:///ctxprec.db or postgresql://user@host/db)"
        ) from None
    try:
        dialect_cls.import_dbapi()  # imports the DB-API module the URL names (never connects)
    except ImportError as exc:
        module = (getattr(exc, "name", None) or "").split(".")[0] or u.get_driver_name()
        pkg = DRIVER_PACKAGES.get(module, module)
        raise MissingDriverError(
            f"the warehouse URL {u.drivername}://… needs the Python DB driver {module!r}, which is not "
            f"installed: pip install {pkg}"
        ) from None


class MissingWarehouseFileError(CtxPrecError, ValueError):
    """The warehouse URL names a SQLite file that does not exist (a setting to fix: no retry)."""

    error_type = "missing_warehouse"
    retryable = False


def require_sqlite_file(url: str | URL | Engine, *, setting: str = "the warehouse URL") -> None:
    """Raise ``MissingWarehouseFileError`` when ``url`` is a SQLite URL whose database file does not
    exist, instead of letting SQLite create an empty file (and the run then fail on a missing
    source table, leaving the file behind). In-memory and ``file:`` URI databases, and every
    other dialect, pass. ``setting`` names where the URL came from, for the message."""
    u = url.url if isinstance(url, Engine) else normalize_url(url)
    path = _sqlite_path(u)
    if path is None or os.path.exists(path):
        return
    where = "" if os.path.isabs(path) else f" (a relative path: resolved from {os.getcwd()})"
    raise MissingWarehouseFileError(
        f"the SQLite warehouse file {path!r} named by {setting} does not exist{where}; nothing was read "
        "or created. Check the path (`ctxprec demo` creates sqlite:///ctxprec_demo.db in its working directory)"
    )


def display_url(url: str | URL | Engine) -> str:
    """The URL with its password masked, for logs and messages."""
    if isinstance(url, Engine):
        url = url.url
    if isinstance(url, URL):
        return url.render_as_string(hide_password=True)
    return redact_url(str(url))


#: SQLite page cache per connection, KiB
SQLITE_CACHE_KIB = 32768
#: WAL pages between automatic checkpoints (SQLite's default is 1000)
SQLITE_WAL_AUTOCHECKPOINT_PAGES = 10_000


#: invalid UTF-8 stored in a TEXT column must not abort the whole chunk read: keep the bad bytes
#: as surrogates, row validation reports them as "not valid UTF-8" (a partial of ``str``: called
#: for every text value read, it adds no Python frame)
_sqlite_text = functools.partial(str, encoding="utf-8", errors="surrogateescape")


@contextmanager
def sqlite_strict_text(conn: Connection) -> Iterator[None]:
    """SQLite, inside the block: text is decoded by the driver's own C path (``str``) instead of
    ``_sqlite_text`` (a Python call per value: ~2.4 us a row of a chunk read, bench/README.md), and
    text that is not valid UTF-8 raises an error ``is_sqlite_decode_error`` recognises instead of
    coming back with surrogates. Read again outside the block to get such text. The connection's
    own factory is put back (an engine not made by ``get_engine`` keeps whatever it had)."""
    driver: Any = conn.connection.driver_connection
    before = getattr(driver, "text_factory", str)
    if before is not str:
        driver.text_factory = str
    try:
        yield
    finally:
        if before is not str:
            driver.text_factory = before


def stream_batches(conn: Connection, stmt: Any, batch: int) -> Iterator[Sequence[Any]]:
    """``stmt``'s rows in batches of up to ``batch``, streamed from the cursor (memory: one
    batch). On SQLite, when no selected column converts its values (``result_processor``), the
    batches are the driver cursor's own ``fetchmany`` tuples: SQLAlchemy's row handling cost
    ~1 - 2 us a row of a partition's ids or scores (bench/README.md, issue 16's seventh pass)."""
    if conn.dialect.name == "sqlite" and all(
        c.type.result_processor(conn.dialect, None) is None for c in stmt.selected_columns
    ):
        result = conn.execute(stmt)
        try:
            while part := result.cursor.fetchmany(batch):
                yield part
        finally:
            result.close()
        return
    yield from conn.execution_options(stream_results=True, yield_per=batch).execute(stmt).partitions()


def is_sqlite_decode_error(exc: BaseException) -> bool:
    """Whether ``exc`` is SQLite's refusal to decode stored text as UTF-8 (``sqlite_strict_text``)."""
    orig = getattr(exc, "orig", exc)
    return isinstance(orig, sqlite3.OperationalError) and str(orig).startswith("Could not decode to UTF-8")


def _setup_sqlite(engine: Engine, *, read_only: bool = False) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_conn, _record):  # pragma: no cover - exercised by every sqlite test
        dbapi_conn.isolation_level = None  # we issue BEGIN ourselves (see _on_begin)
        dbapi_conn.text_factory = _sqlite_text
        cur = dbapi_conn.cursor()
        cur.execute(f"PRAGMA busy_timeout = {SQLITE_BUSY_TIMEOUT_MS}")
        if read_only:  # no journal-mode switch (a write); any write fails instead of happening
            cur.execute("PRAGMA query_only = ON")
            cur.execute(f"PRAGMA cache_size = -{SQLITE_CACHE_KIB}")
        elif engine.url.database not in (None, "", ":memory:"):
            cur.execute("PRAGMA journal_mode = WAL")
            cur.execute("PRAGMA synchronous = NORMAL")
            # a 32 MiB page cache (default 2 MiB): the judgment cache's random keys otherwise
            # thrash the index pages once a warehouse holds millions of judged nodes
            cur.execute(f"PRAGMA cache_size = -{SQLITE_CACHE_KIB}")
            # checkpoint every ~40 MB of WAL instead of ~4 MB: a chunk commits ~3 MB of pages
            # scattered over a large file, and each checkpoint ends in an fsync; ten times fewer
            # of them cut a 1-worker run's I/O wait about in half (bench/README.md)
            cur.execute(f"PRAGMA wal_autocheckpoint = {SQLITE_WAL_AUTOCHECKPOINT_PAGES}")
        cur.close()

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        if conn.get_execution_options().get(_WRITE_OPTION):
            conn.exec_driver_sql("BEGIN IMMEDIATE")
        else:
            conn.exec_driver_sql("BEGIN")


def _create(u: URL, *, read_only: bool = False) -> Engine:
    check_dialect(u)  # an unknown dialect or a missing driver: say which package, not a bare ModuleNotFoundError
    kwargs: dict = {"future": True}
    if u.get_backend_name() == "sqlite":
        if u.database in (None, "", ":memory:"):
            kwargs["poolclass"] = StaticPool
        kwargs["connect_args"] = {"check_same_thread": False, "timeout": SQLITE_BUSY_TIMEOUT_MS / 1000}
        path = _sqlite_path(u) if read_only else None
        if path is not None:  # the driver opens the file read-only (a URI filename); the URL stays the user's
            uri = "file:" + urllib.parse.quote(os.path.abspath(path)) + "?mode=ro"
            kwargs["creator"] = functools.partial(
                sqlite3.connect, uri, uri=True, check_same_thread=False, timeout=SQLITE_BUSY_TIMEOUT_MS / 1000
            )
    else:
        kwargs["pool_pre_ping"] = True
    kwargs.update(for_dialect(u.get_backend_name()).engine_options)
    engine = create_engine(u, **kwargs)
    if u.get_backend_name() == "sqlite":
        _setup_sqlite(engine, read_only=read_only)
    return engine


def get_engine(url: str | URL | Engine, *, read_only: bool = False) -> Engine:
    """An engine for ``url`` (cached per URL). An ``Engine`` is returned as is; SQLite
    engines built elsewhere should be made with this function to get WAL and BEGIN IMMEDIATE.

    ``read_only=True``, for commands that only read: a SQLite file is opened read-only and never
    written, not even to switch its journal mode or checkpoint it (see the module's notes); on
    other dialects it is the usual engine."""
    if isinstance(url, Engine):
        return url
    u = normalize_url(url)
    read_only = read_only and u.get_backend_name() == "sqlite"
    key = u.render_as_string(hide_password=False) + (_READ_ONLY if read_only else "")
    with _lock:
        engine = _engines.get(key)
        if engine is None:
            engine = _engines[key] = _create(u, read_only=read_only)
        return engine


def _sqlite_path(u: URL) -> str | None:
    db = u.database
    if u.get_backend_name() != "sqlite" or db in (None, "", ":memory:") or db.startswith("file:"):
        return None
    return db


def release_sqlite_files() -> None:
    """Close every cached engine; leave each SQLite file in rollback-journal mode with its WAL
    checkpointed and its ``-wal``/``-shm`` files gone, unless another process still has it open
    (then it stays in WAL mode: switching needs the file to itself, and nothing waits for it)."""
    with _lock:
        engines = list(_engines.items())
        _engines.clear()
    for _key, engine in engines:  # every connection closed first: one still open would keep the WAL
        engine.dispose()
    for key, engine in engines:
        path = _sqlite_path(engine.url)
        if path is None or key.endswith(_READ_ONLY) or not os.path.exists(path):
            continue  # a read-only engine's file is left exactly as it was
        try:
            conn = sqlite3.connect(path, timeout=0)
        except sqlite3.Error:
            continue
        try:
            conn.execute("PRAGMA busy_timeout = 0")
            conn.execute("PRAGMA journal_mode = DELETE").fetchone()
        except sqlite3.Error:  # busy: another process uses the file; it keeps WAL mode
            pass
        finally:
            conn.close()


def _reset_after_fork() -> None:
    # connections inherited from the parent must not be used by the child (Airflow/Celery forks)
    for engine in list(_engines.values()):
        engine.dispose(close=False)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


@contextmanager
def write_transaction(engine: Engine) -> Iterator[Connection]:
    """One write transaction (``BEGIN IMMEDIATE`` on SQLite); commits or rolls back."""
    with engine.connect() as conn:
        conn = conn.execution_options(**{_WRITE_OPTION: True})
        with conn.begin():
            yield conn


#: tries of a write transaction that loses a write conflict (``Dialect.write_conflict``)
WRITE_ATTEMPTS = 8


def write_retrying(engine: Engine, work: Callable[[Connection], T]) -> T:
    """Run ``work`` (idempotent writes) in one write transaction, and in a new one when it loses a
    write conflict to a concurrent transaction (``Dialect.write_conflict``: DuckDB, fakesnow), up
    to ``WRITE_ATTEMPTS`` times with a short growing, jittered pause; any other error, and the
    last conflict, propagate. Elsewhere: one ``write_transaction``."""
    conflict = for_dialect(engine.dialect.name).write_conflict
    for attempt in range(1, WRITE_ATTEMPTS + 1):
        try:
            with write_transaction(engine) as conn:
                return work(conn)
        except Exception as exc:  # the dialect says which are conflicts (fakesnow's are not DBAPIErrors)
            if conflict is None or attempt == WRITE_ATTEMPTS or not conflict(exc):
                raise
            log.debug("write conflict on %s (attempt %d): retrying", engine.dialect.name, attempt)
            time.sleep(random.uniform(0.01, 0.05) * attempt)
    raise AssertionError("unreachable")


@contextmanager
def read_connection(engine: Engine, *, snapshot: bool = False) -> Iterator[Connection]:
    """A connection for reads inside one (read) transaction.

    ``snapshot=True``: every statement sees the same committed state (PostgreSQL runs the
    transaction at REPEATABLE READ; a SQLite read transaction in WAL mode is a snapshot already).
    """
    with engine.connect() as conn:
        if snapshot and engine.dialect.name == "postgresql":
            conn = conn.execution_options(isolation_level="REPEATABLE READ")
        with conn.begin():
            yield conn
