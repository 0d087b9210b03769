"""Arize Phoenix as a source and a sink, against a real Phoenix server (tests/fixtures/phoenix.py).

An instrumented app sends its traces to Phoenix over OTLP; ``score_partition`` reads the day's
retriever spans from Phoenix, the local OpenAI-protocol judge judges them, and every node's
verdict goes back to its span as a document annotation (Phoenix computes its retrieval metrics
from them), every score as a span annotation. Assertions are on what Phoenix returns.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.scoring.formula import contextual_precision
from ctxprec_ops.traces.phoenix import PhoenixError, PhoenixTarget, staging_table

DAY = (datetime.now(UTC) - timedelta(days=1)).strftime("%Y-%m-%d")

METRICS = """
query ($id: ID!) {
  node(id: $id) {
    ... on Span {
      spanId
      documentRetrievalMetrics(evaluationName: "ctxprec_relevance") { ndcg precision reciprocalRank hit }
      documentEvaluations { name label score documentPosition annotatorKind }
    }
  }
}
"""


def _cases(n: int) -> list[tuple[str, list[str], str]]:
    """``n`` requests; the judge server calls a document relevant iff it says RELEVANT."""
    out = []
    for i in range(n):
        docs = [f"note {i} IRRELEVANT", f"fact {i} RELEVANT", f"filler {i} IRRELEVANT", f"more {i} RELEVANT"]
        out.append((f"question number {i}?", docs[: 2 + i % 3], f"answer {i}"))
    return out


def _config(url: str, phoenix, judge_server, project: str, **kw) -> PipelineConfig:
    return PipelineConfig(
        warehouse=url,
        judge="gpt-4o-mini",
        judge_base_url=judge_server.base_url,
        judge_api_key="k",
        phoenix_url=phoenix.url,
        phoenix_project=project,
        **kw,
    )


def _span_gids(phoenix, project: str) -> dict[str, str]:
    """span id -> Phoenix's node id, for the project's retriever spans."""
    data = phoenix.get(f"/v1/projects/{project}/spans?limit=1000&span_kind=RETRIEVER")["data"]
    return {s["context"]["span_id"]: s["id"] for s in data}


def _span_annotations(phoenix, project: str, span_ids: list[str]) -> list[dict]:
    query = "&".join(f"span_ids={s}" for s in span_ids)
    return phoenix.get(f"/v1/projects/{project}/span_annotations?{query}&limit=1000")["data"]


def test_the_days_retriever_spans_are_read_from_phoenix_scored_and_written_back(tmp_path, phoenix, judge_server):
    project = f"rag-{uuid.uuid4().hex[:8]}"
    cases = _cases(5)
    span_ids = phoenix.send(project, DAY, cases)
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    config = _config(url, phoenix, judge_server, project, write_back="phoenix")

    summary = score_partition(config, DAY)
    assert (summary.status, summary.rows_total, summary.rows_scored) == ("succeeded", 5, 5)
    assert f"write-back to phoenix:{phoenix.url}/{project}: 5 span(s) annotated" in (summary.error_message or "")
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        stored = dict(conn.execute(sa.text("SELECT span_id, score FROM ctxprec_scores")).all())
        (source,) = conn.execute(sa.text("SELECT DISTINCT source_table FROM ctxprec_scores")).one()
    engine.dispose()
    assert source == staging_table(project)  # the project is part of every score's key
    assert set(stored) == set(span_ids)

    gids = _span_gids(phoenix, project)
    for (_query, docs, _answer), span_id in zip(cases, span_ids):
        relevant = ["IRRELEVANT" not in d for d in docs]
        assert stored[span_id] == pytest.approx(contextual_precision(relevant))
        node = phoenix.graphql(METRICS, id=gids[span_id])["node"]
        evaluations = sorted(node["documentEvaluations"], key=lambda e: e["documentPosition"])
        assert [e["label"] for e in evaluations] == ["relevant" if r else "irrelevant" for r in relevant]
        assert {e["annotatorKind"] for e in evaluations} == {"LLM"}
        (metrics,) = node["documentRetrievalMetrics"]  # Phoenix's own figures from our verdicts
        assert metrics["hit"] == 1.0 and metrics["reciprocalRank"] == 0.5  # the first relevant is 2nd
        assert metrics["precision"] == pytest.approx(sum(relevant) / len(relevant))
    annotations = _span_annotations(phoenix, project, span_ids)
    assert len(annotations) == 5 and {a["name"] for a in annotations} == {"contextual_precision"}
    by_span = {a["span_id"]: a["result"]["score"] for a in annotations}
    assert by_span == pytest.approx(stored)

    # a re-run judges nothing, sends nothing again, and never duplicates an annotation
    calls = len(judge_server.requests)
    again = score_partition(config, DAY)
    assert again.rows_cached == 5 and len(judge_server.requests) == calls
    assert "write-back" not in (again.error_message or "")
    assert len(_span_annotations(phoenix, project, span_ids)) == 5
    node = phoenix.graphql(METRICS, id=gids[span_ids[0]])["node"]
    assert len(node["documentEvaluations"]) == len(cases[0][1])


def test_a_write_back_to_a_stopped_server_is_reported_and_sent_by_the_next_run(tmp_path, phoenix, judge_server):
    project = f"rag-{uuid.uuid4().hex[:8]}"
    span_ids = phoenix.send(project, DAY, _cases(3))
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    staged = _config(url, phoenix, judge_server, project)
    score_partition(staged, DAY)  # the spans are in the warehouse now; no write-back yet
    # the next run scores the staged table (explicitly) and writes back while Phoenix is down
    config = _config(
        url, phoenix, judge_server, project, source_table=staging_table(project), source_format="openinference"
    )
    config.write_back = "phoenix"
    phoenix.stop()
    try:
        down = score_partition(config, DAY)
    finally:
        phoenix.start()
    assert down.status == "succeeded" and down.rows_scored == 3  # scoring never waits for the sink
    assert "3 failed and will be sent again by the next run" in (down.error_message or "")
    engine = sa.create_engine(url)
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT status, count(*) FROM ctxprec_writebacks GROUP BY status")).all() == [
            ("failed", 3)
        ]
    assert _span_annotations(phoenix, project, span_ids) == []

    back = score_partition(config, DAY)
    assert f"write-back to phoenix:{phoenix.url}/{project}: 3 span(s) annotated" in (back.error_message or "")
    assert len(_span_annotations(phoenix, project, span_ids)) == 3
    with engine.connect() as conn:
        assert conn.execute(sa.text("SELECT status, count(*) FROM ctxprec_writebacks GROUP BY status")).all() == [
            ("written", 3)
        ]
    engine.dispose()


def test_an_unknown_project_is_a_clear_error_before_any_judge_call(tmp_path, phoenix, judge_server):
    config = _config(f"sqlite:///{tmp_path / 'wh.db'}", phoenix, judge_server, "no-such-project")
    with pytest.raises(PhoenixError, match="has no project 'no-such-project'"):
        score_partition(config, DAY)
    assert judge_server.requests == []


def test_staging_tables_keep_projects_apart():
    assert staging_table("rag") == "phoenix_rag"
    assert staging_table("rag-app") != staging_table("rag_app")
    assert staging_table("Rag App").startswith("phoenix_rag_app_")
    with pytest.raises(ValueError, match="http"):
        PhoenixTarget("localhost:6006")


def test_the_cli_reads_phoenix_and_writes_back(tmp_path, phoenix, judge_server, monkeypatch, capsys):
    """``ctxprec score --phoenix URL --phoenix-project NAME --write-back`` (DESIGN's flags)."""
    from ctxprec_ops.cli import main

    project = f"rag-{uuid.uuid4().hex[:8]}"
    span_ids = phoenix.send(project, DAY, _cases(4))
    monkeypatch.setenv("OPENAI_API_KEY", "k")
    monkeypatch.setenv("OPENAI_BASE_URL", judge_server.base_url)
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    sa.create_engine(url).connect().close()  # the warehouse file the run writes to
    args = ["score", "--warehouse", url, "--partition", DAY, "--judge", "gpt-4o-mini"]
    code = main([*args, "--phoenix", phoenix.url, "--phoenix-project", project, "--write-back"])
    printed = capsys.readouterr()
    assert code == 0, printed.err
    assert "4 span(s) annotated" in printed.out
    assert len(_span_annotations(phoenix, project, span_ids)) == 4


def test_a_dagster_materialization_reads_phoenix_and_writes_back(tmp_path, phoenix, judge_server):
    """The scores asset with the warehouse resource's Phoenix fields: read, scored, written back."""
    from dagster import DagsterInstance, materialize

    from ctxprec_ops.dagster.resources import AlertThresholdsResource, JudgeResource, WarehouseResource
    from dagster_defs.definitions import scores_assets

    project = f"rag-{uuid.uuid4().hex[:8]}"
    span_ids = phoenix.send(project, DAY, _cases(3))
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    sa.create_engine(url).connect().close()
    resources = {
        "warehouse": WarehouseResource(url=url, phoenix_url=phoenix.url, phoenix_project=project, write_back="phoenix"),
        "judge": JudgeResource(model="gpt-4o-mini", base_url=judge_server.base_url, api_key="k", max_retries=1),
        "thresholds": AlertThresholdsResource(),
    }
    instance = DagsterInstance.ephemeral()
    try:
        asset = scores_assets["contextual_precision"]
        result = materialize([asset], instance=instance, partition_key=DAY, resources=resources, raise_on_error=False)
    finally:
        instance.dispose()
    assert result.success
    (mat,) = result.asset_materializations_for_node("contextual_precision_scores")
    assert mat.metadata["rows_scored"].value == 3
    assert len(_span_annotations(phoenix, project, span_ids)) == 3
