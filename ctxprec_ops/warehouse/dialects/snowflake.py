"""Snowflake: no advisory locks and unenforced primary keys, so chunk claims are leases
(``warehouse/lease_claims.py``, which does not rely on the key)."""

from ctxprec_ops.warehouse.dialects import Dialect

DIALECT = Dialect(name="snowflake", native_insert=None, in_list="expanding", claims="lease")
