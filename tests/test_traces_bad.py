"""Bad traces get the treatment of bad rows: each a failure with its cause, never a crash, never
dropped silently; and settings that do not fit a spans table are refused before any work."""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from ctxprec_ops.pipeline import PipelineConfig, prepare, score_partition
from ctxprec_ops.warehouse.engine import get_engine
from ctxprec_ops.warehouse.source import SourceTableError
from tests.helpers import traces as T

DAY = "2026-11-28"
GOOD = [
    ("What is RELEVANT here?", ["a RELEVANT fact", "an IRRELEVANT one"], "The fact."),
    ("Second question?", ["IRRELEVANT", "RELEVANT"], "Answer two."),
]


def judged(url, server, **kw):
    return PipelineConfig(warehouse=url, judge="gpt-4o-mini", judge_base_url=server.base_url, judge_api_key="k", **kw)


def retriever_rows(rows):
    kinds = T.kinds(rows)
    return [r for r in rows if kinds[r["span_id"]] == "RETRIEVER"]


def outcome(engine):
    with engine.connect() as conn:
        scored = {r[0] for r in conn.exec_driver_sql("SELECT log_id FROM ctxprec_scores")}
        failed = dict(conn.exec_driver_sql("SELECT log_id, error_message FROM ctxprec_failures").all())
    return scored, failed


