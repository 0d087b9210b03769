"""Snowflake: a member of the MERGE family (``merge.py``) with snowflake-sqlalchemy's ``MergeInto``,
keys not enforced (readers keep each key's latest row), claims that rely on no key (``warehouse/claims.py``),
no secondary indexes (standard tables take none), JSON kept as text (its VARIANT takes JSON only
through ``PARSE_JSON``), sessions in UTC (a session parameter), write conflicts retried."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import Table, Text, and_
from sqlalchemy.engine import URL
from sqlalchemy.types import TypeDecorator, TypeEngine

from ...json_text import JSONText
from .merge import MergeDialect
from .reads import TimeMode

__all__ = ["SnowflakeDialect", "JSONAsText"]

#: "statement aborted: the table is locked by another transaction" (lock wait timeout)
_LOCK_TIMEOUT = 625


class JSONAsText(TypeDecorator[Any]):
    """JSON kept as its text (reads give the decoded value)."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Any) -> Any:
        if value is None or isinstance(value, JSONText):
            return value
        return json.dumps(value)

    def process_result_value(self, value: Any, dialect: Any) -> Any:
        return json.loads(value) if isinstance(value, str) else value


class SnowflakeDialect(MergeDialect):
    names = ("snowflake",)
    family = "Snowflake"
    claims = "lease"
    secondary_indexes = False

    def engine_arguments(self, url: URL, *, read_only: bool = False) -> dict[str, Any]:
        # the session parameter, not ALTER SESSION: one statement less per connection
        return {
            **super().engine_arguments(url, read_only=read_only),
            "connect_args": {"session_parameters": {"TIMEZONE": "UTC"}},
        }

    def session_time_zone(self) -> str:
        return "session parameter `TIMEZONE = 'UTC'`"

    def write_conflict(self, exc: BaseException) -> bool:
        """A write another transaction's lock made fail (lock wait timeout), or, under the
        fakesnow emulator, DuckDB's optimistic concurrency (a raw ``TransactionException`` or a
        ``ConstraintException`` on a key the other transaction inserted first); run again, the
        write updates or skips the row."""
        orig = getattr(exc, "orig", None) or exc
        if getattr(orig, "errno", None) == _LOCK_TIMEOUT:
            return True
        emulated = type(orig).__module__.startswith("_duckdb") or type(orig).__module__.startswith("duckdb")
        return emulated and type(orig).__name__ in ("TransactionException", "ConstraintException")

    def json_type(self) -> TypeEngine[Any]:
        return JSONAsText()

    def binary_key_type(self, size: int) -> TypeEngine[Any]:
        from sqlalchemy import LargeBinary

        return LargeBinary()  # BINARY; no length here: fakesnow runs DuckDB underneath

    def time_mode(self, column: Any) -> TimeMode | None:
        """Snowflake's timestamp types are not DateTime subclasses: TIMESTAMP_NTZ is naive (taken
        as UTC, like every naive timestamp), TIMESTAMP_TZ / TIMESTAMP_LTZ carry their offset."""
        kind = type(column.type).__name__.upper()
        if kind in ("TIMESTAMP_TZ", "TIMESTAMP_LTZ"):
            return "aware"
        if kind == "TIMESTAMP_NTZ":
            return "naive"
        return super().time_mode(column)

    def merge_statement(
        self, table: Table, stage: Any, keys: list[str], columns: list[str], others: list[str] | None
    ) -> Any:
        from snowflake.sqlalchemy import MergeInto  # the [snowflake] extra

        merge = MergeInto(table, stage, and_(*[table.c[k] == stage.c[k] for k in keys]))
        if others:
            merge.when_matched_then_update().values(**{c: stage.c[c] for c in others})
        merge.when_not_matched_then_insert().values(**{c: stage.c[c] for c in columns})
        return merge
