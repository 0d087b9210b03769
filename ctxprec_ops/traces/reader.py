"""A spans table read as a source of cases: plan the retriever (or reranker) spans of a UTC day,
read a chunk of them, find each one's LLM span in its trace, look up missing document texts and
gold answers, and hand the pipeline one logical row per case span.

Memory is bounded by the chunk: a chunk's case spans are read by keyset on the span id (as a flat
table's rows), then the LLM spans of *those* traces only (``trace_id IN (...)``: index
``trace_id``), the documents and the gold answers of those spans only. Which spans are candidates
is decided in SQL by a text filter on the attributes (``"RETRIEVER"``, ``"retrieval"``, ... in any
letter case: portable, no JSON functions; attributes that do not end in a closing bracket, cut off by an
export, pass it too); of the spans it lets through, one holding the kind attribute as exporters write
it (``Convention.kind_texts``, told in SQL) is a case span, any other when its JSON says so
(``Convention.kind_of``) or is not JSON (a failure). The plan, the ledger's counts and the chunk's read
apply that one rule (``SpanReader._is_case``): a span that only holds the text is in none of them.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterator, Sequence
from typing import Any

from sqlalchemy import (
    JSON,
    Integer,
    Table,
    Text,
    bindparam,
    case,
    cast,
    literal,
    literal_column,
    null,
    or_,
    select,
    type_coerce,
)
from sqlalchemy.engine import Connection, Engine
from sqlalchemy.exc import NoSuchTableError
from sqlalchemy.sql.elements import ColumnElement

from ..errors import InvalidTestCaseError
from ..warehouse.dialects import dialect_of
from ..warehouse.engine import stream_batches
from ..warehouse.identifiers import split_table_name
from ..warehouse.reflect import reflect_table
from ..warehouse.segments import PREFIX as SEGMENT_PREFIX
from ..warehouse.source import Partition, SourceTable, SourceTableError
from .assemble import Draft, Span, draft, finish, pair_llm, read_span
from .attributes import AttributesError, parse_attributes
from .conventions import CONVENTIONS
from .options import RERANK_SUFFIX, TraceOptions

__all__ = ["SpanReader"]

#: the ``source_table`` recorded for a reranker stage: ``<table>__rerank`` (its scores are another
#: population than the retriever's of the same table)
_IN_BATCH = 500


def _reflect(engine: Engine, name: str, need: Sequence[str], what: str) -> Table:
    schema, table = split_table_name(name, None, f"{what} name")
    try:
        t = reflect_table(engine, table, schema)
    except NoSuchTableError:
        raise SourceTableError(f"{what} {name!r} does not exist in the warehouse") from None
    lower = {c.name.lower() for c in t.columns}
    missing = [c for c in need if c not in lower]
    if missing:
        raise SourceTableError(
            f"{what} {name!r} has no column {', '.join(map(repr, missing))}; its columns are: "
            f"{', '.join(c.name for c in t.columns)}"
        )
    return t


def _col(t: Table, name: str) -> Any:
    return next(c for c in t.columns if c.name.lower() == name)


def _text_of(col: Any) -> ColumnElement[Any]:
    """A column read as text: JSON columns as their JSON text (bad JSON stays a row problem)."""
    return cast(col, Text()) if isinstance(col.type, JSON) else type_coerce(col, Text())


class SpanReader:
    """The pipeline's source reader for a spans table (``pipeline.formats.SourceReader``)."""

    extra_columns: tuple[str, ...] = ("trace_id", "span_id", "documents", "reference")
    #: a chunk's read visits every span of its id range and probes the traces of its case spans:
    #: read on its own thread, the database's part of it overlaps judging the chunk before, even on
    #: SQLite (+5 – 9 % cases/s, bench/README.md)
    reads_overlap_judging = True

    def __init__(
        self, engine: Engine, source: SourceTable, options: TraceOptions, to_case: Callable[[dict[str, Any]], Any]
    ) -> None:
        self.source = source
        self.options = options
        self.convention = CONVENTIONS[options.convention]
        self._to_case = to_case
        self._sqlite = dialect_of(engine).sqlite_idioms
        self._attrs = _text_of(source.columns["attributes"])
        # a span whose attributes were cut off (no closing bracket) may have lost its kind: it is
        # read too, and ends as a failure ("not JSON") instead of out of sight. Two LIKEs on every
        # backend: SQLite's substr(text, -1) counts the characters of the whole text first (~3x the
        # time of both LIKEs, bench/bench_traces.py)
        cut_off = ~or_(self._attrs.like("%}"), self._attrs.like("%]"))
        self.case_filter = or_(self._contains_any(self.convention.markers[options.stage]), cut_off)
        self.llm_filter = self._contains_any(self.convention.markers["llm"])
        # which of the spans the filter lets through are case spans: those holding the kind as
        # exporters write it (decided here, in SQL), the others by their JSON (``_is_case``) — one
        # rule for the plan, the ledger, the counts and the chunk's read, so that a span they let
        # through which is no case span (another span holding the text "RETRIEVER") is in none
        sure = self._contains_any(self.convention.kind_texts[options.stage])
        self._sure = case((sure, literal(1)), else_=literal(0)).label("ctxprec_sure")
        self._unsure_text = case((sure, null()), else_=self._attrs).label("ctxprec_unsure")
        self.gold = None
        if options.gold_table:
            self.gold = _reflect(engine, options.gold_table, ["expected_output"], "gold table")
        if self.gold is not None and not {"trace_id", "input"} & {c.name.lower() for c in self.gold.columns}:
            raise SourceTableError(f"gold table {options.gold_table!r} needs a column trace_id or input to join on")
        self.docs = (
            _reflect(engine, options.documents_table, ["id", "content"], "documents table")
            if options.documents_table
            else None
        )
        self._reads: dict[tuple[str, bool], Any] = {}
        #: columns of the spans table read into each row as they are (the segment columns,
        #: ``seg_<name>``: ``pipeline.context.with_segments``)
        self._carried = tuple(n for n in source.columns if n.startswith(SEGMENT_PREFIX))

    # --- what the pipeline calls ---------------------------------------------------------------

    @property
    def name(self) -> str:
        """The ``source_table`` its scores are recorded under."""
        return self.source.name + (RERANK_SUFFIX if self.options.stage == "rerank" else "")

    def notes(self) -> list[str]:
        return self.options.notes()

    def iter_ids(self, conn: Connection, partition: Partition, batch: int = 10_000) -> Iterator[Any]:
        src = self.source
        order: Any = src.id
        if self._sqlite:
            # one scan and a sort of the ids (SQLite's sorter spills to disk past its cache): the
            # span-id index would visit every span of the table in random heap order (random span
            # ids), a page read per span — 2x slower at 100k spans (bench/bench_traces.py)
            order = literal_column("+" + conn.dialect.identifier_preparer.quote(src.id.name))
        # the attributes of a span that is not surely a case span only (rarely any): the sort
        # carries the ids, not the texts
        stmt = select(src.id, self._unsure_text).where(
            src.id.is_not(None), self.case_filter, src.partition_filter(partition)
        )
        for row in self._cases(conn, stmt.order_by(order), batch):
            yield row[0]

    def count_null_ids(self, conn: Connection, partition: Partition) -> int:
        src = self.source
        where = [src.id.is_(None), self.case_filter, src.partition_filter(partition)]
        return self._count_cases(conn, where)

    def count_unpartitioned(self, conn: Connection) -> int:
        src = self.source
        cond = src.dialect.unreadable_time(src.event_time, src.time_mode)  # as the rows' count reads it
        return self._count_cases(conn, [self.case_filter, cond])

    def _count_cases(self, conn: Connection, where: list[Any]) -> int:
        """The case spans among the rows ``where`` selects (SQL counts those surely so)."""
        stmt = select(self._unsure_text).select_from(self.source.table).where(*where)
        return sum(1 for _ in self._cases(conn, stmt))

    def _cases(self, conn: Connection, stmt: Any, batch: int = 10_000) -> Iterator[Any]:
        """The rows of ``stmt`` (its last column ``_unsure_text``) that are case spans, streamed."""
        is_case = self._is_case
        for part in stream_batches(conn, stmt, batch):
            for row in part:
                if row[-1] is None or is_case(row[-1]):
                    yield row

    def _is_case(self, attributes: Any) -> bool:
        """A span the filter let through and that does not hold its kind as exporters write it: a
        case span when its JSON says so — or cannot be read (a failure of its own, "not JSON")."""
        try:
            attrs = parse_attributes(attributes)
        except AttributesError:
            return True
        return self.convention.kind_of(attrs) == self.options.stage

    def read_rows(self, conn: Connection, partition: Partition, after_id: Any, upto_id: Any) -> list[dict[str, Any]]:
        """The chunk's case spans as logical rows, in span-id order."""
        src = self.source
        params = {"upto": src.coerce_id(upto_id)}
        if after_id is not None:
            params["after"] = src.coerce_id(after_id)
        result = conn.execute(self._chunk_read(partition, after_id is not None), params)
        drafts = []
        carried: dict[str, dict[str, Any]] = {}
        for raw in result.all():
            span = read_span(*raw[:4])  # id, trace_id, event_time, attributes: as selected
            if self._carried:
                carried[span.span_id] = {name: raw._mapping[name] for name in self._carried}
            if (
                not raw.ctxprec_sure
                and span.problem is None
                and self.convention.kind_of(span.attrs) != self.options.stage
            ):
                continue  # let through by the text filter, but no span of this stage (``_is_case``)
            drafts.append(draft(span, self.convention, self.options.stage))
        ok = [d for d in drafts if d.problem is None]
        if self.docs is not None:
            self._fill_documents(conn, ok)
        unreadable: dict[str, list[str]] = {}
        if self.options.reference_configured:
            self._references(conn, ok)
        else:
            unreadable = self._pair(conn, ok)
        opts = self.options
        rows = [
            finish(
                d,
                reference_configured=opts.reference_configured,
                unreadable=unreadable.get(d.span.trace_id or "", ()),
                documents_table=opts.documents_table,
            )
            for d in drafts
        ]
        for row in rows:  # the segment columns' values (``seg_<name>``), as a flat table's rows carry them
            row.update(carried.get(row["id"], {}))
        return rows

    def to_case(self, row: dict[str, Any]) -> Any:
        """The row's test case; ``InvalidTestCaseError`` naming the span's problem."""
        if row.get("problem"):
            raise InvalidTestCaseError(f"span {row['id']} of trace {row.get('trace_id')}: {row['problem']}")
        return self._to_case(row)

    # --- reading -------------------------------------------------------------------------------

    def _contains_any(self, texts: Sequence[str]) -> ColumnElement[bool]:
        """Attributes holding one of ``texts`` in any letter case (``kind_of`` accepts a kind
        written ``retriever`` or ``Retriever``: the pre-filter must not be stricter)."""
        if self._sqlite:  # SQLite's LIKE ignores ASCII case already: no lower() of each row's text
            return or_(*(self._attrs.contains(t, autoescape=True) for t in texts))
        return or_(*(self._attrs.icontains(t, autoescape=True) for t in texts))

    def _chunk_read(self, partition: Partition, bounded_below: bool) -> Any:
        stmt = self._reads.get((partition.key, bounded_below))
        if stmt is None:
            src = self.source
            id_type = src.id.type
            conds = [src.id <= bindparam("upto", type_=id_type)]
            if bounded_below:
                conds.append(src.id > bindparam("after", type_=id_type))
            conds += [self.case_filter, src.partition_filter(partition, indexable=False)]
            cols = [
                src.id.label("id"),
                src.columns["trace_id"].label("trace_id"),
                src.event_time.label("event_time"),
                self._attrs.label("attributes"),
                self._sure,
                *(src.columns[name].label(name) for name in self._carried),
            ]
            stmt = select(*cols).where(*conds).order_by(src.id)
            if len(self._reads) >= 64:
                self._reads.clear()
            self._reads[(partition.key, bounded_below)] = stmt
        return stmt

    def _pair(self, conn: Connection, drafts: list[Draft]) -> dict[str, list[str]]:
        """Each draft's LLM span (the first of its trace starting at or after it); returns the
        spans per trace whose attributes could not be read (they might have been the LLM span)."""
        traces = sorted({d.span.trace_id for d in drafts if d.span.trace_id is not None})
        llm: dict[str, list[Span]] = defaultdict(list)
        unreadable: dict[str, list[str]] = defaultdict(list)
        src = self.source
        trace_col = src.columns["trace_id"]
        cols = [
            src.id.label("id"),
            trace_col.label("trace_id"),
            src.event_time.label("event_time"),
            self._attrs.label("attributes"),
        ]
        for part in _batches(traces):
            stmt = select(*cols).where(trace_col.in_([_bound(trace_col, t) for t in part]), self.llm_filter)
            for raw in conn.execute(stmt).all():
                span = read_span(*raw)
                key = span.trace_id or ""
                if span.problem is not None:
                    unreadable[key].append(span.span_id)
                elif self.convention.kind_of(span.attrs) == "llm":
                    llm[key].append(span)
        for spans in llm.values():
            if len(spans) > 1:
                spans.sort(key=lambda s: (s.start if s.start is not None else float("inf"), s.span_id))
        for d in drafts:
            pair_llm(d, llm.get(d.span.trace_id or "", ()), self.convention)
        return unreadable

    def _fill_documents(self, conn: Connection, drafts: list[Draft]) -> None:
        """Texts of documents recorded by id only, from the documents table."""
        assert self.docs is not None
        id_col, content_col = _col(self.docs, "id"), _col(self.docs, "content")
        wanted = sorted({str(n.id) for d in drafts for n in d.nodes if n.content is None and n.id is not None})
        found: dict[str, str] = {}
        for part in _batches(wanted):
            values = [_bound(id_col, v) for v in part]
            for doc_id, content in conn.execute(select(id_col, content_col).where(id_col.in_(values))):
                if content is not None:
                    found[str(doc_id)] = str(content)
        for d in drafts:
            for i, n in enumerate(d.nodes):
                if n.content is None and n.id is not None and str(n.id) in found:
                    d.nodes[i] = n._replace(content=found[str(n.id)])

    def _references(self, conn: Connection, drafts: list[Draft]) -> None:
        """Each draft's reference: the configured attribute, else the gold table's answer for its
        trace, else for its query; a problem naming where it looked when none is found."""
        key = self.options.expected_attribute
        for d in drafts:
            value = d.span.attrs.get(key) if key else None
            if isinstance(value, str) and value.strip():
                d.reference, d.reference_kind = value, f"attribute:{key}"
        rest = [d for d in drafts if d.reference is None and _docs_ok(d)]
        if self.gold is not None and rest:
            by_trace, by_input = self._gold(conn, rest)
            for d in rest:
                answers = by_trace.get(d.span.trace_id or "") or by_input.get(d.query or "")
                if answers and len(answers) == 1:
                    d.reference, d.reference_kind = next(iter(answers)), f"gold:{self.options.gold_table}"
                elif answers:
                    n = len(answers)
                    d.problem = f"gold table {self.options.gold_table} has {n} different expected outputs for it"
        for d in rest:
            if d.reference is None and d.problem is None:
                looked = []
                if key:
                    looked.append(f"no attribute {key!r} on the span")
                if self.gold is not None:
                    looked.append(f"no row in gold table {self.options.gold_table} for its trace or query")
                d.problem = "no expected output: " + ", ".join(looked)

    def _gold(self, conn: Connection, drafts: list[Draft]) -> tuple[dict[str, set[str]], dict[str, set[str]]]:
        assert self.gold is not None
        names = {c.name.lower() for c in self.gold.columns}
        expected = _col(self.gold, "expected_output")
        by_trace: dict[str, set[str]] = defaultdict(set)
        by_input: dict[str, set[str]] = defaultdict(set)
        for column, values, out in (
            ("trace_id", {d.span.trace_id for d in drafts if d.span.trace_id}, by_trace),
            ("input", {d.query for d in drafts if d.query}, by_input),
        ):
            if column not in names:
                continue
            col = _col(self.gold, column)
            for part in _batches(sorted(v for v in values if v is not None)):
                stmt = select(col, expected).where(col.in_([_bound(col, v) for v in part]), expected.is_not(None))
                for k, v in conn.execute(stmt):
                    if isinstance(v, str) and v.strip():
                        out[str(k)].add(v)
        return by_trace, by_input


def _docs_ok(d: Draft) -> bool:
    return d.problem is None and all(n.content is not None for n in d.nodes)


def _bound(col: Any, value: str) -> Any:
    if isinstance(col.type, Integer):
        try:
            return int(value)
        except ValueError:
            return value
    return value


def _batches(values: Sequence[Any]) -> Iterator[Sequence[Any]]:
    for i in range(0, len(values), _IN_BATCH):
        yield values[i : i + _IN_BATCH]
