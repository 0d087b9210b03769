"""The warehouse tables as Airflow Assets (and OpenLineage datasets), and the run figures a
scoring task attaches to its asset event.

An asset's URI names the table where it lives — never a user name, password or query option —
in the AIP-60 form the database's provider defines where it has one:

- PostgreSQL: ``postgres://host:5432/database/schema/table`` (the postgres provider's form);
  OpenLineage ``postgres://host:5432`` / ``database.schema.table``.
- SQLite, DuckDB (a file): ``sqlite:/abs/path/file.db/table`` (Airflow's normal form of
  ``sqlite:///abs/...``); OpenLineage ``sqlite:///abs/path/file.db`` / ``table``.
- a unix-socket (or missing) host is written ``localhost``.
- other (MySQL, Snowflake ...): ``<backend>://host:port/database/table``; ``<backend>://host:port`` /
  ``database.table``.
- no warehouse resolvable where the DAG file is parsed: ``x-ctxprec://<connection id>/table``.

The URI is fixed when the DAG file is parsed (Airflow schedules on it), from the same warehouse
the tasks use: ``warehouse_url``, else the connection ``ctxprec_warehouse``, else
``CTXPREC_WAREHOUSE_URL``. An upstream DAG that writes the retrieval logs declares
``source_asset()`` as its outlet; the DAG scheduled on it then runs when it lands.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from airflow.sdk import Asset, Metadata
from sqlalchemy.engine import URL

from ..config import Settings
from ..pipeline.kinds import metric_kind
from .hooks import DEFAULT_WAREHOUSE_CONN_ID, CtxPrecWarehouseHook

__all__ = [
    "TableRef",
    "table_ref",
    "warehouse_url_at_parse",
    "scores_asset",
    "failures_asset",
    "source_asset",
    "run_extra",
    "attach_run_metadata",
]

#: the output tables (public names, never renamed)
SCORES_TABLE, FAILURES_TABLE = "ctxprec_scores", "ctxprec_failures"

#: the figures of a run that go into its asset event (``Metadata.extra``), all JSON scalars
RUN_EXTRA_FIELDS = (
    "status",
    "rows_total",
    "rows_scored",
    "rows_cached",
    "rows_failed",
    "mean_score",
    "pass_rate",
    "cost",
    "judge_model",
    "prompt_version",
    "run_id",
)


@dataclass(frozen=True)
class TableRef:
    """Where one warehouse table lives, credential-free: its asset URI and OpenLineage name."""

    namespace: str
    name: str
    uri: str
    table: str


def table_ref(url: URL | str | None, table: str, *, conn_id: str | None = None) -> TableRef:
    """The credential-free reference of ``table`` in the warehouse at ``url`` (None: unresolved)."""
    if url is None:
        ns = f"x-ctxprec://{conn_id or DEFAULT_WAREHOUSE_CONN_ID}"
        return TableRef(ns, table, f"{ns}/{table}", table)
    from sqlalchemy.engine import make_url

    from ..warehouse.dialects import lineage

    ref = lineage(make_url(url) if isinstance(url, str) else url, table)  # the warehouse family names it
    return TableRef(ref.namespace, ref.name, _normal(ref.uri), table)


def _normal(uri: str) -> str:
    """The URI as Airflow stores it (``Asset`` normalizes: an empty host drops the ``//``)."""
    return str(Asset(uri=uri).uri)


def warehouse_url_at_parse(warehouse_conn_id: str | None, warehouse_url: str | None = None) -> URL | None:
    """The warehouse URL the tasks will use, or None when none is configured where the DAG is parsed
    (or ``warehouse_url`` is a template, rendered only at run time)."""
    if warehouse_url and "{{" in warehouse_url:
        return None
    hook = CtxPrecWarehouseHook(warehouse_conn_id=warehouse_conn_id, warehouse_url=warehouse_url)
    try:
        return hook.get_url()
    except Exception:  # no connection or URL here: the asset names the connection instead
        return None


def _asset(ref: TableRef, *, conn_id: str | None = None) -> Asset:
    """The Asset of ``ref``; a URI the scheme's provider refuses falls back to the connection-named
    form (a DAG file must parse whatever the warehouse looks like)."""
    try:
        return Asset(uri=ref.uri, group="ctxprec", extra={"table": ref.table})
    except ValueError:
        fallback = table_ref(None, ref.table, conn_id=conn_id)
        return Asset(uri=fallback.uri, group="ctxprec", extra={"table": ref.table})


def scores_asset(warehouse_conn_id: str | None = DEFAULT_WAREHOUSE_CONN_ID, warehouse_url: str | None = None) -> Asset:
    """The Asset of ``ctxprec_scores`` in the configured warehouse."""
    url = warehouse_url_at_parse(warehouse_conn_id, warehouse_url)
    return _asset(table_ref(url, SCORES_TABLE, conn_id=warehouse_conn_id), conn_id=warehouse_conn_id)


def failures_asset(
    warehouse_conn_id: str | None = DEFAULT_WAREHOUSE_CONN_ID, warehouse_url: str | None = None
) -> Asset:
    """The Asset of ``ctxprec_failures`` (lineage output of every scoring task)."""
    url = warehouse_url_at_parse(warehouse_conn_id, warehouse_url)
    return _asset(table_ref(url, FAILURES_TABLE, conn_id=warehouse_conn_id), conn_id=warehouse_conn_id)


def source_asset(
    metric: str = "contextual_precision",
    *,
    source_table: str | None = None,
    warehouse_conn_id: str | None = DEFAULT_WAREHOUSE_CONN_ID,
    warehouse_url: str | None = None,
) -> Asset:
    """The Asset of the log table ``metric`` reads (``source_table``, else its ``CTXPREC_*`` table):
    the outlet an upstream DAG that writes the logs declares."""
    kind = metric_kind(metric)
    table = source_table or str(getattr(Settings.from_env(), kind.table_setting))
    url = warehouse_url_at_parse(warehouse_conn_id, warehouse_url)
    return _asset(table_ref(url, table, conn_id=warehouse_conn_id), conn_id=warehouse_conn_id)


def run_extra(result: Mapping[str, Any], *, partition_key: str, metric: str, source_table: str) -> dict[str, Any]:
    """The asset-event extra of a run (or chunk): partition, metric, source table and the figures."""
    extra: dict[str, Any] = {"partition_key": partition_key, "metric": metric, "source_table": source_table}
    for name in (*RUN_EXTRA_FIELDS, "index"):
        if name in result:
            extra["chunk" if name == "index" else name] = result[name]
    return extra


def attach_run_metadata(context: Any, outlets: list[Any], extra: dict[str, Any]) -> list[Metadata]:
    """Attach ``extra`` to the asset events of every Asset outlet of the task, as Airflow does with
    a ``Metadata`` a task yields; returns the ``Metadata`` attached."""
    events = context.get("outlet_events") if hasattr(context, "get") else None
    attached = []
    for outlet in outlets or []:
        if isinstance(outlet, Asset) and events is not None:
            meta = Metadata(outlet, dict(extra))
            events[meta.asset].extra.update(meta.extra)
            attached.append(meta)
    return attached
