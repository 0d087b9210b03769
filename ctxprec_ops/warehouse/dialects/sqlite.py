"""SQLite: INSERT ... ON CONFLICT, expanding IN binds, no claims (one writer per file)."""

from ctxprec_ops.warehouse.dialects import Dialect

DIALECT = Dialect(name="sqlite", native_upsert=True, in_list="expanding", claims="none")
