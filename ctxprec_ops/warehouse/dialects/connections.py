"""The generic behaviour of a warehouse family around its connections: URLs, engines, sessions,
streamed reads, write conflicts, signs of life of claim holders, planner statistics and lineage
names."""

from __future__ import annotations

import functools
import os
import select
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from typing import Any

from sqlalchemy import event
from sqlalchemy.engine import URL, Connection, Engine
from sqlalchemy.exc import DisconnectionError

from ..holders import ClaimHolder
from .facts import Facts, Lineage

__all__ = [
    "Connections",
    "dict_rows",
    "file_lineage",
    "WRITE_OPTION",
    "RETRIED_OPTION",
    "RunAgain",
    "PING_AFTER_IDLE",
    "PINGS",
]

#: the execution option ``engine.write_transaction`` sets on its connection: a family whose
#: transactions start differently for writes (SQLite's ``BEGIN IMMEDIATE``) reads it
WRITE_OPTION = "ctxprec_write"
#: the execution option ``engine.write_retrying`` sets on its transaction's connection: the work is
#: run again in a new transaction when it fails with ``RunAgain`` (or loses a write conflict), so a
#: family may try a statement that is faster when it succeeds and fails the transaction when not
RETRIED_OPTION = "ctxprec_retried"


class RunAgain(Exception):
    """A family gave up a write transaction on purpose (``RETRIED_OPTION`` set): run the work again
    at once, in a new transaction, which the family writes the other way (DuckDB: a plain insert
    that met an existing key, written next with ``ON CONFLICT``)."""


def dict_rows(result: Any) -> list[dict[str, Any]]:
    """A result's rows as dicts keyed by column label (one fetch: iterating fetches row by row)."""
    names = list(result.keys())
    return [dict(zip(names, r)) for r in result.all()]


def _on_connect(statements: Sequence[str], dbapi_conn: Any, _record: Any) -> None:
    cur = dbapi_conn.cursor()
    try:
        for statement in statements:
            cur.execute(statement)
    finally:
        cur.close()
    dbapi_conn.commit()  # a SET inside the driver's implicit transaction lasts for the session


#: seconds a pooled connection may sit idle before its next checkout pings it (the driver's
#: ``SELECT 1``; a dead one is replaced). Within a run connections go back and forth every few
#: milliseconds: a ping on every checkout (SQLAlchemy's ``pool_pre_ping``) was ~150 round trips
#: and ~15 % of a 20,000-row PostgreSQL run (bench/README.md). Sooner, only its socket is polled
PING_AFTER_IDLE = 1.0
_IDLE_SINCE = "ctxprec_idle_since"
#: pings sent on a connection (a count in its record's ``info``: tests, diagnostics)
PINGS = "ctxprec_pings"


def _on_checkin(_dbapi_conn: Any, record: Any) -> None:
    if record is not None:
        record.info[_IDLE_SINCE] = time.monotonic()


def _socket_closed(dbapi_conn: Any) -> bool:
    """Whether the server has closed (or written to) an idle connection's socket: a killed session
    or a restarted server sends its last message and closes, so the socket turns readable, which
    an idle connection's never is otherwise. No round trip: one poll of the socket (a driver that
    has none, e.g. SQLite, DuckDB or an HTTP client: False)."""
    try:
        fileno = getattr(dbapi_conn, "fileno", None)
        fd = fileno() if fileno is not None else dbapi_conn._sock.fileno()
    except Exception:  # no socket to look at (or a closed connection: its first use says so)
        return False
    if not isinstance(fd, int) or fd < 0:
        return False
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN | select.POLLPRI | select.POLLHUP | select.POLLERR)
        return bool(poller.poll(0))
    except (AttributeError, OSError, ValueError):  # no poll() on this platform
        return False


def _on_checkout(dialect: Any, dbapi_conn: Any, record: Any, _proxy: Any) -> None:
    """A connection whose socket the server closed is replaced at once (no round trip); one idle
    for ``PING_AFTER_IDLE`` or longer is pinged (a new one, never checked in, is not). A dead one
    raises ``DisconnectionError``, and the pool connects afresh."""
    since = record.info.pop(_IDLE_SINCE, None)
    if since is not None and _socket_closed(dbapi_conn):
        raise DisconnectionError("the server closed a pooled connection: connecting again")
    if since is None or time.monotonic() - since < PING_AFTER_IDLE:
        return
    record.info[PINGS] = record.info.get(PINGS, 0) + 1
    try:
        alive = dialect.do_ping(dbapi_conn)
    except dialect.loaded_dbapi.Error as exc:
        if not dialect.is_disconnect(exc, dbapi_conn, None):
            raise
        alive = False
    if not alive:
        raise DisconnectionError("a pooled connection idle since before the server dropped it: connecting again")


def file_lineage(url: URL, table: str) -> Lineage:
    """A database file's table: ``<backend>:///abs/path`` / ``table`` (Airflow writes the asset
    URI ``<backend>:/abs/path/table``)."""
    backend = url.get_backend_name()
    path = url.database or ":memory:"
    path = path if path == ":memory:" else os.path.abspath(path)
    namespace = f"{backend}://{path}" if path.startswith("/") else f"{backend}:///{path}"
    return Lineage(namespace, table, f"{namespace}/{table}")


