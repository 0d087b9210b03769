"""Spans made by the real instrumentation libraries, for the span-source tests.

- ``langchain_spans``: a LangChain chain (a tiny in-memory retriever, a prompt, a fake chat model)
  run under ``openinference-instrumentation-langchain`` — RETRIEVER, LLM and CHAIN spans exactly as
  that instrumentor records them;
- ``openinference_manual_spans``: OpenInference's manual-instrumentation API (``OITracer`` and its
  attribute helpers) with RETRIEVER, RERANKER and LLM spans;
- ``genai_spans``: ``opentelemetry-util-genai``'s ``TelemetryHandler`` (``gen_ai.retrieval`` and
  inference spans of the OTel GenAI conventions);
- ``span_rows`` / ``write_spans``: the SDK's finished spans as rows of a spans table (the shape an
  OTLP -> warehouse export has), start times moved onto one UTC day keeping their order;
- ``otlp_json``: the same spans through the SDK's own OTLP encoder, written as OTLP/JSON.

Each case is ``(query, documents, answer)``; the spans are collected by the SDK's
``InMemorySpanExporter``.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from typing import Any

import sqlalchemy as sa
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

Case = tuple[str, Sequence[str], str]


@contextmanager
def _provider() -> Iterator[tuple[TracerProvider, InMemorySpanExporter]]:
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    try:
        yield provider, exporter
    finally:
        provider.shutdown()


def langchain_spans(cases: Sequence[Case]) -> list[ReadableSpan]:
    """One LangChain RAG chain run per case, traced by OpenInference's LangChain instrumentor."""
    from langchain_core.documents import Document
    from langchain_core.language_models.fake_chat_models import FakeListChatModel
    from langchain_core.output_parsers import StrOutputParser
    from langchain_core.prompts import ChatPromptTemplate
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.runnables import RunnablePassthrough
    from openinference.instrumentation.langchain import LangChainInstrumentor

    class ListRetriever(BaseRetriever):
        texts: list[str]

        def _get_relevant_documents(self, query: str, *, run_manager: Any) -> list[Document]:
            return [Document(page_content=t, metadata={"source": f"kb/{i}"}) for i, t in enumerate(self.texts)]

    with _provider() as (provider, exporter):
        instrumentor = LangChainInstrumentor()
        instrumentor.instrument(tracer_provider=provider)
        try:
            for query, docs, answer in cases:
                retriever = ListRetriever(texts=list(docs))
                llm = FakeListChatModel(responses=[answer])
                prompt = ChatPromptTemplate.from_template("Context: {context}\nQuestion: {question}")
                chain = {"context": retriever, "question": RunnablePassthrough()} | prompt | llm | StrOutputParser()
                assert chain.invoke(query) == answer
        finally:
            instrumentor.uninstrument()
        return list(exporter.get_finished_spans())


def openinference_manual_spans(
    cases: Sequence[Case],
    *,
    reranked: Sequence[Sequence[int]] | None = None,
    with_llm: bool = True,
    expected: Sequence[str] | None = None,
    retriever_kinds: Sequence[str] | None = None,
) -> list[ReadableSpan]:
    """Per case a CHAIN root with a RETRIEVER span, a RERANKER span (when ``reranked`` gives the
    new order of each case's documents) and an LLM span, made with OpenInference's OITracer;
    ``expected``: each case's reference answer as the retriever span's ``eval.expected_output``;
    ``retriever_kinds``: each retriever span's ``openinference.span.kind`` as a hand-instrumented
    app may write it (e.g. ``retriever``), instead of the library's ``RETRIEVER``."""
    from openinference.instrumentation import (
        OITracer,
        TraceConfig,
        get_input_attributes,
        get_llm_attributes,
        get_reranker_attributes,
        get_retriever_attributes,
        get_span_kind_attributes,
    )

    with _provider() as (provider, exporter):
        tracer = OITracer(provider.get_tracer("rag-app"), config=TraceConfig())
        for n, (query, docs, answer) in enumerate(cases):
            documents = [{"content": t, "id": f"doc-{n}-{i}", "score": 1.0 - i / 10} for i, t in enumerate(docs)]
            with tracer.start_as_current_span("rag", attributes=get_span_kind_attributes("chain")):
                with tracer.start_as_current_span("retrieve") as span:
                    span.set_attributes(get_span_kind_attributes("retriever"))
                    if retriever_kinds is not None:
                        span.set_attribute("openinference.span.kind", retriever_kinds[n])
                    span.set_attributes(get_input_attributes(query))
                    span.set_attributes(get_retriever_attributes(documents=documents))
                    if expected is not None:
                        span.set_attribute("eval.expected_output", expected[n])
                if reranked is not None:
                    order = reranked[n]
                    with tracer.start_as_current_span("rerank") as span:
                        span.set_attributes(get_span_kind_attributes("reranker"))
                        span.set_attributes(
                            get_reranker_attributes(
                                query=query,
                                model_name="cross-encoder",
                                input_documents=documents,
                                output_documents=[documents[i] for i in order],
                            )
                        )
                if with_llm:
                    with tracer.start_as_current_span("llm") as span:
                        span.set_attributes(get_span_kind_attributes("llm"))
                        span.set_attributes(
                            get_llm_attributes(
                                model_name="fake-model",
                                input_messages=[{"role": "user", "content": query}],
                                output_messages=[{"role": "assistant", "content": answer}],
                            )
                        )
        return list(exporter.get_finished_spans())


