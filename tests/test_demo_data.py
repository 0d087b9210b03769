"""The demo's sample warehouse: shape, determinism, malformed rows, and a visible quality dip."""

from __future__ import annotations

import json
import statistics
from collections import defaultdict

import pytest
import sqlalchemy as sa

from ctxprec_ops.demo.sample import MALFORMED_CONVERSATION_KINDS, MALFORMED_KINDS, create_sample_warehouse, passage_ids
from ctxprec_ops.judge.models.lexical import LexicalJudge
from ctxprec_ops.scoring.formula import contextual_precision


def _rows(url: str, table: str) -> list[tuple]:
    engine = sa.create_engine(url)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sa.text(f"SELECT * FROM {table} ORDER BY id"))]
    finally:
        engine.dispose()


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    path = tmp_path_factory.mktemp("demo") / "sample.db"
    url = f"sqlite:///{path}"
    info = create_sample_warehouse(url, days=10, rows_per_day=(120, 160), seed=7, end_date="2026-11-28")
    return url, info


def test_shape_partitions_and_counts(sample):
    url, info = sample
    assert info.partitions[0] == "2026-11-19" and info.partitions[-1] == "2026-11-28"
    assert len(info.partitions) == 10
    rows = _rows(url, "retrieval_logs")
    assert len(rows) == info.total_retrievals
    per_day: dict[str, int] = defaultdict(int)
    for _id, event_time, *_ in rows:
        per_day[str(event_time)[:10]] += 1
    assert dict(per_day) == info.retrieval_rows
    assert all(120 <= n <= 160 for n in per_day.values())
    convs = _rows(url, "conversation_logs")
    assert len(convs) == info.total_conversations
    assert all(20 <= n <= 40 for n in info.conversation_rows.values())


def test_nodes_and_times_are_realistic(sample):
    url, info = sample
    rows = _rows(url, "retrieval_logs")
    bad = {i for ids in info.malformed.values() for i in ids}
    sizes = [len(json.loads(r[5])) for r in rows if r[0] not in bad]
    assert min(sizes) >= 3 and max(sizes) >= 8
    times = [str(r[1]) for r in rows]
    assert any(t[11:16] == "23:59" for t in times) and any(t[11:16] == "00:00" for t in times)
    for _id, _t, _input, _actual, expected, context, retrieved_ids, relevant_ids in rows:
        if _id not in bad:
            assert expected and all(isinstance(n, str) and n for n in json.loads(context))
            # gold labels: one stable id per retrieved passage, and the ids of the answer's support
            assert [passage_ids()[n] for n in json.loads(context)] == json.loads(retrieved_ids)
            assert json.loads(relevant_ids) and all(i.split("-")[-1].startswith("s") for i in json.loads(relevant_ids))


def test_every_malformed_kind_is_present_and_really_bad(sample):
    url, info = sample
    assert set(info.malformed) == set(MALFORMED_KINDS)
    assert all(info.malformed[k] for k in MALFORMED_KINDS)
    assert all(info.malformed_conversations[k] for k in MALFORMED_CONVERSATION_KINDS)
    by_id = {r[0]: r for r in _rows(url, "retrieval_logs")}
    assert all(by_id[i][5] is None for i in info.malformed["null_context"])
    for i in info.malformed["non_json_context"]:
        with pytest.raises(json.JSONDecodeError):
            json.loads(by_id[i][5])
    assert all(json.loads(by_id[i][5]) == [] for i in info.malformed["empty_context"])
    assert all(any(not isinstance(n, str) for n in json.loads(by_id[i][5])) for i in info.malformed["non_string_node"])
    assert all(by_id[i][4] == "" for i in info.malformed["empty_expected_output"])
    total_bad = sum(len(v) for v in info.malformed.values())
    assert total_bad < 0.03 * info.total_retrievals  # "a few"


def test_conversations_have_units_with_retrieval(sample):
    url, info = sample
    bad = {i for ids in info.malformed_conversations.values() for i in ids}
    for _id, _t, turns_text, outcome in _rows(url, "conversation_logs"):
        if _id in bad:
            continue
        turns = json.loads(turns_text)
        users = [t for t in turns if t["role"] == "user"]
        assert 2 <= len(users) <= 4 and outcome
        assert any(t["retrieval_context"] for t in turns if t["role"] == "assistant")


def test_deterministic_for_a_seed(tmp_path):
    a, b, c = (f"sqlite:///{tmp_path / n}.db" for n in "abc")
    kw = dict(days=3, rows_per_day=(30, 50), end_date="2026-01-10")
    ia = create_sample_warehouse(a, seed=11, **kw)
    ib = create_sample_warehouse(b, seed=11, **kw)
    ic = create_sample_warehouse(c, seed=12, **kw)
    assert _rows(a, "retrieval_logs") == _rows(b, "retrieval_logs")
    assert _rows(a, "conversation_logs") == _rows(b, "conversation_logs")
    assert ia.retrieval_rows == ib.retrieval_rows
    assert _rows(a, "retrieval_logs") != _rows(c, "retrieval_logs")
    # recreating over an existing warehouse replaces the tables instead of appending
    create_sample_warehouse(a, seed=12, **kw)
    assert _rows(a, "retrieval_logs") == _rows(c, "retrieval_logs")
    assert ic.partitions == ["2026-01-08", "2026-01-09", "2026-01-10"]


def test_lexical_judge_sees_the_dip(sample):
    url, info = sample
    judge = LexicalJudge()
    bad = {i for ids in info.malformed.values() for i in ids}
    scores: dict[str, list[float]] = defaultdict(list)
    for _id, t, question, _a, expected, context, *_labels in _rows(url, "retrieval_logs"):
        if _id in bad:
            continue
        relevance = [judge.judge_node(question, expected, n)[0] for n in json.loads(context)]
        scores[str(t)[:10]].append(contextual_precision(relevance))
    means = {d: statistics.mean(v) for d, v in scores.items()}
    assert 2 <= len(info.dip_days) <= 3
    normal = [m for d, m in means.items() if d not in info.dip_days]
    dip = [means[d] for d in info.dip_days]
    assert max(dip) < min(normal) - 0.1
    assert min(normal) > 0.55  # a sane retriever most days
