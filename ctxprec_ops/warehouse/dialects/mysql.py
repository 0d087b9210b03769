"""MySQL / MariaDB: INSERT ... ON DUPLICATE KEY UPDATE, expanding IN binds, GET_LOCK claims."""

from ctxprec_ops.warehouse.dialects import Dialect

DIALECT = Dialect(name="mysql", native_upsert=True, in_list="expanding", claims="named_lock")
