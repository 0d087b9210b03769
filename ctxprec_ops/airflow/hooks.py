"""``CtxPrecWarehouseHook``: an Airflow connection (or a URL) -> the warehouse's SQLAlchemy engine.

Resolution order: an explicit ``warehouse_url``; else the connection ``warehouse_conn_id``
(default ``ctxprec_warehouse``) when it exists; else ``CTXPREC_WAREHOUSE_URL``; else a clear
``MissingWarehouseError`` — never the CLI's embedded default ``sqlite:///ctxprec.db``: under an
orchestrator that would be a throw-away file in each worker's working directory, with the output
tables created there before the run failed on the missing source table. (A deliberate SQLite
warehouse is one setting away: ``CTXPREC_WAREHOUSE_URL=sqlite:////abs/path/ctxprec.db``.)

Connections are turned into URLs by their own providers' hooks, as those providers define them:

- ``sqlite``: the database file in ``host`` (``SqliteHook``);
- ``postgres``: ``PostgresHook.sqlalchemy_url`` (psycopg 3, ``postgresql+psycopg``), plus the
  libpq options (``sslmode`` ...) kept in the connection's extra;
- any other type whose provider hook exposes ``sqlalchemy_url`` (MySQL, MSSQL, ...).

The password never leaves the engine: ``describe()`` is the masked form for logs, and the
password is registered with ``ctxprec_ops.secrets`` so ``redact`` strips it from any message.
"""

from __future__ import annotations

from typing import Any

from airflow.sdk import BaseHook
from airflow.sdk.exceptions import AirflowNotFoundException
from sqlalchemy.engine import URL, Engine, make_url

from ..config import Settings
from ..secrets import redact, redact_url, register_secret

__all__ = [
    "CtxPrecWarehouseHook",
    "DEFAULT_WAREHOUSE_CONN_ID",
    "MissingWarehouseError",
    "mask",
]

DEFAULT_WAREHOUSE_CONN_ID = "ctxprec_warehouse"


class MissingWarehouseError(ValueError):
    """No warehouse is configured for the Airflow task (no connection, no CTXPREC_WAREHOUSE_URL)."""


# libpq options a postgres connection keeps in its extra that belong in the SQLAlchemy URL
_LIBPQ_EXTRAS = frozenset(
    {
        "sslmode",
        "sslcert",
        "sslkey",
        "sslrootcert",
        "sslcrl",
        "sslpassword",
        "connect_timeout",
        "application_name",
        "options",
        "target_session_attrs",
        "keepalives",
        "keepalives_idle",
        "keepalives_interval",
        "keepalives_count",
        "gssencmode",
        "channel_binding",
    }
)


def mask(secret: str | None) -> None:
    """Hide ``secret`` from ctxprec's ``redact`` and from Airflow's own masker (task logs,
    rendered template fields)."""
    if not secret:
        return
    register_secret(secret)
    try:
        from airflow.sdk.log import mask_secret

        mask_secret(secret)
    except Exception:  # pragma: no cover - masking is best effort outside a task
        pass


def optional_connection(conn_id: str) -> Any:
    """The Airflow connection ``conn_id``, or None when it is not defined anywhere."""
    try:
        return BaseHook.get_connection(conn_id)
    except AirflowNotFoundException:
        return None


def mask_url_password(url: str | None) -> None:
    """Mask the password of a literal SQLAlchemy URL (templated or unparsable values are skipped)."""
    if not url or "{{" in url:
        return
    try:
        mask(make_url(url).password)
    except Exception:
        pass