class Connections(Facts):
    def __init__(self, name: str = "generic") -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"

    # --- URLs and engines ------------------------------------------------------------------------

    def normalize_url(self, url: URL) -> URL:
        """The URL the engine is made from (e.g. a default driver)."""
        return url

    def engine_url(self, url: URL) -> URL:
        """The URL ``create_engine`` is given (after ``normalize_url``): without query parameters
        only the family reads (``engine_arguments`` gets the URL as the user gave it)."""
        return url

    def engine_arguments(self, url: URL, *, read_only: bool = False) -> dict[str, Any]:
        """Keyword arguments for ``create_engine`` (``read_only``: only where ``opens_read_only``)."""
        return dict(self.engine_options)

    def prepare_engine(self, engine: Engine, *, read_only: bool = False) -> None:
        """Set up a new engine: every new connection runs ``utc_session`` (naive timestamps, and
        the partition bounds compared with them, are UTC whatever the server's time zone); a
        pooled connection is checked when taken again (``_on_checkout``: its socket polled, a ping
        after ``PING_AFTER_IDLE`` seconds idle)."""
        if self.utc_session:
            event.listen(engine, "connect", functools.partial(_on_connect, self.utc_session))
        event.listen(engine, "checkin", _on_checkin)
        event.listen(engine, "checkout", functools.partial(_on_checkout, engine.dialect))

    def session_time_zone(self) -> str:
        """How a session is put in UTC (docs)."""
        return "; ".join(f"`{s}` on connect" for s in self.utc_session) or "none set"

    def database_file(self, url: URL) -> str | None:
        """The file the URL names that connecting would create when missing (None: no such file)."""
        return None

    def local_file(self, url: URL) -> str | None:
        """The database file on this machine the URL names, as written (a relative path is
        relative to the working directory); None for a server or an in-memory database."""
        return self.database_file(url)

    def in_memory(self, url: URL) -> bool:
        """Whether the URL names a database only this process sees (another process opening it
        would see its own, empty one)."""
        return False

    def release(self, engine: Engine) -> None:
        """Close the engine's connections when the process is done with it."""
        engine.dispose()

    def read_only_reason(self, engine: Engine, schema: str | None) -> str | None:
        """Why the output tables in ``schema`` cannot be written though no grant is missing (a
        database opened read-only), checked before judging where the family has no grants; None:
        nothing known against it (the default: SQLite's read-only file already fails when the
        tables are ensured, in ``BEGIN IMMEDIATE``)."""
        return None

    def read_options(self, *, snapshot: bool) -> Mapping[str, Any]:
        """Execution options of a read transaction (``snapshot``: every statement sees one state)."""
        if snapshot and self.snapshot_isolation:
            return {"isolation_level": self.snapshot_isolation}
        return {}

    # --- reads and writes ------------------------------------------------------------------------

    def stream_batches(self, conn: Connection, stmt: Any, batch: int) -> Iterator[Sequence[Any]]:
        """``stmt``'s rows in batches of up to ``batch``, streamed from the cursor."""
        yield from conn.execution_options(stream_results=True, yield_per=batch).execute(stmt).partitions()

    def read_rows(self, conn: Connection, stmt: Any, params: Mapping[str, Any]) -> list[dict[str, Any]]:
        """A chunk read's rows as dicts keyed by label."""
        return dict_rows(conn.execute(stmt, dict(params)))

    def write_conflict(self, exc: BaseException) -> bool:
        """Whether ``exc`` is a write conflict with a concurrent transaction that the same
        (idempotent) write transaction, run again, gets past."""
        return False

    # --- claims, statistics, lineage -------------------------------------------------------------

    def claim_liveness(self, engine: Engine, holder: str) -> AbstractContextManager[None]:
        """While a claim holder (``warehouse/claims.py``) runs: what shows the database it is
        alive, so that its claims can be taken over the moment it is not
        (``claim_holder_gone``). Generic: nothing (its process, on this host, and its lease tell)."""
        return nullcontext()

    def claim_holder_gone(self, engine: Engine, holder: ClaimHolder) -> str | None:
        """Why the claim ``holder`` (of another process) cannot be alive, as the family knows it,
        or None. Generic: the family does not know (its process and lease are checked anyway)."""
        return None

    def analyze_if_grown(self, engine: Engine, tables: Any, written: Mapping[str, int]) -> list[str]:
        """Refresh the planner's statistics of output tables this process has grown (``written``:
        table name -> rows); returns the tables analyzed. Generic: nothing to do."""
        return []

    def lineage(self, url: URL, table: str) -> Lineage:
        """``<backend>://host[:port]`` / ``database.table``; a unix-socket (or missing) host is
        this machine, ``localhost``."""
        host = url.host if url.host and "/" not in url.host else "localhost"
        namespace = f"{url.get_backend_name()}://{host}" + (f":{url.port}" if url.port else "")
        database = url.database or "default"
        return Lineage(namespace, f"{database}.{table}", f"{namespace}/{database}/{table}")
