"""``ScoringKey``: what identifies a score — the metric, the judge model, the prompt version, the
input table and the column mapping (changing any of them re-judges). ``ctxprec_scores`` and
``ctxprec_failures`` hold one row per (log id, key): ``ScoringKey.ROW_KEY``, their primary key, is
declared here once for every table and row that carries it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from sqlalchemy import and_

__all__ = ["ScoringKey"]


@dataclass(frozen=True)
class ScoringKey:
    """One scoring configuration: scores and failures are unique per (log_id, *this*)."""

    #: the key's columns, as the output tables name them (the field names of this class)
    FIELDS: ClassVar[tuple[str, ...]] = ("metric", "judge_model", "prompt_version", "source_table", "mapping")
    #: the columns that identify a score or failure row: its log id and its key
    ROW_KEY: ClassVar[tuple[str, ...]] = ("log_id", *FIELDS)

    metric: str
    judge_model: str
    prompt_version: str
    #: the input table (``SourceTable.name``); None only to read tables written before the
    #: column existed
    source_table: str | None = None
    #: the column mapping's fingerprint (``pipeline.mapping.mapping_id``); None: any (readers of
    #: tables written before the column existed). Tables without the column ignore it.
    mapping: str | None = None

    def values(self) -> dict[str, Any]:
        """``{column: value}`` of the key: the key's part of a row written under it."""
        return {name: getattr(self, name) for name in self.FIELDS}

    def where(self, table: Any) -> Any:
        return and_(*(table.c[name] == value for name, value in self.fields(table)))

    def fields(self, table: Any) -> list[tuple[str, str]]:
        """The (column, value) equalities that select this key's rows of ``table``."""
        return [
            (name, value)
            for name, value in self.values().items()
            if value is not None and (name != "mapping" or name in table.c)
        ]
