"""Span attributes and the two conventions, on spans made by the real instrumentation libraries
(and on the edge cases an export produces): no SQL here."""

from __future__ import annotations

import json
import random
from datetime import UTC, datetime

import pytest

from ctxprec_ops.traces.assemble import Draft, Span, finish, instant, read_span
from ctxprec_ops.traces.attributes import AttributesError, group, parse_attributes
from ctxprec_ops.traces.conventions import CONVENTIONS, Node, SpanProblem
from tests.helpers import traces as T

CASES = [
    ("What is the capital of France?", ["Bananas are yellow.", "Paris is the capital of France."], "Paris."),
    ("Which animal purrs?", ["Cats purr when content.", "Dogs bark.", "Lions roar."], "Cats purr."),
]
OI = CONVENTIONS["openinference"]
GENAI = CONVENTIONS["otel-genai"]


def _by_kind(rows, convention):
    out: dict[str, list] = {}
    for r in rows:
        attrs = parse_attributes(r["attributes"])
        out.setdefault(convention.kind_of(attrs) or "", []).append(attrs)
    return out


@pytest.mark.parametrize("form", ["flat", "nested", "otlp"])
def test_langchain_spans_read_the_same_in_every_stored_form(form):
    spans = T.langchain_spans(CASES)
    kinds = _by_kind(T.span_rows(spans, form=form), OI)
    assert len(kinds["retrieve"]) == 2 and len(kinds["llm"]) == 2
    got = sorted((OI.query(a, "retrieve"), [n.content for n in OI.nodes(a, "retrieve")]) for a in kinds["retrieve"])
    assert got == sorted((q, list(d)) for q, d, _a in CASES)
    # LangChain's instrumentor keeps each document's metadata (a JSON string in the flat form)
    metas = [n.metadata for a in kinds["retrieve"] for n in OI.nodes(a, "retrieve")]
    assert {"source": "kb/0"} in metas
    assert sorted(OI.answer(a) for a in kinds["llm"]) == sorted(a for *_x, a in CASES)


def test_openinference_reranker_spans_give_the_reranked_order():
    spans = T.openinference_manual_spans(CASES, reranked=[[1, 0], [2, 0, 1]])
    kinds = _by_kind(T.span_rows(spans), OI)
    rerank = {OI.query(a, "rerank"): OI.nodes(a, "rerank") for a in kinds["rerank"]}
    assert [n.content for n in rerank[CASES[0][0]]] == [CASES[0][1][1], CASES[0][1][0]]
    assert [n.id for n in rerank[CASES[1][0]]] == ["doc-1-2", "doc-1-0", "doc-1-1"]
    retrieve = {OI.query(a, "retrieve"): OI.nodes(a, "retrieve") for a in kinds["retrieve"]}
    assert [n.score for n in retrieve[CASES[1][0]]] == [1.0, 0.9, 0.8]


@pytest.mark.parametrize("form", ["flat", "nested", "otlp"])
def test_genai_spans_of_opentelemetry_util_genai(form, monkeypatch):
    spans = T.genai_spans(CASES, monkeypatch=monkeypatch)
    kinds = _by_kind(T.span_rows(spans, form=form), GENAI)
    assert len(kinds["retrieve"]) == 2 and len(kinds["llm"]) == 2
    docs = {GENAI.query(a, "retrieve"): GENAI.nodes(a, "retrieve") for a in kinds["retrieve"]}
    assert [n.content for n in docs[CASES[1][0]]] == CASES[1][1]
    assert [n.id for n in docs[CASES[1][0]]] == ["doc-1-0", "doc-1-1", "doc-1-2"]
    assert sorted(GENAI.answer(a) for a in kinds["llm"]) == ["Cats purr.", "Paris."]


def test_genai_ids_only_documents_have_no_content(monkeypatch):
    spans = T.genai_spans(CASES[:1], ids_only=True, monkeypatch=monkeypatch)
    (attrs,) = _by_kind(T.span_rows(spans), GENAI)["retrieve"]
    nodes = GENAI.nodes(attrs, "retrieve")
    assert [(n.content, n.id, n.score) for n in nodes] == [(None, "doc-0-0", 0.9), (None, "doc-0-1", 0.9)]


