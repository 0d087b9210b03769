"""DuckDB: no advisory locks, so chunk claims are leases (``warehouse/lease_claims.py``)."""

from ctxprec_ops.warehouse.dialects import Dialect

DIALECT = Dialect(name="duckdb", native_insert=None, in_list="expanding", claims="lease")
