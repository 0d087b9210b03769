"""The warehouse layer (SQLAlchemy 2 Core).

- ``dialects``: one class per warehouse family (SQLite, PostgreSQL, MySQL / MariaDB, DuckDB,
  Snowflake, and the generic base), found by SQLAlchemy dialect name or entry point: what
  differs between warehouses, as methods and capabilities; nothing else names a dialect;
- ``engine``: engines from URLs, write transactions;
- ``identifiers``: validation of configured table/schema/column names;
- ``source``: reflection of the source tables, the UTC-day partition filter, keyset reads;
- ``schema``: the ``ctxprec_*`` output tables (``types``: the column types each family
  chooses); ``upsert``: idempotent writes; ``migrate``: older tables brought up to date;
- ``store``: the output-table queries the pipeline needs; ``claims``: chunk claims.

Rows become test cases above this layer (``pipeline.rows``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._lazy import lazy_exports

if TYPE_CHECKING:
    from .engine import display_url, get_engine, normalize_url, write_transaction
    from .identifiers import split_table_name, validate_identifier
    from .schema import ensure_output_tables, output_tables

#: public name -> its module (imported on first use, ``ctxprec_ops._lazy``)
_EXPORTS = {
    "display_url": ".engine",
    "get_engine": ".engine",
    "normalize_url": ".engine",
    "write_transaction": ".engine",
    "split_table_name": ".identifiers",
    "validate_identifier": ".identifiers",
    "ensure_output_tables": ".schema",
    "output_tables": ".schema",
}

__all__ = [
    "get_engine",
    "normalize_url",
    "display_url",
    "write_transaction",
    "validate_identifier",
    "split_table_name",
    "ensure_output_tables",
    "output_tables",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
