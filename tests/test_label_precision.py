"""Label contextual precision: exact figures against hand-computed cases, and the metric kind
through the pipeline on SQLite and PostgreSQL (no judge built, judge model ``labels``), trended
and checked like the judged metrics."""

from __future__ import annotations

import json
import math
from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa

from ctxprec_ops.cli import main as ctxprec
from ctxprec_ops.errors import InvalidTestCaseError
from ctxprec_ops.metrics.label_precision import LabelContextualPrecisionMetric, LabelledRetrieval
from ctxprec_ops.pipeline import METRIC_KINDS, PipelineConfig, score_partition
from ctxprec_ops.pipeline.label_rows import row_to_labelled
from ctxprec_ops.scoring.formula import contextual_precision
from ctxprec_ops.scoring.ranking import ranking_figures
from tests.fixtures.warehouse_data import query

LABELS = "label_contextual_precision"
DAY = "2026-11-28"
L2, L3, L4 = math.log2(2), math.log2(3), math.log2(4)


# -- the math, by hand ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    "relevance, total, precision, recall, rr, ndcg",
    [
        # r = 1 0 1, 3 relevant exist: P = (1/1 + 2/3) / 2; DCG = 1 + 1/log2 4; IDCG = 1 + 1/log2 3 + 1/log2 4
        ([1, 0, 1], 3, (1 + 2 / 3) / 2, 2 / 3, 1.0, (1 + 1 / L4) / (1 + 1 / L3 + 1 / L4)),
        # r = 0 0 1, 1 relevant: P = (1/3) / 1; DCG = 1/log2 4 = 0.5; IDCG = 1
        ([0, 0, 1], 1, 1 / 3, 1.0, 1 / 3, 0.5),
        # r = 0 1 1 0, 2 relevant: P = (1/2 + 2/3) / 2; DCG = 1/log2 3 + 1/log2 4; IDCG = 1 + 1/log2 3
        ([0, 1, 1, 0], 2, (1 / 2 + 2 / 3) / 2, 1.0, 0.5, (1 / L3 + 1 / L4) / (1 + 1 / L3)),
        # perfect: exactly 1.0 everywhere (no epsilon)
        ([1, 1, 0], 2, 1.0, 1.0, 1.0, 1.0),
        # nothing relevant retrieved, 2 exist: all zero
        ([0, 0], 2, 0.0, 0.0, 0.0, 0.0),
        # 5 relevant exist but only 2 slots: the ideal ranking fills both (NDCG@2 = 1), recall 2/5
        ([1, 1], 5, 1.0, 2 / 5, 1.0, 1.0),
    ],
)
def test_figures_match_hand_computation(relevance, total, precision, recall, rr, ndcg) -> None:
    f = ranking_figures([bool(r) for r in relevance], total)
    assert f.precision == pytest.approx(precision, abs=1e-15)
    assert f.precision == contextual_precision([bool(r) for r in relevance])  # the same formula, bit for bit
    assert f.recall == pytest.approx(recall, abs=1e-15)
    assert f.reciprocal_rank == pytest.approx(rr, abs=1e-15)
    assert f.ndcg == pytest.approx(ndcg, abs=1e-15)
    assert f.k == len(relevance)


def test_unknown_or_zero_relevant_total_leaves_recall_and_ndcg_undefined() -> None:
    for total in (None, 0):
        f = ranking_figures([False, False], total)
        assert (f.precision, f.recall, f.ndcg, f.reciprocal_rank) == (0.0, None, None, 0.0)
    with pytest.raises(ValueError, match="smaller than"):
        ranking_figures([True, True], 1)


def test_metric_api_needs_no_judge() -> None:
    m = LabelContextualPrecisionMetric(threshold=0.8)
    case = LabelledRetrieval(retrieved_ids=["d3", "d1", 7], relevant_ids=["d1", "7", "d9"], id="q1")
    # r = 0 1 1: P = (1/2 + 2/3) / 2 = 7/12
    assert m.measure(case) == pytest.approx(7 / 12)
    assert m.success is False and m.error is None
    assert [(v.node, v.relevant, v.reason) for v in m.verdicts] == [(1, False, "d3"), (2, True, "d1"), (3, True, "7")]
    assert m.figures is not None and m.figures.recall == pytest.approx(2 / 3)
    assert "recall 2/3" in (m.reason or "")
    assert m.evaluation_model == "labels" and m.evaluation_cost == 0.0
    strict = LabelContextualPrecisionMetric(strict_mode=True)
    assert strict.measure(case) == 0.0 and strict.threshold == 1.0


