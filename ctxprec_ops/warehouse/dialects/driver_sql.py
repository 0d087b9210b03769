"""The text of the look-ups and the failures clean-up that some families send as driver SQL
around their own ``IN`` lists (SQLite: ``?`` placeholders; MySQL / MariaDB through PyMySQL:
literals): written once here, the lists each family's."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import Table

__all__ = ["select_from", "scored_failures"]


def select_from(q: Any, table: Table, columns: Sequence[str | None]) -> str:
    """``SELECT columns FROM table`` (a None column reads NULL); ``q``: the identifier preparer."""
    cols = ", ".join("NULL" if c is None else q.quote(table.c[c].name) for c in columns)
    return f"SELECT {cols} FROM {q.format_table(table)}"


def scored_failures(q: Any, failures: Table, scores: Table) -> tuple[str, str]:
    """``DELETE FROM failures`` and the condition that a score exists under the failure row's key
    (the scores' primary key)."""
    f, s = q.format_table(failures), q.format_table(scores)
    same = " AND ".join(f"sc.{q.quote(c.name)} = {f}.{q.quote(c.name)}" for c in scores.primary_key.columns)
    return f"DELETE FROM {f}", f"EXISTS (SELECT 1 FROM {s} AS sc WHERE {same})"