def test_attribute_forms_and_their_errors():
    flat = {"input.value": "q", "retrieval.documents.0.document.content": "a"}
    assert parse_attributes(json.dumps(flat)) == flat
    assert parse_attributes(flat.copy()) == flat
    nested = {"input": {"value": "q"}, "retrieval": {"documents": [{"document": {"content": "a"}}]}}
    assert parse_attributes(json.dumps(nested)) == flat
    kv = [
        {"key": "input.value", "value": {"stringValue": "q"}},
        {"key": "n", "value": {"intValue": "7"}},
        {"key": "xs", "value": {"arrayValue": {"values": [{"doubleValue": 1.5}, {"boolValue": True}]}}},
        {"key": "obj", "value": {"kvlistValue": {"values": [{"key": "k", "value": {"stringValue": "v"}}]}}},
    ]
    assert parse_attributes(json.dumps(kv)) == {"input.value": "q", "n": 7, "xs": [1.5, True], "obj.k": "v"}
    # values as AnyValue objects under their keys, as some exporters write them
    assert parse_attributes({"input.value": {"stringValue": "q"}}) == {"input.value": "q"}
    for bad, why in [
        ('{"openinference.span.kind": "RETRIEVER", oops', "not JSON"),
        ("[1, 2]", "must be a JSON object"),
        ('"text"', "must be a JSON object"),
        ("", "empty"),
        (None, "NULL"),
        (b"\xff\xfe", "not valid UTF-8"),
        ("[" * 100_000, "nested too deeply"),
    ]:
        with pytest.raises(AttributesError, match=why):
            parse_attributes(bad)


def test_group_reads_indexed_keys_and_whole_values_in_index_order():
    attrs = {"d.10.x": "ten", "d.2.x": "two", "d.2.y": 2, "other": 1}
    assert group(attrs, "d") == [(2, {"x": "two", "y": 2}), (10, {"x": "ten"})]
    assert group({"d": '[{"x": 1}, "plain"]'}, "d") == [(0, {"x": 1}), (1, {"": "plain"})]


def _group_by_scan(attrs, prefix):
    """``group`` as a scan of every key (the reference its remembered key layouts must match)."""
    items: dict[int, dict] = {}
    whole = attrs.get(prefix)
    if whole is not None:
        whole = json.loads(whole) if isinstance(whole, str) and whole[:1] in "[{" else whole
        if isinstance(whole, list):
            for i, item in enumerate(whole):
                items[i] = parse_attributes(item) if isinstance(item, dict) else {"": item}
    for key, value in attrs.items():
        if key.startswith(prefix + "."):
            index, dot, rest = key[len(prefix) + 1 :].partition(".")
            if dot and rest and index.isdigit() and index.isascii():
                items.setdefault(int(index), {})[rest] = value
    return sorted(items.items())


def test_group_matches_a_scan_of_every_key_for_any_layout_and_values():
    """Items are found through the layout of the keys (remembered per key tuple): spans sharing a
    layout get their own values, and any layout reads as a scan of every key reads it."""
    rng = random.Random(11)
    pieces = ["d.0.x", "d.1.x", "d.1.y", "d.3.x", "d.10.x", "d.x", "d.01.z", "d.\u0663.x", "d.2", "dd.0.x", "d.0.x.y"]
    pieces.append("o")
    for n in range(4000):
        keys = rng.sample(pieces, rng.randint(0, len(pieces)))
        attrs = {k: rng.choice(["v", n, None, 1.5]) for k in keys}
        if rng.random() < 0.2:
            attrs["d"] = rng.choice(['[{"x": 1}, "plain"]', "not json", [{"x": {"y": 2}}], None])
        assert group(attrs, "d") == _group_by_scan(attrs, "d"), attrs
    same_keys = [{"d.0.x": i, "d.1.x": -i} for i in range(3)]
    assert [group(a, "d") for a in same_keys] == [[(0, {"x": i}), (1, {"x": -i})] for i in range(3)]


def _nodes_by_group(attrs, key="retrieval.documents"):
    """OpenInference documents read the general way (``group``), as ``nodes`` reads other forms."""
    out = []
    for _i, f in group(attrs, key):
        meta = f.get("document.metadata")
        content = f.get("document.content")
        out.append(
            Node(
                content if content is None or isinstance(content, str) else str(content),
                f.get("document.id"),
                f.get("document.score"),
                json.loads(meta) if isinstance(meta, str) and meta[:1] in "[{" else meta,
            )
        )
    return out


def test_openinference_documents_read_as_the_general_reading_reads_them():
    """The SDK's flat document keys are read through a layout remembered per key tuple: for any
    fields, gaps, nulls and values, the documents are those the general reading (``group``) gives,
    and spans sharing a layout get their own values."""
    rng = random.Random(3)
    fields = ["content", "id", "score", "metadata", "extra"]
    values = {
        "content": ["text a", "text b", None, 7],
        "id": ["doc-1", 42, None],
        "score": [0.5, 1, None, "high"],
        "metadata": ['{"k": "v"}', "plain", None],
        "extra": ["x"],
    }
    for _ in range(4000):
        attrs: dict = {"openinference.span.kind": "RETRIEVER", "input.value": "q"}
        for i in rng.sample(range(4), rng.randint(1, 4)):
            for f in rng.sample(fields[:4], rng.randint(1, 4)) + (["extra"] if rng.random() < 0.05 else []):
                attrs[f"retrieval.documents.{i}.document.{f}"] = rng.choice(values[f])
        assert OI.nodes(attrs, "retrieve") == _nodes_by_group(attrs), attrs
    spans = [
        {f"retrieval.documents.{i}.document.{f}": f"{f}{i}-{n}" for i in range(3) for f in ("content", "id", "score")}
        for n in range(3)
    ]
    for n, attrs in enumerate(spans):
        assert OI.nodes(attrs, "retrieve") == [Node(f"content{i}-{n}", f"id{i}-{n}", f"score{i}-{n}") for i in range(3)]