@pytest.mark.parametrize(
    "row, message",
    [
        ({"retrieved_ids": None, "relevant_ids": "[]"}, "column 'retrieved_ids' is NULL"),
        ({"retrieved_ids": "[1,", "relevant_ids": "[]"}, "column 'retrieved_ids' is not valid JSON"),
        ({"retrieved_ids": '{"a": 1}', "relevant_ids": "[]"}, "must be a JSON array of ids"),
        ({"retrieved_ids": "[]", "relevant_ids": "[]"}, "'retrieved_ids' is empty"),
        ({"retrieved_ids": '["a", 1.5]', "relevant_ids": "[]"}, r"retrieved_ids\[1\] must be a string or an integer"),
        ({"retrieved_ids": '["a", "a"]', "relevant_ids": "[]"}, "lists 'a' more than once"),
        ({"retrieved_ids": '["a"]', "relevant_ids": None}, "column 'relevant_ids' is NULL"),
        ({"retrieved_ids": json.dumps(["a", "x" * 1001]), "relevant_ids": "[]"}, r"retrieved_ids\[1\] is too long"),
        ({"retrieved_ids": '["a"]', "relevant_ids": json.dumps(["y" * 1001])}, r"relevant_ids\[0\] is too long"),
    ],
)
def test_bad_rows_fail_with_the_column_named(row, message) -> None:
    with pytest.raises(InvalidTestCaseError, match=message):
        row_to_labelled({"id": 1, **row})


def test_an_id_is_too_long_by_its_decoded_length_not_its_json_text() -> None:
    """1,000 characters is the limit of an id, not of its JSON text (an escape is 6 characters)."""
    escaped = '["' + "\\u00e9" * 1000 + '"]'  # 6,004 characters of JSON text, one id of 1,000
    assert len(escaped) == 6004
    case = row_to_labelled({"id": 1, "retrieved_ids": json.dumps(["x" * 1000, "b"]), "relevant_ids": escaped})
    assert case.retrieved_ids == ["x" * 1000, "b"] and case.relevant_ids == ["\u00e9" * 1000]
    with pytest.raises(InvalidTestCaseError, match=r"relevant_ids\[0\] is too long for an id \(1,001"):
        row_to_labelled({"id": 1, "retrieved_ids": '["a"]', "relevant_ids": '["' + "\\u00e9" * 1001 + '"]'})


def test_the_label_kind_is_in_the_registry_once() -> None:
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent
    hits = []
    for path in [
        *root.joinpath("ctxprec_ops").rglob("*.py"),
        *root.joinpath("dagster_defs").rglob("*.py"),
        *root.joinpath("dags").rglob("*.py"),
    ]:
        text = path.read_text(encoding="utf-8")
        hits += [path.name] * (text.count(f'"{LABELS}"') + text.count(f"'{LABELS}'"))
    assert hits == ["names.py"]  # metrics/names.py: the one place metric names are written
    kind = METRIC_KINDS[LABELS]
    assert kind.needs_judge is False and kind.default_table == "retrieval_logs"


# -- through the pipeline -------------------------------------------------------------------------
#: (id, retrieved, relevant, expected score, recall, rr, ndcg) — hand-computed as above
CASES = [
    (1, ["a", "b", "c"], ["a", "c", "z"], (1 + 2 / 3) / 2, 2 / 3, 1.0, (1 + 1 / L4) / (1 + 1 / L3 + 1 / L4)),
    (2, ["x", "y", "z"], ["z"], 1 / 3, 1.0, 1 / 3, 0.5),
    (3, ["p", "q"], [], 0.0, None, 0.0, None),
    (4, ["m", "n"], ["m", "n"], 1.0, 1.0, 1.0, 1.0),
]
BAD = [(5, '["a", "a"]', "[]"), (6, None, '["a"]')]


def _labelled_table(url: str, *, json_type: bool, bad: bool = True) -> None:
    """``rag_events`` with renamed label columns (exercises the column mapping)."""
    engine = sa.create_engine(url)
    md = sa.MetaData()
    col = sa.JSON if json_type else sa.Text
    t = sa.Table(
        "rag_events",
        md,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("event_time", sa.DateTime),
        sa.Column("chunks", col),
        sa.Column("gold_chunks", col),
    )
    md.create_all(engine)
    base = datetime(2026, 11, 28, 9)
    enc = (lambda v: v) if json_type else (lambda v: None if v is None else json.dumps(v))
    rows = [
        {"id": i, "event_time": base + timedelta(minutes=i), "chunks": enc(r), "gold_chunks": enc(g)}
        for i, r, g, *_ in CASES
    ]
    rows += [
        {
            "id": i,
            "event_time": base + timedelta(minutes=i),
            "chunks": r if not json_type or r is None else json.loads(r),
            "gold_chunks": g if not json_type or g is None else json.loads(g),
        }
        for i, r, g in BAD
        if bad
    ]
    with engine.begin() as conn:
        conn.execute(sa.insert(t), rows)
    engine.dispose()


