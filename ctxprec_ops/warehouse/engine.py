"""SQLAlchemy engines for the warehouse: URL normalisation, SQLite pragmas, write transactions.

What differs per warehouse is the family's (``warehouse/dialects/``): the default driver
(psycopg 3 for ``postgresql://`` and ``postgres://``), engine options, what each new connection
runs (SQLite's pragmas and ``BEGIN IMMEDIATE`` writes; a UTC session elsewhere), how a snapshot
read is isolated, and what releasing an engine leaves behind.

- Engines are cached per URL within a process (and their pools are reset in forked children).
- ``release_sqlite_files()`` (called when the ``ctxprec`` command exits) closes the cached
  engines; each family tidies up after its own (SQLite: the WAL is checkpointed into the ``.db``
  file and the ``-wal``/``-shm`` files are removed when no other process has it open, so copying
  the ``.db`` file alone copies every row).
- ``get_engine(url, read_only=True)`` is for commands that only read (``trend``, ``check``,
  ``compare``, ``report``, ``estimate``, ``batches list``): where the family can open a database
  read-only (``Dialect.opens_read_only``: SQLite, ``mode=ro`` plus ``PRAGMA query_only``, no WAL
  switch) it does, and the file is left as it was on exit (no checkpoint, no journal-mode
  change), so a read-only file or directory works and a writable file is not written. Other
  families get their usual engine: reading needs only SELECT there.
- ``check_dialect()`` turns an unknown dialect or a missing DB driver into a one-line error that
  names the package to install.
- ``require_sqlite_file()`` refuses a SQLite URL whose database file does not exist (SQLite would
  create an empty one): every entry point (CLI, Dagster resources, Airflow hook) calls it.
"""

from __future__ import annotations

import logging
import os
import random
import threading
import time
import weakref
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, TypeVar

from sqlalchemy import create_engine
from sqlalchemy.engine import Connection, Engine, make_url
from sqlalchemy.engine.url import URL
from sqlalchemy.pool import SingletonThreadPool, StaticPool

from ..errors import CtxPrecError
from ..secrets import redact_url, register_secret
from .dialects import Dialect, dialect_class, dialect_of, for_dialect
from .dialects.connections import RETRIED_OPTION, WRITE_OPTION, RunAgain

log = logging.getLogger(__name__)
T = TypeVar("T")

__all__ = [
    "normalize_url",
    "get_engine",
    "display_url",
    "write_transaction",
    "after_commit",
    "read_connection",
    "read_retrying",
    "stream_batches",
    "check_dialect",
    "release_sqlite_files",
    "UnknownDialectError",
    "MissingDriverError",
    "MissingWarehouseFileError",
    "require_sqlite_file",
    "database_file",
    "default_driver",
    "in_memory",
    "write_retrying",
    "connections_per_thread",
    "connections_at_once",
    "check_reachable_from_a_thread",
    "ThreadBoundEngineError",
]

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
    return default_driver(u)


def default_driver(url: URL) -> URL:
    """``url`` with its family's default driver where it names none (psycopg 3 for PostgreSQL)."""
    return _family(url).normalize_url(url)


def _family(u: URL) -> Dialect:
    """The family of a URL's dialect, without the unknown-dialect warning (an unknown name: the
    generic family, not cached; the warning comes when an engine is made)."""
    cls = dialect_class(u.get_backend_name())
    return for_dialect(u.get_backend_name()) if cls is not None else Dialect(u.get_backend_name())


def default_chunk_size(warehouse: str | URL | Engine) -> int:
    """Rows per chunk for a run that does not set them: the warehouse family's
    (``Dialect.default_chunk_size``). An invalid URL: the generic family's (it fails where it is
    used, with its own message)."""
    if isinstance(warehouse, Engine):
        return dialect_of(warehouse).default_chunk_size
    try:
        u = normalize_url(warehouse)
    except ValueError:
        return Dialect.default_chunk_size
    return _family(u).default_chunk_size


def in_memory(url: str | URL) -> bool:
    """Whether the URL names a database only this process sees (SQLite's or DuckDB's in-memory
    database): other processes cannot share its work. An invalid URL: False (it fails where it
    is used, with its own message)."""
    try:
        u = normalize_url(url)
    except ValueError:
        return False
    return _family(u).in_memory(u)


def connections_per_thread(engine: Engine) -> bool:
    """Whether each thread gets a connection of its own that only it uses (SQLAlchemy's
    ``SingletonThreadPool``, the default of an in-memory database a caller builds): a thread of
    ours would then open a database of its own — empty, when it is in memory."""
    return isinstance(engine.pool, SingletonThreadPool)


class ThreadBoundEngineError(CtxPrecError, ValueError):
    """The engine gives each thread a connection of its own, and the run cannot stay on this one."""


