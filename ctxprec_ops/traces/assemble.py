"""Spans -> the logical rows the pipeline scores (pure: no SQL).

A retriever (or reranker) span becomes one row of the retrieval-log shape: ``id`` = its span id,
``input`` = its query, ``retrieval_context`` = its documents' texts in rank order,
``actual_output`` = the answer of the LLM span that follows it in the same trace, and
``expected_output`` = the configured reference (a span attribute or the gold table's answer) or,
when none is configured, the answer itself (reference-free). Extra keys travel to the score row:
``trace_id``, ``span_id``, ``documents`` (per rank: id, score, metadata) and ``reference``
(which reference was used). A span that cannot make a case keeps a ``problem``: the intake
records it as that span's ``invalid_input`` failure, with the cause.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time
from json.encoder import encode_basestring_ascii
from typing import Any

from ..json_text import JSONText
from .attributes import AttributesError, parse_attributes
from .conventions import Convention, Node, SpanProblem

__all__ = ["Span", "Draft", "instant", "read_span", "draft", "pair_llm", "finish", "REFERENCE_FREE"]

#: ``reference`` of a reference-free score: the answer was the reference
REFERENCE_FREE = "answer"
_OFFSET = re.compile(r"([+-]\d{2})(\d{2})$")
_EPOCH, _EPOCH_UTC = datetime(1970, 1, 1), datetime(1970, 1, 1, tzinfo=UTC)


def instant(value: Any) -> float | None:
    """A span start time as epoch seconds (UTC), or None when it is no readable instant: an aware
    or naive (= UTC) datetime, a date, epoch seconds / ms / us / ns, or ISO-8601 text (``Z``,
    ``+hh:mm``, ``+hhmm`` or a trailing ``UTC``)."""
    if type(value) is str:  # the usual column value, read first: no type tests, no second call
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            pass  # other forms below
        else:  # what timestamp() computes, without an aware copy of a naive value (3x the cost)
            return (parsed - (_EPOCH if parsed.tzinfo is None else _EPOCH_UTC)).total_seconds()
    if value is None or isinstance(value, bool):
        return None
    if isinstance(value, datetime):
        return (value if value.tzinfo else value.replace(tzinfo=UTC)).timestamp()
    if isinstance(value, date):
        return datetime.combine(value, time(0), tzinfo=UTC).timestamp()
    if isinstance(value, (int, float)):
        n = float(value)
        for scale in (1e17, 1e14, 1e11):  # ns, us, ms
            if abs(n) >= scale:
                return n / {1e17: 1e9, 1e14: 1e6, 1e11: 1e3}[scale]
        return n
    if isinstance(value, (bytes, bytearray)):
        value = bytes(value).decode("utf-8", "replace")
    if not isinstance(value, str):
        return None
    try:  # the usual form ('2026-11-28 09:30:15.250000', ISO with Z or +hh:mm): no normalising
        return instant(datetime.fromisoformat(value))
    except ValueError:
        pass
    text = value.strip()
    if text.replace(".", "", 1).isdigit():
        return instant(float(text))
    upper = text.upper()
    if upper.endswith(("UTC", "GMT")):
        text = text[:-3].rstrip() + "+00:00"
    text = _OFFSET.sub(r"\1:\2", text) if len(text) > 16 else text
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    return instant(parsed)


@dataclass
class Span:
    """One span as read from the table: ids, start, and its attributes (or why they are unreadable)."""

    span_id: str
    trace_id: str | None
    start: float | None
    attrs: dict[str, Any] = field(default_factory=dict)
    problem: str | None = None


def _id_text(value: Any) -> str | None:
    if value is None:
        return None
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return str(value)


def read_span(span_id: Any, trace_id: Any, start: Any, attributes: Any) -> Span:
    """A span from its row's values: id, trace id, start time and attributes (in the order the
    reader selects them)."""
    span = Span(str(span_id), _id_text(trace_id), instant(start))
    try:
        span.attrs = parse_attributes(attributes)
    except AttributesError as exc:
        span.problem = str(exc)
    return span


@dataclass
class Draft:
    """A case span on its way to a row: what the span itself says, then the chunk-wide lookups
    (its LLM span, missing document texts, the gold answer) fill in the rest."""

    span: Span
    query: str | None = None
    nodes: list[Node] = field(default_factory=list)
    answer: str | None = None
    llm_span: str | None = None
    reference: str | None = None
    reference_kind: str | None = None
    problem: str | None = None


def draft(span: Span, convention: Convention, stage: str) -> Draft:
    """What a case span says about itself (a ``problem`` when that is not enough)."""
    d = Draft(span)
    where = convention.documents_key(stage)
    if span.problem is not None:
        d.problem = span.problem
        return d
    d.query = convention.query(span.attrs, stage)
    try:
        d.nodes = convention.nodes(span.attrs, stage)
    except SpanProblem as exc:
        d.problem = str(exc)
        return d
    if not d.nodes:
        d.problem = f"the span has no documents ({where} is missing or empty)"
    elif d.query is None or not d.query.strip():
        d.problem = (
            "the span has no query text ("
            + ("reranker.query / input.value" if stage == "rerank" else "input.value / gen_ai.retrieval.query.text")
            + ")"
        )
    if span.start is None and d.problem is None:
        d.problem = "the span's start_time cannot be read as an instant"
    return d


def pair_llm(d: Draft, llm_spans: Sequence[Span], convention: Convention) -> None:
    """Give ``d`` the answer of the first LLM span of its trace that starts at or after it
    (``llm_spans``: the trace's LLM spans sorted by start, then span id)."""
    start = d.span.start
    assert start is not None
    for llm in llm_spans:
        if llm.start is not None and llm.start >= start:
            d.llm_span = llm.span_id
            d.answer = convention.answer(llm.attrs)
            return
    d.llm_span = None


def _needs_answer_problem(d: Draft, unreadable: Sequence[str]) -> str | None:
    if d.llm_span is None:
        why = f"trace {d.span.trace_id} has no LLM span after this span"
        if unreadable:
            why += f" (span(s) {', '.join(unreadable[:3])} of the trace have attributes that are not JSON)"
        return (
            f"{why}: reference-free scoring judges the documents against its answer; configure "
            "an expected-output attribute or a gold table to score without it"
        )
    if d.answer is None or not d.answer.strip():
        return (
            f"LLM span {d.llm_span} of trace {d.span.trace_id} holds no answer text "
            "(llm.output_messages / output.value / gen_ai.output.messages)"
        )
    return None


def _missing_content(nodes: Sequence[Node], documents_table: str | None) -> str | None:
    """Why a document's text is missing (ids only, and no documents table row for it), or None."""
    missing = [(i, n) for i, n in enumerate(nodes, 1) if n.content is None]
    if not missing:
        return None
    rank, node = missing[0]
    more = f" ({len(missing)} of {len(nodes)} documents lack it)" if len(missing) > 1 else ""
    if node.id is None:
        return f"document {rank} has neither content nor an id{more}"
    if documents_table is None:
        return (
            f"document {rank} (id {str(node.id)[:80]!r}) has no content{more}: the span records ids only; "
            "configure a documents table (id, content) to read the texts from"
        )
    return (
        f"document {rank} (id {str(node.id)[:80]!r}) has no content and documents table "
        f"{documents_table} has no row for it{more}"
    )


def finish(
    d: Draft, *, reference_configured: bool, unreadable: Sequence[str] = (), documents_table: str | None = None
) -> dict[str, Any]:
    """The logical row of ``d`` (``problem`` set when it cannot be scored)."""
    span = d.span
    row: dict[str, Any] = {
        "id": span.span_id,
        "span_id": span.span_id,
        "trace_id": span.trace_id,
        "input": d.query,
        "actual_output": d.answer,
        "retrieval_context": [n.content for n in d.nodes],
        "documents": None,
        "reference": None,
        "problem": d.problem,
    }
    if d.problem is None:
        row["problem"] = _missing_content(d.nodes, documents_table)
    if row["problem"] is None:
        if reference_configured:
            if d.reference is None:
                row["problem"] = "no expected output for this span"
            else:
                row["expected_output"], row["reference"] = d.reference, d.reference_kind
        else:
            row["problem"] = _needs_answer_problem(d, unreadable)
            row["expected_output"], row["reference"] = d.answer, REFERENCE_FREE
    row["documents"] = _documents_json(d.nodes)
    return row


def _json_scalar(value: Any) -> str | None:
    """``json.dumps(value)`` for a text, an integer or a finite float; None for anything else."""
    kind = type(value)
    if kind is str:
        return encode_basestring_ascii(value)
    if kind is int or (kind is float and math.isfinite(value)):
        return repr(value)
    return None


def _documents_json(nodes: Sequence[Node]) -> JSONText | None:
    """The ``documents`` column: ``json.dumps`` of each node's record (rank, id, score,
    metadata), None when no node has more than its rank. Built as text when ids and scores are
    plain values and there is no metadata (the usual span: ~3x cheaper than ``json.dumps``)."""
    items: list[str] = []
    more = False
    for rank, n in enumerate(nodes, 1):
        if n.metadata not in (None, {}, ""):
            break
        doc_id, score = n.id, n.score
        item = f'{{"node": {rank}'
        if doc_id is not None:
            text = encode_basestring_ascii(doc_id) if type(doc_id) is str else _json_scalar(doc_id)
            if text is None:
                break
            item += ', "id": ' + text
            more = True
        if score is not None:
            text = _json_scalar(score)
            if text is None:
                break
            item += ', "score": ' + text
            more = True
        items.append(item + "}")
    else:
        return JSONText("[" + ", ".join(items) + "]") if more else None
    records = [n.record(i) for i, n in enumerate(nodes, 1)]
    if any(len(r) > 1 for r in records):
        return JSONText(json.dumps(records, default=str))
    return None