def _check_scored(url: str, bad: bool = True) -> None:
    got = {
        r[0]: r[1:]
        for r in query(
            url,
            "SELECT log_id, score, judge_model, prompt_tokens, cost, verdicts "
            "FROM ctxprec_scores WHERE metric = 'label_contextual_precision'",
        )
    }
    assert set(got) == {str(c[0]) for c in CASES}
    for i, _, _, score, *_ in CASES:
        assert got[str(i)][0] == pytest.approx(score, abs=1e-15)
        assert got[str(i)][1:4] == ("labels", 0, 0.0)
    figs = {r[0]: r[1:] for r in query(url, "SELECT log_id, recall, reciprocal_rank, ndcg FROM ctxprec_label_figures")}
    for i, _, _, _, recall, rr, ndcg in CASES:
        assert (
            figs[str(i)] == pytest.approx((recall, rr, ndcg), abs=1e-15)
            if recall is not None
            else figs[str(i)] == (None, 0.0, None)
        )
    failures = dict(query(url, "SELECT log_id, error_type FROM ctxprec_failures"))
    assert failures == ({"5": "invalid_input", "6": "invalid_input"} if bad else {})
    assert query(url, "SELECT COUNT(*) FROM ctxprec_judgments")[0][0] == 0


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_pipeline_scores_labels_without_a_judge(backend, tmp_path, request, monkeypatch) -> None:
    url = request.getfixturevalue("pg_url") if backend == "postgresql" else f"sqlite:///{tmp_path / 'wh.db'}"
    _labelled_table(url, json_type=backend == "postgresql")
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    # an LLM judge is configured but must never be built: there is no key and no endpoint
    config = PipelineConfig(
        warehouse=url,
        metric=LABELS,
        judge="gpt-4o-mini",
        source_table="rag_events",
        columns={"retrieved_ids": "chunks", "relevant_ids": "gold_chunks"},
        chunk_size=2,
    )
    events: list = []
    summary = score_partition(config, DAY, progress=events.append)
    assert (summary.rows_total, summary.rows_scored, summary.rows_failed) == (6, 4, 2)
    done = [e.done for e in events if e.kind in ("rows_done", "chunk_done")]
    assert done == sorted(done) and done[-1] == 6  # each row counted once
    assert summary.completed and summary.judge_model == "labels" and summary.judge_calls == 0
    assert summary.mean_score == pytest.approx(sum(c[3] for c in CASES) / 4)
    _check_scored(url)
    again = score_partition(config, DAY)  # idempotent: nothing new, nothing duplicated
    assert again.rows_scored == 4 and query(url, "SELECT COUNT(*) FROM ctxprec_label_figures")[0][0] == 4


def test_cli_scores_trends_and_checks_the_label_metric(tmp_path, capsys, monkeypatch) -> None:
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    _labelled_table(url, json_type=False, bad=False)
    monkeypatch.setenv("CTXPREC_SOURCE_COLUMNS", '{"retrieved_ids": "chunks", "relevant_ids": "gold_chunks"}')
    monkeypatch.setenv("CTXPREC_JUDGE", "gpt-4o-mini")  # configured for the judged metric; no key: not needed here
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    common = ["--warehouse", url, "--metric", LABELS, "--source-table", "rag_events"]
    assert ctxprec(["score", *common, "--partition", DAY, "--quiet"]) == 0
    _check_scored(url, bad=False)
    capsys.readouterr()
    # trend and check read the scores of one source table (the configured one by default)
    assert (
        ctxprec(["trend", "--warehouse", url, "--metric", LABELS, "--source-table", "rag_events", "--days", "3"]) == 0
    )
    assert DAY in capsys.readouterr().out
    mean = sum(c[3] for c in CASES) / 4  # (5/6 + 1/3 + 0 + 1) / 4 = 0.5417
    assert (
        ctxprec(
            [
                "check",
                "--warehouse",
                url,
                "--metric",
                LABELS,
                "--source-table",
                "rag_events",
                "--partition",
                DAY,
                "--min-mean",
                "0.5",
            ]
        )
        == 0
    )
    assert (
        ctxprec(
            [
                "check",
                "--warehouse",
                url,
                "--metric",
                LABELS,
                "--source-table",
                "rag_events",
                "--partition",
                DAY,
                "--min-mean",
                f"{mean + 0.01:.4f}",
            ]
        )
        != 0
    )
