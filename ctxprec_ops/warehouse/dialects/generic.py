"""Last resort for a dialect no module claims: per-row update-then-insert, expanding binds."""

from ctxprec_ops.warehouse.dialects import Dialect

DIALECT = Dialect(name="generic", native_insert=None, in_list="expanding", claims="none")
