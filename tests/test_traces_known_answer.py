"""Known answer: the same cases as a flat retrieval-log table and as spans give identical scores,
verdicts and judge spend — for both conventions, every way of giving the reference, the OpenAI
judge on the local server and the offline lexical judge."""

from __future__ import annotations

import json
from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa

from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import create_logs, log_row
from tests.helpers import traces as T

DAY = "2026-11-28"
TOPICS = ["solar panels", "tax returns", "sourdough bread", "bicycle brakes", "tide tables", "jazz chords"]


def cases() -> list[T.Case]:
    out = []
    for n in range(12):
        topic = TOPICS[n % len(TOPICS)]
        docs = [
            f"{topic} guide part {n}: how {topic} work. RELEVANT",
            f"Unrelated memo {n} about parking. IRRELEVANT",
            f"More on {topic}, section {n}. RELEVANT",
            f"Cafeteria menu {n}. IRRELEVANT",
        ]
        order = [(0, 1, 2, 3), (1, 0, 3, 2), (3, 2, 1, 0), (1, 3, 0, 2)][n % 4]
        out.append((f"How do {topic} work (case {n})?", [docs[i] for i in order][: 2 + n % 3], f"{topic} work well."))
    return out


GOLD = {q: f"A short explanation of how {q.split('How do ')[1].split(' work')[0]} work." for q, _d, _a in cases()}


def flat_warehouse(path, reference: str) -> str:
    url = f"sqlite:///{path}"
    rows = []
    for n, (q, docs, answer) in enumerate(cases()):
        expected = answer if reference == "answer" else GOLD[q]
        ts = datetime(2026, 11, 28, 9) + timedelta(minutes=n)
        rows.append(log_row(n, ts, input=q, expected=expected, context=list(docs), actual=answer))
    create_logs(get_engine(url), rows)
    return url


def span_warehouse(path, convention: str, reference: str, monkeypatch) -> tuple[str, dict]:
    url = f"sqlite:///{path}"
    engine = get_engine(url)
    data = cases()
    if convention == "otel-genai":
        spans = T.genai_spans(data, monkeypatch=monkeypatch)
    else:
        expected = [GOLD[q] for q, _d, _a in data] if reference == "attribute" else None
        spans = T.openinference_manual_spans(data, expected=expected)
    T.write_spans(engine, T.span_rows(spans, DAY))
    extra: dict = {}
    if reference == "gold":
        with engine.begin() as conn:
            conn.exec_driver_sql("CREATE TABLE gold (input TEXT, expected_output TEXT)")
            conn.execute(sa.text("INSERT INTO gold VALUES (:q, :e)"), [{"q": q, "e": e} for q, e in GOLD.items()])
        extra["gold_table"] = "gold"
    elif reference == "attribute":
        extra["expected_attribute"] = "eval.expected_output"
    return url, extra


def by_case(url: str, spans: bool) -> dict[int, dict]:
    """Score rows by case number (flat: the row id; spans: the case number in document ids)."""
    out = {}
    with get_engine(url).connect() as conn:
        for r in conn.execute(sa.text("SELECT * FROM ctxprec_scores")).mappings():
            n = int(json.loads(r["documents"])[0]["id"].split("-")[1]) if spans else int(r["log_id"])
            out[n] = {
                "score": r["score"],
                "success": bool(r["success"]),
                "verdicts": json.loads(r["verdicts"]),
                "reason": r["reason"],
                "prompt_tokens": r["prompt_tokens"],
                "judge_calls": r["judge_calls"],
            }
    return out


@pytest.mark.parametrize(
    "convention,reference",
    [("openinference", "answer"), ("openinference", "gold"), ("openinference", "attribute"), ("otel-genai", "answer")],
)
@pytest.mark.parametrize("judge", ["server", "lexical"])
def test_flat_table_and_spans_give_identical_scores(judge_server, tmp_path, monkeypatch, convention, reference, judge):
    if judge == "server":
        common = dict(judge="gpt-4o-mini", judge_base_url=judge_server.base_url, judge_api_key="k")
    else:
        common = dict(judge="lexical")
    flat_url = flat_warehouse(tmp_path / "flat.db", "answer" if reference == "answer" else "gold")
    flat = score_partition(PipelineConfig(warehouse=flat_url, chunk_size=5, **common), DAY)
    span_url, extra = span_warehouse(tmp_path / "spans.db", convention, reference, monkeypatch)
    spans = score_partition(
        PipelineConfig(warehouse=span_url, source_format=convention, chunk_size=5, **common, **extra), DAY
    )
    assert flat.rows_scored == spans.rows_scored == 12 and spans.rows_failed == 0
    want, got = by_case(flat_url, spans=False), by_case(span_url, spans=True)
    assert got == want
    assert [spans.mean_score, spans.pass_rate, spans.judge_calls, spans.prompt_tokens] == [
        flat.mean_score,
        flat.pass_rate,
        flat.judge_calls,
        flat.prompt_tokens,
    ]
    assert len({v["score"] for v in want.values()}) > 2  # the cases do not all score alike
