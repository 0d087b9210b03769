"""The MERGE family: warehouses whose primary keys are informational only (Snowflake's are never
enforced), where an insert-or-update must never itself create a second row of a key. A member
(``SnowflakeDialect``) supplies its ``MERGE`` statement (``merge_statement``); the rest is here:

1. the rows are de-duplicated inside the chunk (last row wins, ``write_rows.dedupe``);
2. they are loaded into a session-local temporary table shaped like the target
   (``CREATE OR REPLACE TEMPORARY TABLE``, then multi-row ``INSERT ... VALUES``, ``BATCH`` rows
   a statement): a typed stage, so a column whose values are all NULL keeps its type, which a
   ``VALUES`` list in the MERGE itself does not;
3. one ``MERGE INTO target USING stage ON key WHEN MATCHED THEN UPDATE ... WHEN NOT MATCHED
   THEN INSERT ...`` applies them (insert-if-absent: without the WHEN MATCHED branch).

Three round trips per table and chunk, whatever its rows, inside the caller's transaction. Two
writers racing on one key could still both insert it (chunk claims keep them apart); the readers
keep the latest row of a key where keys are not enforced.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any, ClassVar

from sqlalchemy import Column, MetaData, Table, insert
from sqlalchemy.engine import Connection
from sqlalchemy.schema import CreateTable

from ..write_rows import ColumnRows, batches, decoded, dedupe
from .base import Dialect

__all__ = ["MergeDialect"]


def _stage(conn: Connection, table: Table) -> Table:
    """The temporary staging table of ``table`` for this connection's session: its columns, no
    constraints. Kept with the connection (it goes with it), named with a suffix drawn once per
    connection: a temporary table is the session's own on Snowflake, but an emulator may keep one
    catalogue of them all."""
    info = conn.info
    suffix = info.setdefault("ctxprec_stage_suffix", uuid.uuid4().hex[:8])
    stages: dict[tuple[str | None, str], Table] = info.setdefault("ctxprec_merge_stages", {})
    stage = stages.get((table.schema, table.name))
    if stage is None:
        columns = [Column(c.name, c.type, nullable=True) for c in table.columns]
        name = f"{table.name}_stage_{suffix}"
        stage = stages[(table.schema, table.name)] = Table(
            name, MetaData(), *columns, schema=table.schema, prefixes=["TEMPORARY"]
        )
    return stage


class MergeDialect(Dialect):
    """A warehouse family that writes by staging the chunk and one ``MERGE`` on the key."""

    #: the MERGE's rows are bound by SQL the family writes itself, JSON columns as their text
    json_as_text: ClassVar[bool] = False

    write_path = "the chunk de-duplicated, staged in a session temporary table, one `MERGE` on the key per table"
    native_upsert = True
    keys_enforced = False

    def merge_statement(
        self, table: Table, stage: Any, keys: list[str], columns: list[str], others: list[str] | None
    ) -> Any:
        """``MERGE INTO table USING stage ON keys``: update ``others`` where the key matches
        (None: leave those rows as they are), insert ``columns`` elsewhere."""
        raise NotImplementedError(f"{type(self).__name__} has no MERGE statement")

    def create_stage(self, conn: Connection, stage: Table) -> None:
        """(Re)create the session's empty stage."""
        ddl = str(CreateTable(stage).compile(dialect=conn.dialect)).strip()
        conn.exec_driver_sql(ddl.replace("CREATE TEMPORARY TABLE", "CREATE OR REPLACE TEMPORARY TABLE", 1))

    def merge_rows(
        self, conn: Connection, table: Table, rows: Sequence[dict[str, Any]], keys: list[str], others: list[str] | None
    ) -> int:
        """Stage ``rows`` (distinct keys, every row the same columns) and MERGE them into ``table``."""
        if not rows:
            return 0
        stage = _stage(conn, table)
        self.create_stage(conn, stage)
        for batch in batches(rows):
            conn.execute(insert(stage).values(list(batch)))
        conn.execute(self.merge_statement(table, stage.alias("s"), keys, list(rows[0]), others))
        return len(rows)

    def merge_input(self, rows: Sequence[dict[str, Any]], keys: list[str]) -> Sequence[dict[str, Any]]:
        """``rows`` with distinct keys, JSON values decoded again for SQLAlchemy's binding (kept as
        text where the family writes its own SQL: ``json_as_text``)."""
        distinct = dedupe(rows, keys)
        return distinct if self.json_as_text else decoded(distinct)

    def upsert(self, conn: Connection, table: Table, rows: Sequence[dict[str, Any]], keys: list[str]) -> int:
        others = [c for c in rows[0] if c not in keys]
        return self.merge_rows(conn, table, self.merge_input(rows, keys), keys, others)

    def insert_ignore(
        self, conn: Connection, table: Table, rows: Sequence[dict[str, Any]] | ColumnRows, keys: list[str]
    ) -> int:
        dicts = rows.as_dicts() if isinstance(rows, ColumnRows) else rows
        return self.merge_rows(conn, table, self.merge_input(dicts, keys), keys, None)
