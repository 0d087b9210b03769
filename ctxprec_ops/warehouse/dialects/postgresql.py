"""PostgreSQL: INSERT ... ON CONFLICT (and COPY), = ANY(array) binds, advisory-lock claims."""

from ctxprec_ops.warehouse.dialects import Dialect

DIALECT = Dialect(name="postgresql", native_upsert=True, in_list="any_array", claims="advisory")
