"""Conversation tables scored with the turn metric, through the same pipeline."""

from __future__ import annotations

import json
from datetime import datetime

import pytest
import sqlalchemy as sa

from ctxprec_ops.pipeline import ConversationColumns, PipelineConfig, score_partition
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import CountingJudge, conversation_table, count, ids_in

DAY = "2026-11-28"
OUTCOME = "The user learns that Paris is the capital of France and that the Louvre is in Paris."


def convo(rid: int, day: int = 28, **over) -> dict:
    turns = [
        {"role": "user", "content": "What is the capital of France?"},
        {
            "role": "assistant",
            "content": "Paris.",
            "retrieval_context": [f"Berlin is the capital of Germany (doc {rid}).", "Paris is the capital of France."],
        },
        {"role": "user", "content": "Which museum is there?"},
        {
            "role": "assistant",
            "content": "The Louvre.",
            "retrieval_context": ["The Louvre museum is in Paris, France.", f"Unrelated note {rid}."],
        },
    ]
    row = {"id": rid, "event_time": datetime(2026, 11, day, 12), "turns": turns, "expected_outcome": OUTCOME}
    row.update(over)
    return row


def make(engine, rows, name="conversation_logs", turns_type=sa.JSON):
    md = sa.MetaData()
    t = conversation_table(md, name, turns_type=turns_type)
    md.create_all(engine)
    if turns_type is sa.Text:  # JSON text in a TEXT column
        rows = [dict(r, turns=r["turns"] if isinstance(r["turns"], str) else json.dumps(r["turns"])) for r in rows]
    with engine.begin() as conn:
        conn.execute(sa.insert(t), rows)


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_conversations_scored_cached_and_bad_rows_recorded(backend, tmp_path, request):
    url = f"sqlite:///{tmp_path / 'wh.db'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    engine = get_engine(url)
    good = [convo(i) for i in range(1, 6)]
    bad = [
        convo(50, turns="not json"),
        convo(51, turns=[{"role": "system", "content": "x"}]),
        convo(52, expected_outcome=""),
        convo(53, turns=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]),
    ]
    repeat = [convo(i, day=29) for i in range(1, 3)]  # the same conversations the next day, same ids+100
    for r in repeat:
        r["id"] += 100
    make(engine, good + bad + repeat, turns_type=sa.Text if backend == "sqlite" else sa.JSON)

    judge = CountingJudge()
    cfg = PipelineConfig(warehouse=url, metric="turn_contextual_precision", judge=judge, chunk_size=3, window_size=2)
    summary = score_partition(cfg, DAY)
    assert summary.metric == "turn_contextual_precision"
    assert (summary.rows_scored, summary.rows_failed) == (5, 4)
    assert judge.calls == 5 * 2  # two windows with context per conversation
    with engine.connect() as conn:
        fails = dict(conn.exec_driver_sql("SELECT log_id, error_type FROM ctxprec_failures").all())
        msgs = dict(conn.exec_driver_sql("SELECT log_id, error_message FROM ctxprec_failures").all())
        metric = conn.exec_driver_sql("SELECT DISTINCT metric FROM ctxprec_scores").scalar_one()
    assert metric == "turn_contextual_precision"
    assert fails == {"50": "invalid_input", "51": "invalid_input", "52": "invalid_input", "53": "not_scorable"}
    assert "turns" in msgs["50"] and "JSON" in msgs["50"]
    assert "role" in msgs["51"] and "expected_outcome" in msgs["52"]
    assert summary.failures_by_type == {"invalid_input": 3, "not_scorable": 1}
    assert summary.completed  # only data problems

    cached = CountingJudge()
    nxt = score_partition(
        PipelineConfig(warehouse=url, metric="turn_contextual_precision", judge=cached, window_size=2), "2026-11-29"
    )
    assert cached.calls == 0 and nxt.rows_scored == 2 and nxt.rows_cached == 2
    assert ids_in(engine, "ctxprec_scores") == sorted(["1", "2", "3", "4", "5", "101", "102"])
    assert count(engine, "ctxprec_failures") == 4


def test_configured_conversation_columns(tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE TABLE chats (chat_id INTEGER PRIMARY KEY, ts TEXT, messages TEXT, goal TEXT)")
        conn.execute(
            sa.text("INSERT INTO chats VALUES (1, '2026-11-28T08:00:00Z', :m, :g)"),
            {"m": json.dumps(convo(1)["turns"]), "g": OUTCOME},
        )
    cols = ConversationColumns(id="chat_id", event_time="ts", turns="messages", expected_outcome="goal")
    summary = score_partition(
        PipelineConfig(warehouse=url, metric="turn_contextual_precision", source_table="chats", columns=cols), DAY
    )
    assert summary.rows_scored == 1 and 0.0 <= summary.mean_score <= 1.0