def check_reachable_from_a_thread(engine: Engine) -> None:
    """Inside a running event loop (a notebook's, an async server's) a run goes on a thread of its
    own; an engine whose connections are per thread would show that thread another database —
    empty, when it is in memory. Said before anything is written, with the way out."""
    import asyncio

    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return  # the run stays on this thread
    if connections_per_thread(engine):
        raise ThreadBoundEngineError(
            f"the warehouse engine ({display_url(engine)}) gives each thread a connection of its own "
            "(SQLAlchemy's SingletonThreadPool, the default of an in-memory database), and a run started "
            "inside a running event loop goes on a thread of its own: it would see another, empty "
            "database. Build the engine with poolclass=sqlalchemy.pool.StaticPool (one connection every "
            "thread shares) or use a database file"
        )


def connections_at_once(engine: Engine) -> bool:
    """Whether threads of this process may each use a pooled connection at the same time (not one
    connection shared by every thread, an in-memory SQLite's or DuckDB's, nor one per thread)."""
    return not isinstance(engine.pool, (StaticPool, SingletonThreadPool))


def database_file(url: str | URL) -> str | None:
    """The database file a URL names that connecting would create when missing (a SQLite file);
    None for a server, an in-memory database or a ``file:`` URI."""
    u = normalize_url(url)
    return _family(u).database_file(u)


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
    path = _family(u).database_file(u)
    if path is None or os.path.exists(path):
        return
    where = "" if os.path.isabs(path) else f" (a relative path: resolved from {os.getcwd()})"
    raise MissingWarehouseFileError(
        f"the SQLite warehouse file {path!r} named by {setting} does not exist{where}; nothing was read "
        "or created. Check the path (`ctxprec demo` creates sqlite:///ctxprec_demo.db in its working directory)"
    )


def display_url(url: str | URL | Engine) -> str:
    """The URL with its password masked, for logs and messages (and any query parameter named
    like a credential: ``?password=``, ``?token=``)."""
    if isinstance(url, Engine):
        url = url.url
    if isinstance(url, URL):
        return redact_url(url.render_as_string(hide_password=True))
    return redact_url(str(url))


def stream_batches(conn: Connection, stmt: Any, batch: int) -> Iterator[Sequence[Any]]:
    """``stmt``'s rows in batches of up to ``batch``, streamed from the cursor (memory: one
    batch; the family may fetch them its own faster way)."""
    return dialect_of(conn).stream_batches(conn, stmt, batch)


#: the cache key suffix of a read-only engine (``get_engine(url, read_only=True)``)
_READ_ONLY = "#read-only"


def _create(u: URL, *, read_only: bool = False) -> Engine:
    check_dialect(u)  # an unknown dialect or a missing driver: say which package, not a bare ModuleNotFoundError
    family = for_dialect(u.get_backend_name())
    arguments = family.engine_arguments(u, read_only=read_only)
    engine = create_engine(family.engine_url(u), future=True, **arguments)
    family.prepare_engine(engine, read_only=read_only)
    return engine


def get_engine(url: str | URL | Engine, *, read_only: bool = False) -> Engine:
    """An engine for ``url`` (cached per URL; a database file's relative path is made absolute
    first, so a later ``chdir`` neither reuses it for another directory's file nor moves its new
    connections). An ``Engine`` is returned as is; engines built elsewhere miss what the family
    sets up (SQLite's WAL and BEGIN IMMEDIATE, UTC sessions).

    ``read_only=True``, for commands that only read: where the family opens databases read-only
    (SQLite) the database is never written, not even to switch its journal mode or checkpoint it;
    elsewhere it is the usual engine."""
    if isinstance(url, Engine):
        return url
    u = normalize_url(url)
    family = for_dialect(u.get_backend_name())
    path = family.local_file(u)
    if path is not None and not os.path.isabs(path):  # one file, whatever the working directory later
        u = u.set(database=os.path.abspath(path))
    read_only = read_only and family.opens_read_only
    key = u.render_as_string(hide_password=False) + (_READ_ONLY if read_only else "")
    with _lock:
        engine = _engines.get(key)
        if engine is None:
            engine = _engines[key] = _create(u, read_only=read_only)
        return engine


def release_sqlite_files() -> None:
    """Close every cached engine, each as its family releases it (a SQLite file is left in
    rollback-journal mode with its WAL checkpointed, unless another process still has it open);
    a read-only engine's database is left exactly as it was."""
    with _lock:
        engines = list(_engines.items())
        _engines.clear()
    for _key, engine in engines:  # every connection closed first: one still open would keep the WAL
        engine.dispose()
    for key, engine in engines:
        if not key.endswith(_READ_ONLY):
            dialect_of(engine).release(engine)