def genai_spans(cases: Sequence[Case], *, ids_only: bool = False, monkeypatch: Any) -> list[ReadableSpan]:
    """Per case a ``gen_ai.retrieval`` span and an inference span, made by opentelemetry-util-genai
    (content captured on spans). ``ids_only``: documents as ``RetrievalDocument`` (id and score,
    the convention's structured form, no text)."""
    monkeypatch.setenv("OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT", "SPAN_ONLY")
    monkeypatch.setenv("OTEL_SEMCONV_STABILITY_OPT_IN", "gen_ai_latest_experimental")
    from opentelemetry.util.genai.handler import TelemetryHandler
    from opentelemetry.util.genai.types import OutputMessage, RetrievalDocument, TextPart

    with _provider() as (provider, exporter):
        handler = TelemetryHandler(tracer_provider=provider)
        app = provider.get_tracer("rag-app")
        for n, (query, docs, answer) in enumerate(cases):
            with app.start_as_current_span("answer question"):  # the app's request span: one trace
                with handler.retrieval(data_source_id="kb", provider="chroma") as retrieval:
                    retrieval.query_text = query
                    if ids_only:
                        retrieval.documents = [
                            RetrievalDocument(id=f"doc-{n}-{i}", score=0.9) for i in range(len(docs))
                        ]
                    else:
                        retrieval.documents = [
                            {"id": f"doc-{n}-{i}", "score": 0.9, "content": t} for i, t in enumerate(docs)
                        ]
                with handler.inference("openai", request_model="gpt-test") as inference:
                    inference.output_messages = [OutputMessage(role="assistant", parts=[TextPart(content=answer)])]
        return list(exporter.get_finished_spans())


def _hex(value: int, width: int) -> str:
    return format(value, f"0{width}x")


