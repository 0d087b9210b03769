"""PostgreSQL: INSERT ... ON CONFLICT (and COPY, ``warehouse/pg_copy.py``), = ANY(array) binds,
advisory-lock claims."""

from __future__ import annotations

from sqlalchemy.dialects.postgresql import insert

from ctxprec_ops.warehouse.dialects import Dialect, on_conflict

DIALECT = Dialect(name="postgresql", native_insert=on_conflict(insert), in_list="any_array", claims="advisory")