def _reset_after_fork() -> None:
    # connections inherited from the parent must not be used by the child (Airflow/Celery forks)
    for engine in list(_engines.values()):
        engine.dispose(close=False)


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_reset_after_fork)


@contextmanager
def write_transaction(engine: Engine, *, retried: bool = False) -> Iterator[Connection]:
    """One write transaction (``BEGIN IMMEDIATE`` on SQLite); commits or rolls back, then runs what
    ``after_commit`` gave it when it committed. ``retried``: the caller runs the work again when it
    raises ``RunAgain`` (``write_retrying``)."""
    with engine.connect() as conn:
        conn = conn.execution_options(**{WRITE_OPTION: True, RETRIED_OPTION: retried})
        try:
            with conn.begin():
                yield conn
        except BaseException:
            _then(conn)
            raise
        for fn in _then(conn):
            fn()


#: what runs once a ``write_transaction`` has committed, per connection (``after_commit``)
_after_commit: weakref.WeakKeyDictionary[Connection, list[Callable[[], None]]] = weakref.WeakKeyDictionary()
_after_commit_lock = threading.Lock()


def after_commit(conn: Connection, fn: Callable[[], None]) -> None:
    """Run ``fn`` once the ``write_transaction`` that ``conn`` belongs to has committed; never when
    it rolls back (or a retried transaction gave it up), nor for a transaction begun elsewhere.
    What the process remembers about the database (a table it created) is remembered only when the
    database has it: a CREATE undone with its transaction must be made again by the next one."""
    with _after_commit_lock:
        _after_commit.setdefault(conn, []).append(fn)


def _then(conn: Connection) -> list[Callable[[], None]]:
    """What ``after_commit`` gave ``conn``'s transaction (forgotten: it ran or rolled back)."""
    with _after_commit_lock:
        return _after_commit.pop(conn, [])


#: tries of a write transaction that loses a write conflict (``Dialect.write_conflict``)
WRITE_ATTEMPTS = 8


def write_retrying(engine: Engine, work: Callable[[Connection], T]) -> T:
    """Run ``work`` (idempotent writes) in one write transaction, and in a new one when it loses a
    write conflict to a concurrent transaction (``Dialect.write_conflict``: DuckDB, fakesnow), up
    to ``WRITE_ATTEMPTS`` times with a short growing, jittered pause, and at once when the family
    gave the transaction up on purpose (``RunAgain``) or the server dropped its connection (the
    pool connects afresh: a restart, a killed session); any other error, and the last conflict,
    propagate."""
    family = dialect_of(engine)
    for attempt in range(1, WRITE_ATTEMPTS + 1):
        try:
            with write_transaction(engine, retried=attempt < WRITE_ATTEMPTS) as conn:
                return work(conn)
        except RunAgain:
            log.debug("write on %s given up by its family (attempt %d): running it again", engine.dialect.name, attempt)
        except Exception as exc:  # the dialect says which are conflicts (fakesnow's are not DBAPIErrors)
            last = attempt == WRITE_ATTEMPTS
            if not last and getattr(exc, "connection_invalidated", False):  # a restart, a killed session
                log.warning("write on %s lost its connection (attempt %d): retrying", engine.dialect.name, attempt)
                continue
            if last or not family.write_conflict(exc):
                raise
            log.debug("write conflict on %s (attempt %d): retrying", engine.dialect.name, attempt)
            time.sleep(random.uniform(0.01, 0.05) * attempt)
    raise AssertionError("unreachable")


def read_retrying(engine: Engine, work: Callable[[Connection], T]) -> T:
    """Run ``work`` (reads, safe to repeat) in a ``read_connection``, and once more on a new
    connection when the server dropped the one it had while it was in use (a restart, a killed
    session: no check at checkout can see that coming)."""
    try:
        with read_connection(engine) as conn:
            return work(conn)
    except Exception as exc:
        if not getattr(exc, "connection_invalidated", False):
            raise
        log.warning("read on %s lost its connection: retrying", engine.dialect.name)
    with read_connection(engine) as conn:
        return work(conn)


@contextmanager
def read_connection(engine: Engine, *, snapshot: bool = False) -> Iterator[Connection]:
    """A connection for reads inside one (read) transaction.

    ``snapshot=True``: every statement sees the same committed state (at the family's
    ``snapshot_isolation``, PostgreSQL's REPEATABLE READ; a SQLite read transaction in WAL mode is
    a snapshot already).
    """
    with engine.connect() as conn:
        options = dialect_of(engine).read_options(snapshot=snapshot)
        if options:
            conn = conn.execution_options(**options)
        with conn.begin():
            yield conn
