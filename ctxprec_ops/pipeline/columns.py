"""Column sets of the input tables: logical name -> the table's column name (validated).

A mapping comes from Python (``SourceColumns(retrieval_context="contexts")``), from a JSON
object in ``CTXPREC_SOURCE_COLUMNS`` / ``CTXPREC_CONVERSATION_COLUMNS``, or from repeated
``--column NAME=COLUMN`` flags; all three go through ``ColumnSet.from_mapping``.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import asdict, dataclass, fields, replace
from typing import Any, ClassVar, TypeVar

from ..warehouse.identifiers import MAX_SEGMENT_NAME, validate_identifier

__all__ = [
    "ColumnSet",
    "SourceColumns",
    "LabelColumns",
    "ConversationColumns",
    "parse_column_flags",
    "parse_segments",
]

C = TypeVar("C", bound="ColumnSet")


@dataclass(frozen=True)
class ColumnSet:
    """Base of the column sets: every field is a logical column, its value the real name."""

    id: str = "id"
    event_time: str = "event_time"
    #: logical columns a table may lack (read as NULL) while they keep their default name
    OPTIONAL: ClassVar[tuple[str, ...]] = ()

    def __post_init__(self) -> None:
        for f in fields(self):
            validate_identifier(getattr(self, f.name), f"column name for {f.name!r}")

    def as_dict(self) -> dict[str, str]:
        return asdict(self)

    def optional_missing_ok(self) -> frozenset[str]:
        """Optional columns that were not mapped explicitly: absent from the table is fine."""
        default = type(self)()
        return frozenset(n for n in self.OPTIONAL if getattr(self, n) == getattr(default, n))

    @classmethod
    def logical_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))

    @classmethod
    def from_mapping(cls: type[C], mapping: Mapping[str, str] | None, *, source: str = "column mapping") -> C:
        """Defaults with ``mapping`` (logical name -> column) on top; unknown names are refused."""
        mapping = dict(mapping or {})
        known = cls.logical_names()
        unknown = sorted(set(mapping) - set(known))
        if unknown:
            raise ValueError(
                f"{source}: unknown column name(s) {', '.join(map(repr, unknown))}; "
                f"this table's logical columns are {', '.join(known)}"
            )
        for k, v in mapping.items():
            if not isinstance(v, str):
                raise ValueError(f"{source}: the column for {k!r} must be a string, got {v!r}")
        return replace(cls(), **mapping)


@dataclass(frozen=True)
class SourceColumns(ColumnSet):
    """Column names of the retrieval-log table.

    ``retrieved_ids`` / ``relevant_ids`` (gold labels, JSON arrays of chunk ids) are read by the
    label metric only; the judge metric does not need them, so a table may lack them."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("actual_output", "retrieved_ids", "relevant_ids")
    input: str = "input"
    actual_output: str = "actual_output"
    expected_output: str = "expected_output"
    retrieval_context: str = "retrieval_context"
    retrieved_ids: str = "retrieved_ids"
    relevant_ids: str = "relevant_ids"


@dataclass(frozen=True)
class LabelColumns(SourceColumns):
    """The retrieval-log table as the label metric reads it (the same mapping,
    ``CTXPREC_SOURCE_COLUMNS``): ``retrieved_ids`` and ``relevant_ids`` are required, the texts
    optional (the report shows them when present)."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("input", "actual_output", "expected_output", "retrieval_context")


@dataclass(frozen=True)
class ConversationColumns(ColumnSet):
    """Column names of the conversation-log table."""

    turns: str = "turns"
    expected_outcome: str = "expected_outcome"


def parse_column_flags(values: Iterable[str] | None) -> dict[str, str]:
    """``["retrieval_context=contexts", ...]`` (repeated ``--column``) -> a mapping."""
    out: dict[str, str] = {}
    for item in values or ():
        name, sep, column = item.partition("=")
        if not sep or not name.strip() or not column.strip():
            raise ValueError(f"--column takes NAME=COLUMN (e.g. retrieval_context=contexts), got {item!r}")
        out[name.strip()] = column.strip()
    return out


def merge_columns(*mappings: Mapping[str, Any] | None) -> dict[str, str]:
    """Later mappings win (env, then flags)."""
    out: dict[str, str] = {}
    for m in mappings:
        out.update(m or {})
    return out


def parse_segments(value: str | Iterable[str] | None, source: str = "segments") -> tuple[str, ...]:
    """Segment columns: source columns whose values are copied into the score rows
    (``--segment COL``, ``CTXPREC_SEGMENTS='["tenant", "lang"]'``, ``PipelineConfig(segments=...)``).

    Each is a validated identifier of at most ``MAX_SEGMENT_NAME`` characters; a name given twice
    (case-insensitively: SQLite's column names are) is refused. A JSON list in a string is parsed.
    """
    if value is None:
        return ()
    if isinstance(value, str):
        text = value.strip()
        if not text:
            return ()
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise ValueError(f'{source} must be a JSON list of column names like ["tenant"]: {exc.msg}') from None
        if not isinstance(value, list):
            raise ValueError(f'{source} must be a JSON list of column names like ["tenant"], got {text[:60]!r}')
    out: list[str] = []
    seen: set[str] = set()
    for name in value:
        if not isinstance(name, str):
            raise ValueError(f"{source}: a segment column must be a column name, got {name!r}")
        name = name.strip()
        validate_identifier(name, f"segment column of {source}")
        if len(name) > MAX_SEGMENT_NAME:
            raise ValueError(f"{source}: segment column {name[:40]!r}... is longer than {MAX_SEGMENT_NAME} characters")
        if name.lower() in seen:
            raise ValueError(f"{source}: segment column {name!r} is given twice")
        seen.add(name.lower())
        out.append(name)
    return tuple(out)