def test_every_bad_trace_is_a_failure_with_its_cause(judge_server, tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    good = T.span_rows(T.langchain_spans(GOOD), DAY)
    # a real retriever that found nothing: the instrumentor records no documents at all
    empty = T.span_rows(T.langchain_spans([("Nothing found?", [], "I do not know.")]), DAY)
    # a trace whose app never called the LLM
    no_llm = T.span_rows(T.openinference_manual_spans([("Lonely question?", ["RELEVANT"], "")], with_llm=False), DAY)
    # documents recorded by id only (OTel GenAI's structured form)
    rows = good + empty + no_llm
    ids_only = retriever_rows(T.span_rows(T.openinference_manual_spans([("Ids only?", ["x", "y"], "a")]), DAY))[0]
    attrs = json.loads(ids_only["attributes"])
    for k in [k for k in attrs if k.endswith(".document.content")]:
        del attrs[k]
    rows.append({**ids_only, "attributes": json.dumps(attrs)})
    target = retriever_rows(good)[0]
    # the same span exported twice (at-least-once delivery), with a changed score
    dup_source = retriever_rows(good)[1]
    rows.append({**dup_source, "attributes": dup_source["attributes"].replace("RELEVANT", "RELEVANT!")})
    # a truncated export: attributes that are not JSON
    rows.append({**target, "span_id": "badjson000000001", "attributes": target["attributes"][:60]})
    # JSON, but not an object
    rows.append({**target, "span_id": "notobject0000001", "attributes": '["RETRIEVER"]'})
    # CHAIN spans holding the text "RETRIEVER" (a value of their own: the SQL filter lets them
    # through): no case spans, so neither scored nor failed, nor counted in the partition's rows —
    # nor, without a start time or an id, in the rows counted apart (the ledger agrees: nothing
    # unaccounted)
    chain = {"openinference.span.kind": "CHAIN", "metadata.step": "RETRIEVER", "input.value": 'the "RETRIEVER"'}
    assert '"RETRIEVER"' in json.dumps(chain)
    rows.append({**target, "span_id": "chain00000000001", "attributes": json.dumps(chain)})
    rows.append({**target, "span_id": "chain00000000002", "attributes": json.dumps(chain), "start_time": None})
    rows.append({**target, "span_id": None, "attributes": json.dumps(chain)})
    # a retriever span with no start time (no partition) and one with no span id (no log id)
    rows.append({**target, "span_id": "notime0000000001", "start_time": None})
    rows.append({**target, "span_id": None})
    T.write_spans(engine, rows)

    summary = score_partition(judged(url, judge_server, source_format="openinference", chunk_size=3), DAY)
    assert summary.completed and summary.status == "succeeded"
    scored, failed = outcome(engine)
    empty_id = retriever_rows(empty)[0]["span_id"]
    no_llm_id = retriever_rows(no_llm)[0]["span_id"]
    trace = {r["span_id"]: r["trace_id"] for r in rows if r["span_id"]}
    assert scored == {target["span_id"]}
    want = {
        empty_id: "has no documents (retrieval.documents is missing or empty)",
        no_llm_id: f"trace {trace[no_llm_id]} has no LLM span after this span",
        ids_only[
            "span_id"
        ]: "document 1 (id 'doc-0-0') has no content (2 of 2 documents lack it): the span records ids only",
        dup_source["span_id"]: "is not unique: 2 rows of partition 2026-11-28 share it",
        "badjson000000001": "attributes are not JSON",
        "notobject0000001": "attributes must be a JSON object, got list",
    }
    assert set(failed) == set(want)
    for span_id, cause in want.items():
        assert cause in failed[span_id], (span_id, failed[span_id])
        if span_id != dup_source["span_id"]:
            assert failed[span_id].startswith(f"span {span_id} of trace {trace[span_id]}: ")
    # rows_total counts source rows: the two spans sharing an id are two rows under one failure record
    assert summary.rows_total == 8 and summary.rows_failed == 6 and summary.rows_unaccounted == 0
    assert summary.rows_unpartitioned == 1 and summary.rows_without_id == 1
    with engine.connect() as conn:
        traces = dict(conn.exec_driver_sql("SELECT log_id, trace_id FROM ctxprec_failures").all())
    assert traces == {k: trace[k] for k in want}  # failures join back to their traces too


def test_documents_table_fills_texts_and_names_what_it_lacks(judge_server, tmp_path, monkeypatch):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    T.write_spans(engine, T.span_rows(T.genai_spans(GOOD, ids_only=True, monkeypatch=monkeypatch), DAY))
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE docs (id TEXT, content TEXT)")
        # case 0's documents are there, case 1's second one is not
        for doc_id, text in [("doc-0-0", "a RELEVANT fact"), ("doc-0-1", "IRRELEVANT"), ("doc-1-0", "IRRELEVANT")]:
            conn.exec_driver_sql("INSERT INTO docs VALUES (?, ?)", (doc_id, text))
    summary = score_partition(judged(url, judge_server, source_format="otel-genai", documents_table="docs"), DAY)
    assert (summary.rows_scored, summary.rows_failed) == (1, 1)
    _scored, failed = outcome(engine)
    (message,) = failed.values()
    assert "document 2 (id 'doc-1-1') has no content and documents table docs has no row for it" in message


def test_a_span_holding_the_kind_text_elsewhere_is_no_case_in_the_plan_nor_the_ledger(
    judge_server, tmp_path, monkeypatch
):
    """OTel GenAI: an inference span whose tool is named "retrieval" holds the filter's text
    ``"retrieval"`` (a value of another attribute); the plan, the ledger and the chunk's read
    agree that it is no case span: the run accounts for every case and succeeds."""
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    rows = T.span_rows(T.genai_spans(GOOD, monkeypatch=monkeypatch), DAY)
    other = next(r for r in rows if json.loads(r["attributes"]).get("gen_ai.operation.name") == "chat")
    attrs = {**json.loads(other["attributes"]), "gen_ai.tool.name": "retrieval"}
    rows.append({**other, "span_id": "toolnamed0000001", "attributes": json.dumps(attrs)})
    T.write_spans(engine, rows)
    summary = score_partition(judged(url, judge_server, source_format="otel-genai"), DAY)
    assert summary.status == "succeeded" and summary.rows_unaccounted == 0
    assert (summary.rows_total, summary.rows_scored, summary.rows_failed) == (2, 2, 0)


def test_configured_reference_missing_is_a_failure_naming_where_it_looked(judge_server, tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    T.write_spans(engine, T.span_rows(T.openinference_manual_spans(GOOD), DAY))
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE gold (trace_id TEXT, input TEXT, expected_output TEXT)")
        conn.exec_driver_sql("INSERT INTO gold VALUES (NULL, ?, 'the gold answer')", (GOOD[0][0],))
        conn.exec_driver_sql("INSERT INTO gold VALUES (NULL, ?, 'one answer')", (GOOD[1][0],))
        conn.exec_driver_sql("INSERT INTO gold VALUES (NULL, ?, 'another answer')", (GOOD[1][0],))
    cfg = judged(url, judge_server, source_format="openinference", gold_table="gold", expected_attribute="eval.ref")
    summary = score_partition(cfg, DAY)
    assert (summary.rows_scored, summary.rows_failed) == (1, 1) and not summary.error_message
    _scored, failed = outcome(engine)
    (message,) = failed.values()
    assert "gold table gold has 2 different expected outputs for it" in message
    with engine.begin() as conn:
        conn.exec_driver_sql("DELETE FROM gold")
    # the span scored above keeps its score (the reference is recorded on the row, it is not part
    # of what identifies a score); the other now says where it looked for one
    score_partition(cfg, DAY)
    scored, failed = outcome(engine)
    assert len(scored) == 1 and len(failed) == 1
    (message,) = failed.values()
    assert "no expected output: no attribute 'eval.ref' on the span, no row in gold table gold for its trace" in message
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT reference FROM ctxprec_scores").all() == [("gold:gold",)]


def test_the_llm_span_that_follows_is_paired_and_an_unreadable_one_is_named(judge_server, tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    rows = T.span_rows(T.openinference_manual_spans(GOOD), DAY)
    kinds = T.kinds(rows)
    llm = [r for r in rows if kinds[r["span_id"]] == "LLM"]
    # trace 0: an earlier LLM call (query rewriting, before the retrieval) must not be paired
    retriever0 = next(r for r in retriever_rows(rows) if r["trace_id"] == llm[0]["trace_id"])
    early = {"openinference.span.kind": "LLM", "llm.output_messages.0.message.content": "REWRITTEN QUERY"}
    rows.append({**llm[0], "span_id": "early00000000001", "start_time": "2026-11-28 08:00:00.000000"})
    rows[-1]["attributes"] = json.dumps(early)
    # trace 1: its only LLM span is truncated
    for r in rows:
        if r["span_id"] == llm[1]["span_id"]:
            r["attributes"] = r["attributes"][:40] + ' "LLM"'
    T.write_spans(engine, rows)
    summary = score_partition(judged(url, judge_server, source_format="openinference"), DAY)
    # the cut-off LLM span is itself recorded (its kind cannot be told), and named by the
    # retriever span it might have answered
    assert (summary.rows_scored, summary.rows_failed) == (1, 2)
    scored, failed = outcome(engine)
    assert scored == {retriever0["span_id"]}
    assert "attributes are not JSON" in failed.pop(llm[1]["span_id"])
    (message,) = failed.values()
    assert f"span(s) {llm[1]['span_id']} of the trace have attributes that are not JSON" in message
    judged_prompts = " ".join(json.dumps(r) for r in judge_server.requests)
    assert "The fact." in judged_prompts and "REWRITTEN QUERY" not in judged_prompts


def test_settings_that_do_not_fit_are_refused_before_any_work(tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    with pytest.raises(ValueError, match="define no reranker span"):
        PipelineConfig(warehouse=url, source_format="otel-genai", stage="rerank")
    with pytest.raises(ValueError, match="builds single-turn cases"):
        PipelineConfig(warehouse=url, source_format="openinference", metric="turn_contextual_precision")
    with pytest.raises(ValueError, match="gold_table applies to a spans table"):
        PipelineConfig(warehouse=url, gold_table="gold")
    with pytest.raises(ValueError, match="source_format must be one of rows, openinference, otel-genai"):
        PipelineConfig(warehouse=url, source_format="jaeger")
    with pytest.raises(ValueError, match="a spans table's logical columns are span_id, trace_id"):
        PipelineConfig(warehouse=url, source_format="openinference", columns={"retrieval_context": "x"})
    engine = get_engine(url)
    T.spans_table(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE gold (question TEXT, expected_output TEXT)")
    with pytest.raises(SourceTableError, match="needs a column trace_id or input"):
        prepare(PipelineConfig(warehouse=url, source_format="openinference", gold_table="gold"))
    with pytest.raises(SourceTableError, match="documents table 'nope' does not exist"):
        prepare(PipelineConfig(warehouse=url, source_format="openinference", documents_table="nope"))
    with pytest.raises(SourceTableError, match="has no column 'SpanAttributes'.*CTXPREC_SPAN_COLUMNS"):
        prepare(PipelineConfig(warehouse=url, source_format="openinference", columns={"attributes": "SpanAttributes"}))


def test_mapped_columns_and_postgres_jsonb(pg_url, judge_server):
    engine = get_engine(pg_url)
    data = GOOD + [("Third one?", ["RELEVANT", "RELEVANT", "IRRELEVANT"], "Three.")]
    rows = T.span_rows(T.langchain_spans(data), DAY)
    renamed = [
        {
            "TraceId": r["trace_id"],
            "SpanId": r["span_id"],
            "Timestamp": r["start_time"],
            "SpanAttributes": r["attributes"],
        }
        for r in rows
    ]
    md = sa.MetaData()
    table = sa.Table(
        "otel_traces",
        md,
        sa.Column("TraceId", sa.Text),
        sa.Column("SpanId", sa.Text),
        sa.Column("Timestamp", sa.DateTime(timezone=True)),
        sa.Column("SpanAttributes", sa.dialects.postgresql.JSONB),
    )
    md.create_all(engine)
    from datetime import UTC, datetime

    with engine.begin() as conn:
        conn.execute(
            table.insert(),
            [
                {
                    **r,
                    "Timestamp": datetime.fromisoformat(r["Timestamp"]).replace(tzinfo=UTC),
                    "SpanAttributes": json.loads(r["SpanAttributes"]),
                }
                for r in renamed
            ],
        )
    columns = {"trace_id": "TraceId", "span_id": "SpanId", "start_time": "Timestamp", "attributes": "SpanAttributes"}
    cfg = judged(pg_url, judge_server, source_format="openinference", source_table="otel_traces", columns=columns)
    summary = score_partition(cfg, DAY)
    assert (summary.rows_total, summary.rows_scored) == (3, 3)
    with engine.connect() as conn:
        got = dict(conn.exec_driver_sql("SELECT span_id, score FROM ctxprec_scores").all())
    want = {r["span_id"] for r in retriever_rows(rows)}
    assert set(got) == want
    assert sorted(got.values()) == sorted([1.0, 1.0, 0.5])