class CtxPrecWarehouseHook(BaseHook):
    """The ctxprec warehouse as a SQLAlchemy engine, from an Airflow connection or a URL."""

    conn_name_attr = "warehouse_conn_id"
    default_conn_name = DEFAULT_WAREHOUSE_CONN_ID
    conn_type = "generic"
    hook_name = "ctxprec warehouse"

    def __init__(
        self,
        warehouse_conn_id: str | None = DEFAULT_WAREHOUSE_CONN_ID,
        warehouse_url: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(**kwargs)
        self.warehouse_conn_id = warehouse_conn_id or None
        self.warehouse_url = warehouse_url or None
        self._url: URL | None = None
        self.source = ""  # where the URL came from, for logs

    # -- resolution ----------------------------------------------------------------------
    def get_url(self) -> URL:
        """The warehouse's SQLAlchemy URL (contains the password: never log it, use ``describe``)."""
        if self._url is None:
            self._url, self.source = self._resolve()
            if self._url.password:
                mask(str(self._url.password))
        return self._url

    def _resolve(self) -> tuple[URL, str]:
        if self.warehouse_url:
            return _parse(self.warehouse_url, "warehouse_url"), "warehouse_url"
        if self.warehouse_conn_id:
            conn = optional_connection(self.warehouse_conn_id)
            if conn is not None:
                return _url_from_connection(conn), f"connection {self.warehouse_conn_id!r}"
        settings = Settings.from_env()
        if settings.is_set("CTXPREC_WAREHOUSE_URL"):
            return _parse(settings.warehouse_url, "CTXPREC_WAREHOUSE_URL"), "CTXPREC_WAREHOUSE_URL"
        conn_id = self.warehouse_conn_id or DEFAULT_WAREHOUSE_CONN_ID
        raise MissingWarehouseError(
            f"no warehouse configured: there is no Airflow connection {conn_id!r} and CTXPREC_WAREHOUSE_URL is "
            f"not set for this worker. Add the connection (airflow connections add {conn_id} --conn-type postgres "
            "...) or set CTXPREC_WAREHOUSE_URL on the scheduler and workers; nothing was read or written"
        )

    def get_engine(self) -> Engine:
        """The warehouse engine (ctxprec's engine factory: psycopg 3, SQLite WAL + busy timeout)."""
        from ..warehouse.engine import get_engine, require_sqlite_file

        url = self.get_url()
        require_sqlite_file(url, setting=self.source)  # never a new, empty SQLite file
        return get_engine(url)

    def get_conn(self) -> Engine:
        """``BaseHook`` API: the engine."""
        return self.get_engine()

    def describe(self) -> str:
        """The URL with its password masked, and where it came from — safe to log."""
        return f"{self.get_url().render_as_string(hide_password=True)} (from {self.source})"


def _parse(url: str, what: str) -> URL:
    from ..warehouse.engine import default_driver

    try:
        u = make_url(url)
    except Exception as exc:  # ArgumentError echoes the URL: never show a password
        raise ValueError(f"{what} is not a SQLAlchemy URL: {redact_url(url)!r} ({type(exc).__name__})") from None
    return default_driver(u)  # the warehouse family's (psycopg 3 for PostgreSQL)


def _url_from_connection(conn: Any) -> URL:
    """Build the SQLAlchemy URL through the connection type's provider hook."""
    conn_type = (conn.conn_type or "").lower()
    mask(conn.password)
    try:
        if conn_type == "sqlite":
            from airflow.providers.sqlite.hooks.sqlite import SqliteHook

            if not conn.host:
                raise ValueError(f"sqlite connection {conn.conn_id!r} has no database file in 'host'")
            return make_url(SqliteHook(sqlite_conn_id=conn.conn_id).get_uri())
        if conn_type in ("postgres", "postgresql"):
            from airflow.providers.postgres.hooks.postgres import PostgresHook

            url = PostgresHook(postgres_conn_id=conn.conn_id).sqlalchemy_url
            extra = conn.extra_dejson or {}
            query = dict(url.query)
            for key in sorted(_LIBPQ_EXTRAS & set(extra)):
                query.setdefault(key, str(extra[key]))
            return url.set(query=query)
        hook_url: URL | str | None
        try:
            hook = conn.get_hook()
            hook_url = hook.sqlalchemy_url
        except Exception:  # no provider for the type, or its hook builds no SQLAlchemy URL
            hook_url = None
        if hook_url is None:
            raise ValueError(
                f"connection {conn.conn_id!r} of type {conn_type!r} cannot be turned into a SQLAlchemy "
                "URL; use a 'sqlite' or 'postgres' connection, or set warehouse_url"
            )
        return make_url(hook_url)
    except ImportError as exc:
        raise ValueError(
            f"connection {conn.conn_id!r} of type {conn_type!r} needs its Airflow provider: "
            f"pip install 'ctxprec-ops[airflow]' ({exc.name})"
        ) from None
    except ValueError as exc:
        raise ValueError(redact(str(exc))) from None