def test_queries_answers_and_bad_document_values():
    # a JSON query (some frameworks record the retriever's input as an object)
    attrs = {"input.value": '{"query": "the real question", "k": 3}', "input.mime_type": "application/json"}
    assert OI.query(attrs, "retrieve") == "the real question"
    # the answer: llm.output_messages first, plain output.value otherwise, never a JSON payload
    assert OI.answer({"output.value": "plain answer"}) == "plain answer"
    assert OI.answer({"output.value": '{"x": 1}', "output.mime_type": "application/json"}) is None
    parts = {"llm.output_messages.0.message.role": "assistant"}
    parts["llm.output_messages.0.message.contents.0.message_content.type"] = "text"
    parts["llm.output_messages.0.message.contents.0.message_content.text"] = "from parts"
    assert OI.answer(parts) == "from parts"
    assert GENAI.answer({"gen_ai.completion.0.role": "assistant", "gen_ai.completion.0.content": "legacy"}) == "legacy"
    with pytest.raises(SpanProblem, match="not a JSON array"):
        GENAI.nodes({"gen_ai.retrieval.documents": "{broken"}, "retrieve")
    assert OI.kind_of({"openinference.span.kind": "retriever"}) == "retrieve"
    assert GENAI.kind_of({"gen_ai.operation.name": "embeddings"}) is None


def test_start_times_in_every_stored_form():
    want = datetime(2026, 11, 28, 9, 30, 15, 250000, tzinfo=UTC).timestamp()
    for value in [
        datetime(2026, 11, 28, 9, 30, 15, 250000),
        datetime(2026, 11, 28, 9, 30, 15, 250000, tzinfo=UTC),
        "2026-11-28 09:30:15.250000",
        "2026-11-28T09:30:15.25Z",
        "2026-11-28T04:30:15.25-05:00",
        "2026-11-28T04:30:15.25-0500",
        "2026-11-28 09:30:15.25 UTC",
        want,
        int(want * 1000),
        int(want * 1_000_000),
        int(want * 1_000_000_000),
        str(int(want * 1_000_000_000)),
    ]:
        assert instant(value) == pytest.approx(want, abs=1e-3), value
    assert instant("28/11/2026 09:30") is None and instant(None) is None and instant(True) is None


def test_read_span_keeps_the_cause_of_unreadable_attributes():
    span = read_span("s1", b"\x01\x02", "2026-11-28 10:00:00", "{x")
    assert span.trace_id == "0102" and span.problem is not None and "not JSON" in span.problem


@pytest.mark.parametrize(
    "text, want",
    [
        # past 64 bits: the exact integer, not the float a fast parser reads
        ('{"document.id": 123456789012345678901234567890, "k": "v"}', {"document.id": 123456789012345678901234567890, "k": "v"}),
        ('{"a": {"b": [1, -92233720368547758090]}}', {"a.b": [1, -92233720368547758090]}),
        ('{"text": "a lone \\ud800 surrogate"}', {"text": "a lone \ud800 surrogate"}),
        ('{"score": 1e300, "n": 18446744073709551615, "m": -9223372036854775808}', {"score": 1e300, "n": 2**64 - 1, "m": -(2**63)}),
    ],
)  # fmt: skip
def test_attributes_read_as_the_json_module_reads_them(text, want):
    """What the fast parser refuses or reads inexactly is read again by the json module."""
    assert json.loads(text) is not None  # the json module's own reading is the reference
    got = parse_attributes(text)
    assert got == want and all(type(got[k]) is type(v) for k, v in want.items())


def test_attributes_with_nan_read_as_the_json_module_reads_them():
    got = parse_attributes('{"score": NaN, "other": Infinity, "k": 1}')
    assert got["score"] != got["score"] and got["other"] == float("inf") and got["k"] == 1


def test_documents_column_is_what_json_dumps_writes():
    rng = random.Random(5)
    values = [None, "doc-1", 'é\u2028"x\\', 3, -7, 2**70, 1.5, 0.1, 1e300, float("nan"), float("inf"), True, b"x"]
    metadata = [None, {}, "", {"k": "v"}, "m"]
    for _ in range(3000):
        nodes = [
            Node("c", rng.choice(values), rng.choice(values), rng.choice(metadata) if rng.random() < 0.2 else None)
            for _ in range(rng.randint(1, 6))
        ]
        records = [n.record(i) for i, n in enumerate(nodes, 1)]
        want = json.dumps(records, default=str) if any(len(r) > 1 for r in records) else None
        span = Span("s1", "t1", 0.0, {})
        row = finish(Draft(span, query="q", nodes=nodes, answer="a", llm_span="l1"), reference_configured=False)
        assert row["documents"] == want, nodes
