"""Databricks (databricks-sqlalchemy): a member of the MERGE family, written to Databricks'
documented ``MERGE INTO`` grammar and checked as compiled SQL only — not run against a
workspace (no stand-in starts here: docs/warehouses.md).

Keys are informational (Unity Catalog does not enforce a primary key): readers keep each key's
latest row; claims rely on no key (``warehouse/claims.py``). A chunk is written per table as
one statement per ``BATCH`` rows, the rows an inline table of bound parameters cast to the target's
column types, nothing staged::

    MERGE INTO target AS t
    USING (SELECT CAST(c1 AS type1) AS c1, ... FROM VALUES (:r0_0, ...), ... AS v(c1, ...)) AS s
    ON t.k1 = s.k1 AND ...
    WHEN MATCHED THEN UPDATE SET c2 = s.c2, ...
    WHEN NOT MATCHED THEN INSERT (c1, ...) VALUES (s.c1, ...)

(insert-if-absent: without the WHEN MATCHED clause). JSON is kept as ``STRING``, instants as
``TIMESTAMP`` (SQLAlchemy's ``DateTime`` is ``TIMESTAMP_NTZ`` there)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Table, bindparam, text
from sqlalchemy.engine import Connection
from sqlalchemy.engine.interfaces import Dialect as SADialect
from sqlalchemy.sql.elements import TextClause
from sqlalchemy.types import DateTime, LargeBinary, String, TypeEngine

from ..write_rows import batches
from .merge import MergeDialect
from .snowflake import JSONAsText

__all__ = ["DatabricksDialect"]

#: Delta's optimistic-concurrency conflicts (``ConcurrentAppendException`` and its kin, error
#: classes ``DELTA_CONCURRENT_*``): the losing transaction may be run again
_CONFLICT = re.compile(r"Concurrent\w*Exception|DELTA_CONCURRENT_")


class DatabricksDialect(MergeDialect):
    names = ("databricks",)
    family = "Databricks"
    write_path = (
        "the chunk de-duplicated, one `MERGE INTO … USING (SELECT CAST(…) FROM VALUES …)` per table "
        "(500 rows a statement); compiled SQL only, not run against a server"
    )
    secondary_indexes = False
    json_as_text = True

    def write_conflict(self, exc: BaseException) -> bool:
        """A MERGE that lost Delta's optimistic concurrency check to a concurrent writer of the
        table; run again, it updates or skips the rows the other one wrote."""
        return bool(_CONFLICT.search(str(getattr(exc, "orig", None) or exc)))

    def session_time_zone(self) -> str:
        return "none set: `TIMESTAMP` is an instant, `TIMESTAMP_NTZ` naive (UTC)"

    # --- column types ----------------------------------------------------------------------------

    def key_text_type(self, length: int | None) -> TypeEngine[Any]:
        """``STRING`` without a length where none is asked for: a key's text is as long as the id."""
        return String(length) if length is not None else String()

    def json_type(self) -> TypeEngine[Any]:
        return JSONAsText()  # STRING

    def binary_key_type(self, size: int) -> TypeEngine[Any]:
        return LargeBinary()  # BINARY

    def timestamp_type(self) -> TypeEngine[Any]:
        try:
            from databricks.sqlalchemy import TIMESTAMP  # the [databricks] extra
        except ImportError:
            return DateTime(timezone=True)
        return TIMESTAMP()

    # --- writes ----------------------------------------------------------------------------------

    def merge_batch(
        self,
        sa_dialect: SADialect,
        table: Table,
        rows: Sequence[dict[str, Any]],
        keys: list[str],
        others: list[str] | None,
    ) -> TextClause:
        """The ``MERGE INTO`` statement of ``rows`` (distinct keys, the same columns each) for
        the SQLAlchemy dialect ``sa_dialect``: each value a parameter of its column's type."""
        prep = sa_dialect.identifier_preparer
        cols = list(rows[0])
        q = {c: prep.quote(c) for c in cols}
        casts = ", ".join(f"CAST(v.{q[c]} AS {table.c[c].type.compile(dialect=sa_dialect)}) AS {q[c]}" for c in cols)
        values = ", ".join("(" + ", ".join(f":r{i}_{j}" for j in range(len(cols))) + ")" for i in range(len(rows)))
        sql = (
            f"MERGE INTO {prep.format_table(table)} AS t "
            f"USING (SELECT {casts} FROM VALUES {values} AS v({', '.join(q[c] for c in cols)})) AS s "
            f"ON {' AND '.join(f't.{q[k]} = s.{q[k]}' for k in keys)}"
        )
        if others:
            sql += " WHEN MATCHED THEN UPDATE SET " + ", ".join(f"{q[c]} = s.{q[c]}" for c in others)
        sql += f" WHEN NOT MATCHED THEN INSERT ({', '.join(q[c] for c in cols)})"
        sql += f" VALUES ({', '.join(f's.{q[c]}' for c in cols)})"
        params = [
            bindparam(f"r{i}_{j}", row[c], type_=table.c[c].type)
            for i, row in enumerate(rows)
            for j, c in enumerate(cols)
        ]
        return text(sql).bindparams(*params)

    def merge_rows(
        self, conn: Connection, table: Table, rows: Sequence[dict[str, Any]], keys: list[str], others: list[str] | None
    ) -> int:
        for batch in batches(rows):
            conn.execute(self.merge_batch(conn.dialect, table, batch, keys, others))
        return len(rows)
