"""SQLite: INSERT ... ON CONFLICT, expanding IN binds, no claims (one writer per file)."""

from __future__ import annotations

from sqlalchemy.dialects.sqlite import insert

from ctxprec_ops.warehouse.dialects import Dialect, on_conflict

DIALECT = Dialect(name="sqlite", native_insert=on_conflict(insert), in_list="expanding", claims="none")
