"""A spans table as the source of a partition run: spans made by the real instrumentation libraries,
scored through ``score_partition`` (the one run path) with the OpenAI judge on the local server."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.scoring.formula import contextual_precision
from ctxprec_ops.warehouse.engine import get_engine
from tests.helpers import traces as T

DAY = "2026-11-28"


def cases(n: int) -> list[T.Case]:
    """``n`` RAG requests; the judge server calls a node relevant iff it says RELEVANT."""
    out = []
    for i in range(n):
        docs = [f"note {i} IRRELEVANT", f"fact {i} RELEVANT", f"filler {i} IRRELEVANT", f"more {i} RELEVANT"]
        out.append((f"question number {i}?", docs[: 2 + i % 3], f"answer {i}"))
    return out


def expected(docs) -> float:
    return contextual_precision(["IRRELEVANT" not in d for d in docs])


def judged(url: str, server, **kw) -> PipelineConfig:
    base = dict(warehouse=url, judge="gpt-4o-mini", judge_base_url=server.base_url, judge_api_key="k", concurrency=4)
    return PipelineConfig(**{**base, **kw})


def scores(engine, table="spans") -> dict[str, dict]:
    with engine.connect() as conn:
        rows = conn.execute(sa.text("SELECT * FROM ctxprec_scores WHERE source_table = :t"), {"t": table}).mappings()
        return {r["log_id"]: dict(r) for r in rows}


@pytest.mark.parametrize("form", ["flat", "nested", "otlp"])
def test_langchain_retriever_spans_are_scored_and_join_back_to_their_traces(judge_server, tmp_path, form):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    data = cases(7)
    rows = T.span_rows(T.langchain_spans(data), DAY, form=form)
    T.write_spans(engine, rows)
    summary = score_partition(judged(url, judge_server, source_format="openinference", chunk_size=3), DAY)
    assert summary.status == "succeeded" and summary.completed
    # the partition's rows are its retriever spans: not the chain, prompt, LLM and parser spans
    assert (summary.rows_total, summary.rows_scored, summary.rows_failed) == (7, 7, 0)
    assert summary.error_message and summary.error_message.startswith("reference-free")
    got = scores(engine)
    with engine.connect() as conn:
        joined = conn.execute(
            sa.text(
                "SELECT s.log_id, s.score, p.attributes FROM ctxprec_scores s JOIN spans p "
                "ON p.trace_id = s.trace_id AND p.span_id = s.span_id"
            )
        ).all()
    assert len(joined) == 7  # every score row joins back to its retriever span
    for log_id, score, attributes in joined:
        query = next(q for q, _d, _a in data if q in attributes)
        docs = next(d for q, d, _a in data if q == query)
        assert score == pytest.approx(expected(docs), abs=0), log_id
        row = got[log_id]
        assert row["span_id"] == log_id and row["reference"] == "answer"
        documents = json.loads(row["documents"])  # LangChain records each document's metadata
        assert [d["node"] for d in documents] == list(range(1, len(docs) + 1))
        assert documents[0]["metadata"] == {"source": "kb/0"}


def test_reranker_stage_is_its_own_population_with_the_reranked_order(judge_server, tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    data = cases(5)
    # the reranker puts the RELEVANT documents first
    orders = [sorted(range(len(d)), key=lambda k, d=d: "IRRELEVANT" in d[k]) for _q, d, _a in data]
    T.write_spans(engine, T.span_rows(T.openinference_manual_spans(data, reranked=orders), DAY))
    retrieve = score_partition(judged(url, judge_server, source_format="openinference"), DAY)
    rerank = score_partition(judged(url, judge_server, source_format="openinference", stage="rerank"), DAY)
    assert (retrieve.source_table, rerank.source_table) == ("spans", "spans__rerank")
    assert retrieve.rows_scored == rerank.rows_scored == 5
    assert rerank.mean_score == pytest.approx(1.0) and retrieve.mean_score < 1.0
    want = sum(expected(d) for _q, d, _a in data) / 5
    assert retrieve.mean_score == pytest.approx(want)
    # the same span id never appears in both stages: each stage's scores are its spans'
    assert not set(scores(engine, "spans")) & set(scores(engine, "spans__rerank"))
    # the node texts were judged once: the reranker's run answered from the judgment cache
    assert rerank.judge_calls == 0


def test_genai_retrieval_spans_with_a_documents_table_and_a_gold_table(judge_server, tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    data = cases(4)
    # OTel GenAI's structured form records document ids and scores, not texts
    T.write_spans(engine, T.span_rows(T.genai_spans(data, ids_only=True, monkeypatch=monkeypatch), DAY))
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE docs (id TEXT PRIMARY KEY, content TEXT)")
        conn.exec_driver_sql("CREATE TABLE gold (input TEXT, expected_output TEXT)")
        for n, (q, docs, _a) in enumerate(data):
            for i, text in enumerate(docs):
                conn.exec_driver_sql("INSERT INTO docs VALUES (?, ?)", (f"doc-{n}-{i}", text))
            conn.exec_driver_sql("INSERT INTO gold VALUES (?, ?)", (q, f"gold answer {n}"))
    without = score_partition(judged(url, judge_server, source_format="otel-genai"), DAY)
    assert without.rows_failed == 4 and without.rows_scored == 0 and without.completed
    cfg = judged(url, judge_server, source_format="otel-genai", documents_table="docs", gold_table="gold")
    summary = score_partition(cfg, DAY)
    assert summary.rows_scored == 4 and summary.rows_failed == 0 and not summary.error_message
    got = scores(engine)
    by_query = {q: d for q, d, _a in data}
    prompts = [json.dumps(r) for r in judge_server.requests]
    for row in got.values():
        assert row["reference"] == "gold:gold"
        documents = json.loads(row["documents"])
        n = int(documents[0]["id"].split("-")[1])
        assert row["score"] == pytest.approx(expected(by_query[data[n][0]]), abs=0)
    assert any("gold answer 0" in p for p in prompts)  # judged against the gold answer


def test_chunk_reads_touch_only_the_chunk_and_its_traces(judge_server, tmp_path):
    """Memory is bounded by the chunk: every statement on the spans table is bounded by span-id
    keys or by the chunk's trace ids, or streams ids (planning, the ledger: with the attributes of
    a span only when its kind is not written as exporters write it — none here)."""
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    data = cases(12)
    T.write_spans(engine, T.span_rows(T.langchain_spans(data), DAY))
    seen: list[str] = []

    @sa.event.listens_for(engine, "before_cursor_execute")
    def record(conn, cursor, statement, parameters, context, executemany):
        if "FROM spans" in statement:
            seen.append(" ".join(statement.split()))

    small = score_partition(judged(url, judge_server, source_format="openinference", chunk_size=2), DAY)
    assert small.rows_scored == 12
    unsure_only = "THEN NULL ELSE spans.attributes END AS ctxprec_unsure FROM spans"
    reads = [s for s in seen if "attributes" in s.split("FROM spans")[0] and unsure_only not in s]
    assert reads and all("span_id <= ?" in s or "trace_id IN (" in s for s in reads), reads
    whole = [s for s in seen if s not in reads]
    assert whole and all(s.startswith("SELECT spans.span_id FROM") or unsure_only in s for s in whole), whole


def test_sampling_counts_retriever_spans_and_a_rerun_judges_nothing(judge_server, tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    T.write_spans(engine, T.span_rows(T.langchain_spans(cases(20)), DAY))
    cfg = judged(url, judge_server, source_format="openinference", sample_rate=0.5)
    first = score_partition(cfg, DAY)
    assert first.rows_total == 20 and 0 < first.rows_sampled < 20
    assert first.rows_scored == first.rows_sampled
    calls = judge_server.calls
    again = score_partition(cfg, DAY)
    assert judge_server.calls == calls and again.rows_scored == first.rows_scored and again.judge_calls == 0


def test_retriever_spans_are_found_whatever_the_case_of_their_kind(judge_server, tmp_path):
    """``openinference.span.kind`` written ``retriever`` / ``Retriever`` by a hand-instrumented app
    is a retriever span as ``RETRIEVER`` is: planned by the SQL pre-filter, not only accepted by
    the exact check."""
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    data = cases(3)
    spans = T.openinference_manual_spans(data, retriever_kinds=["retriever", "Retriever", "RETRIEVER"])
    T.write_spans(engine, T.span_rows(spans, DAY))
    summary = score_partition(judged(url, judge_server, source_format="openinference"), DAY)
    assert (summary.rows_total, summary.rows_scored, summary.rows_unaccounted) == (3, 3, 0)
    assert summary.status == "succeeded"
    assert len(scores(engine)) == 3


def test_segment_columns_of_a_spans_table_reach_the_score_rows(judge_server, tmp_path):
    """``--segment service`` on a spans source: each score row carries its span's ``service``
    (not NULL), so ``check --by`` / ``compare`` see the segments."""
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    data = cases(6)
    rows = T.span_rows(T.openinference_manual_spans(data), DAY)
    traces = sorted({r["trace_id"] for r in rows})
    service = {t: ("search-a" if i % 2 else "search-b") for i, t in enumerate(traces)}
    rows = [{**r, "service": service[r["trace_id"]]} for r in rows]
    T.write_spans(engine, rows, extra_columns=["service"])
    summary = score_partition(
        judged(url, judge_server, source_format="openinference", segments=["service"], chunk_size=4), DAY
    )
    assert summary.rows_scored == 6 and summary.status == "succeeded"
    with engine.connect() as conn:
        got = dict(conn.execute(sa.text("SELECT s.log_id, g.seg_service FROM ctxprec_scores s JOIN ctxprec_segments g "
                                         "ON g.log_id = s.log_id AND g.metric = s.metric")).all())  # fmt: skip
        spans = dict(conn.execute(sa.text("SELECT span_id, service FROM spans")).all())
    assert len(got) == 6 and set(got.values()) == {"search-a", "search-b"}
    assert all(got[span_id] == spans[span_id] for span_id in got)