def span_rows(spans: Sequence[ReadableSpan], day: str = "2026-11-28", *, form: str = "flat") -> list[dict[str, Any]]:
    """The spans as spans-table rows; start times moved onto ``day`` (order kept). ``form``:
    ``flat`` (attribute keys as recorded), ``nested`` (objects split at the dots, as OTLP/JSON-style
    exporters write them) or ``otlp`` (an OTLP ``KeyValue`` list)."""
    first = min(s.start_time for s in spans)
    base = datetime.fromisoformat(day).replace(tzinfo=UTC) + timedelta(hours=9)
    rows = []
    for s in spans:
        attrs = dict(s.attributes or {})
        start = base + timedelta(microseconds=(s.start_time - first) // 1000)
        rows.append(
            {
                "trace_id": _hex(s.context.trace_id, 32),
                "span_id": _hex(s.context.span_id, 16),
                "parent_id": _hex(s.parent.span_id, 16) if s.parent else None,
                "name": s.name,
                "start_time": start.strftime("%Y-%m-%d %H:%M:%S.%f"),
                "attributes": json.dumps(_form(attrs, form)),
            }
        )
    return rows


def _nest(attrs: dict[str, Any]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    for key, value in attrs.items():
        node = root
        *path, leaf = key.split(".")
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = list(value) if isinstance(value, tuple) else value
    return _lists(root)


def _lists(node: Any) -> Any:
    """Objects whose keys are 0..n-1 as arrays (``retrieval.documents.0`` -> a list)."""
    if not isinstance(node, dict):
        return node
    out = {k: _lists(v) for k, v in node.items()}
    if out and all(k.isdigit() for k in out) and sorted(map(int, out)) == list(range(len(out))):
        return [out[str(i)] for i in range(len(out))]
    return out


def _any(value: Any) -> dict[str, Any]:
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    if isinstance(value, (list, tuple)):
        return {"arrayValue": {"values": [_any(v) for v in value]}}
    return {"stringValue": str(value)}


def _form(attrs: dict[str, Any], form: str) -> Any:
    if form == "nested":
        return _nest(attrs)
    if form == "otlp":
        return [{"key": k, "value": _any(v)} for k, v in attrs.items()]
    return {k: list(v) if isinstance(v, tuple) else v for k, v in attrs.items()}


def spans_table(
    engine: sa.Engine, name: str = "spans", *, attributes_type: Any = sa.Text, extra_columns: Sequence[str] = ()
) -> sa.Table:
    """A spans table; ``extra_columns``: text columns an exporter adds (e.g. ``service``)."""
    md = sa.MetaData()
    table = sa.Table(
        name,
        md,
        *(sa.Column(c, sa.Text) for c in extra_columns),
        sa.Column("trace_id", sa.String(64)),
        sa.Column("span_id", sa.String(32)),
        sa.Column("parent_id", sa.String(32)),
        sa.Column("name", sa.Text),
        sa.Column("start_time", sa.Text if engine.dialect.name == "sqlite" else sa.DateTime()),
        sa.Column("attributes", attributes_type),
        sa.Index(f"ix_{name}_span_id", "span_id"),
        sa.Index(f"ix_{name}_trace_id", "trace_id"),
    )
    md.create_all(engine)
    return table


def write_spans(engine: sa.Engine, rows: Sequence[dict[str, Any]], name: str = "spans", **kw: Any) -> sa.Table:
    table = spans_table(engine, name, **kw)
    if engine.dialect.name != "sqlite":
        rows = [{**r, "start_time": datetime.fromisoformat(r["start_time"])} for r in rows]
    if kw.get("attributes_type") is not None and kw["attributes_type"] is not sa.Text:
        rows = [{**r, "attributes": json.loads(r["attributes"])} for r in rows]
    with engine.begin() as conn:
        conn.execute(table.insert(), list(rows))
    return table


def otlp_json(spans: Sequence[ReadableSpan], *, hex_ids: bool = True) -> str:
    """The spans as an OTLP/JSON ``ExportTraceServiceRequest``, encoded by the SDK's OTLP encoder
    (``hex_ids``: ids as OTLP/JSON's hex; else the protobuf JSON mapping's base64)."""
    import base64

    from google.protobuf.json_format import MessageToDict
    from opentelemetry.exporter.otlp.proto.common.trace_encoder import encode_spans

    doc = MessageToDict(encode_spans(spans))
    if hex_ids:
        for rs in doc["resourceSpans"]:
            for ss in rs["scopeSpans"]:
                for sp in ss["spans"]:
                    for key in ("traceId", "spanId", "parentSpanId"):
                        if key in sp:
                            sp[key] = base64.b64decode(sp[key]).hex()
    return json.dumps(doc)


def case_of(rows: Sequence[dict[str, Any]], span_id: str) -> dict[str, Any]:
    return next(r for r in rows if r["span_id"] == span_id)


def kinds(rows: Sequence[dict[str, Any]]) -> dict[str, str]:
    """span id -> OpenInference span kind (or GenAI operation name) of flat-form rows."""
    out = {}
    for r in rows:
        a = json.loads(r["attributes"])
        out[r["span_id"]] = a.get("openinference.span.kind") or a.get("gen_ai.operation.name") or ""
    return out
