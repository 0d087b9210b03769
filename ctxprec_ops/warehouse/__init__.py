"""The warehouse layer (SQLAlchemy 2 Core).

- ``engine``: engines from URLs (psycopg 3 for PostgreSQL; WAL, busy timeout and
  ``BEGIN IMMEDIATE`` writes for SQLite), write transactions;
- ``identifiers``: validation of configured table/schema/column names;
- ``source``: reflection of the source tables, the UTC-day partition filter, keyset reads;
- ``rows``: source rows -> test cases, or a clear ``invalid_input`` message;
- ``schema``: the ``ctxprec_*`` output tables; ``upsert``: idempotent writes;
- ``store``: the output-table queries the pipeline needs.
"""

from .engine import display_url, get_engine, normalize_url, write_transaction
from .identifiers import split_table_name, validate_identifier
from .schema import ensure_output_tables, output_tables

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
