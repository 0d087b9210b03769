"""The MERGE family's write path (Snowflake; ``Dialect.merge``): stage the chunk, then one MERGE.

On warehouses whose primary keys are informational only (Snowflake's are never enforced), an
insert-or-update must never itself create a second row of a key:

1. the rows are de-duplicated inside the chunk (last row wins, ``write_rows._dedupe``);
2. they are loaded into a session-local temporary table shaped like the target
   (``CREATE OR REPLACE TEMPORARY TABLE``, then multi-row ``INSERT ... VALUES``, ``BATCH`` rows
   a statement): a typed stage, so a column whose values are all NULL keeps its type, which a
   ``VALUES`` list in the MERGE itself does not;
3. one ``MERGE INTO target USING stage ON key WHEN MATCHED THEN UPDATE ... WHEN NOT MATCHED
   THEN INSERT ...`` applies them (``insert_ignore``: without the WHEN MATCHED branch).

Three round trips per table and chunk, whatever its rows, inside the caller's transaction. Two
writers racing on one key could still both insert it (chunk claims keep them apart,
``warehouse/lease_claims.py``); the readers keep the latest row of a key where keys are not
enforced.
"""

from __future__ import annotations

import threading
import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Column, MetaData, Table, and_, insert
from sqlalchemy.engine import Connection
from sqlalchemy.schema import CreateTable

from .write_rows import _batches

__all__ = ["merge_rows"]

_stages: dict[tuple[str | None, str, str], Table] = {}
_lock = threading.Lock()


def _stage(conn: Connection, table: Table) -> Table:
    """The temporary staging table of ``table`` for this connection's session: its columns, no
    constraints. Its name carries a suffix drawn once per connection: a temporary table is the
    session's own on Snowflake, but fakesnow keeps one catalogue of them all."""
    suffix = conn.info.setdefault("ctxprec_stage_suffix", uuid.uuid4().hex[:8])
    key = (table.schema, table.name, suffix)
    with _lock:
        stage = _stages.get(key)
        if stage is None:
            columns = [Column(c.name, c.type, nullable=True) for c in table.columns]
            name = f"{table.name}_stage_{suffix}"
            stage = _stages[key] = Table(name, MetaData(), *columns, schema=table.schema, prefixes=["TEMPORARY"])
    return stage


def merge_rows(
    conn: Connection, table: Table, rows: Sequence[dict[str, Any]], keys: list[str], others: list[str] | None
) -> int:
    """Stage ``rows`` (distinct keys, every row the same columns) and MERGE them into ``table``:
    update ``others`` of the rows whose key exists (``others=None``: leave those rows as they
    are), insert the rest. Returns the number of rows given."""
    if not rows:
        return 0
    from snowflake.sqlalchemy import MergeInto  # the [snowflake] extra; only this family gets here

    stage = _stage(conn, table)
    ddl = str(CreateTable(stage).compile(dialect=conn.dialect)).strip()
    conn.exec_driver_sql(ddl.replace("CREATE TEMPORARY TABLE", "CREATE OR REPLACE TEMPORARY TABLE", 1))
    for batch in _batches(rows):
        conn.execute(insert(stage).values(list(batch)))
    s = stage.alias("s")
    cols = list(rows[0].keys())
    merge = MergeInto(table, s, and_(*[table.c[k] == s.c[k] for k in keys]))
    if others:
        merge.when_matched_then_update().values(**{c: s.c[c] for c in others})
    merge.when_not_matched_then_insert().values(**{c: s.c[c] for c in cols})
    conn.execute(merge)
    return len(rows)
