"""Source formats: how the input table's rows become the logical rows the run path scores.

The run path (plan -> intake -> stream -> chunk write -> finalize) asks one ``SourceReader`` for
a partition's ids, a chunk's logical rows, and each row's case; a flat table and a spans table
differ only in the reader ``make_reader`` picks from ``config.source_format``:

- ``rows`` (default): the table's rows are the cases (``RowsReader``: ``warehouse/source.py``
  and the metric kind's ``row_to_case``);
- ``openinference`` / ``otel-genai``: a spans table, one case per retriever span (per reranker
  span with ``stage="rerank"``), read by ``traces.SpanReader``.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

from .columns import C, ColumnSet

if TYPE_CHECKING:  # light at import: the CLI's --help reads the constants below
    from sqlalchemy.engine import Connection, Engine

    from ..warehouse.source import Partition, SourceTable

__all__ = [
    "SOURCE_FORMATS",
    "SPAN_FORMATS",
    "DEFAULT_SPAN_TABLE",
    "SpanColumns",
    "SourceReader",
    "RowsReader",
    "make_reader",
    "reads_spans",
    "recorded_source",
]

SOURCE_FORMATS = ("rows", "openinference", "otel-genai")
SPAN_FORMATS = SOURCE_FORMATS[1:]
DEFAULT_SPAN_TABLE = "spans"


@dataclass(frozen=True)
class SpanColumns(ColumnSet):
    """Column names of a spans table (one row per span, as an OTLP -> warehouse export or
    Phoenix's spans dataframe has them). ``span_id`` / ``start_time`` are the names to map (the
    run path's ``id`` / ``event_time``: a case's id is its span id, its partition the UTC day the
    span started)."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("parent_id", "name")
    #: the names users map -> the logical names of the run path
    ALIASES: ClassVar[dict[str, str]] = {"span_id": "id", "start_time": "event_time"}
    id: str = "span_id"
    event_time: str = "start_time"
    trace_id: str = "trace_id"
    parent_id: str = "parent_id"
    name: str = "name"
    attributes: str = "attributes"

    @classmethod
    def from_mapping(cls: type[C], mapping: Mapping[str, str] | None, *, source: str = "column mapping") -> C:
        aliases = SpanColumns.ALIASES
        given = {aliases.get(k, k): v for k, v in dict(mapping or {}).items()}
        unknown = sorted(set(given) - set(cls.logical_names()))
        if unknown:
            raise ValueError(
                f"{source}: unknown column name(s) {', '.join(map(repr, unknown))}; a spans table's "
                "logical columns are span_id, trace_id, parent_id, name, start_time, attributes"
            )
        return super().from_mapping(given, source=source)


class SourceReader(Protocol):
    """What the run path asks of its input (``RowsReader``, ``traces.SpanReader``)."""

    #: extra keys of a logical row that travel to its score row (and, where the failures table
    #: has the column, to its failure row)
    extra_columns: tuple[str, ...]
    #: a chunk's read waits on the database long enough (per case, more than a flat table's
    #: read) that reading on its own thread, while the chunk before is judged, pays for the
    #: handing over between threads even where the database runs in process (``pipeline.stream``)
    reads_overlap_judging: bool

    @property
    def name(self) -> str:
        """The ``source_table`` its scores and failures are recorded under."""
        ...

    def iter_ids(self, conn: Connection, partition: Partition) -> Iterator[Any]: ...

    def count_null_ids(self, conn: Connection, partition: Partition) -> int: ...

    def count_unpartitioned(self, conn: Connection) -> int: ...

    def read_rows(
        self, conn: Connection, partition: Partition, after_id: Any, upto_id: Any
    ) -> list[dict[str, Any]]: ...

    def to_case(self, row: dict[str, Any]) -> Any: ...

    def notes(self) -> list[str]: ...


class RowsReader:
    """A flat table: its rows are the cases."""

    extra_columns: tuple[str, ...] = ()
    #: a chunk is one range read: in process (SQLite, DuckDB) it is read between judging
    reads_overlap_judging = False

    def __init__(self, source: SourceTable, to_case: Any) -> None:
        self.source = source
        self.to_case = to_case

    @property
    def name(self) -> str:
        return self.source.name

    def iter_ids(self, conn: Connection, partition: Partition) -> Iterator[Any]:
        from ..warehouse.source import iter_partition_ids

        return iter_partition_ids(conn, self.source, partition)

    def count_null_ids(self, conn: Connection, partition: Partition) -> int:
        from ..warehouse.source import count_null_ids

        return count_null_ids(conn, self.source, partition)

    def count_unpartitioned(self, conn: Connection) -> int:
        from ..warehouse.source import count_unpartitioned

        return count_unpartitioned(conn, self.source)

    def read_rows(self, conn: Connection, partition: Partition, after_id: Any, upto_id: Any) -> list[dict[str, Any]]:
        from ..warehouse.source import read_chunk_rows

        return read_chunk_rows(conn, self.source, partition, after_id, upto_id)

    def notes(self) -> list[str]:
        return []


def reads_spans(kind: Any) -> bool:
    """Whether a metric kind can score a spans table (single-turn cases, judged)."""
    return kind.table_setting == "source_table" and kind.needs_judge


def recorded_source(table: str, stage: str = "retrieve") -> str:
    """The ``source_table`` a spans source's scores are recorded under: the table, with
    ``__rerank`` for the reranker stage (another population than its retriever's)."""
    from ..traces.options import RERANK_SUFFIX

    return table + (RERANK_SUFFIX if stage == "rerank" else "")


def make_reader(config: Any, engine: Engine, source: SourceTable) -> SourceReader:
    """The reader of ``config.source_format`` over the reflected ``source``."""
    from ..traces.reader import SpanReader

    options = config.trace_options
    if options is None:
        return RowsReader(source, config.kind.row_to_case)
    return SpanReader(engine, source, options, config.kind.row_to_case)
