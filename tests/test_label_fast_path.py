"""The label metric's chunk path (``compute_row``, verdicts written as ready JSON text) stores
exactly what the metric API computes, on SQLite and PostgreSQL; ``JSONText`` is stored as the
JSON it holds by every write path; SQLite's canonical-time shortcut reads as the general
expression does."""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from ctxprec_ops.json_text import JSONText, plain_ids, plain_verdicts_template, verdicts_json
from ctxprec_ops.metrics import label_precision
from ctxprec_ops.metrics.label_precision import LabelContextualPrecisionMetric, LabelledRetrieval
from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.pipeline.label_rows import row_to_labelled
from ctxprec_ops.warehouse.dialects.sqlite.time import sqlite_instant, sqlite_instant_general
from ctxprec_ops.warehouse.schema import output_tables
from ctxprec_ops.warehouse.upsert import upsert
from tests.fixtures.warehouse_data import query

DAY = "2026-11-28"


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.text(max_size=30), st.booleans()), max_size=12))
def test_verdicts_json_is_what_json_dumps_writes(items) -> None:
    reasons = [r for r, _ in items]
    flags = [f for _, f in items]
    want = json.dumps([{"node": k, "relevant": f, "reason": r} for k, (r, f) in enumerate(items, start=1)])
    assert verdicts_json(reasons, flags) == want


_PLAIN = st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E, exclude_characters='"\\'), max_size=30)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(_PLAIN, st.booleans()), max_size=12))
def test_plain_template_is_what_json_dumps_writes(items) -> None:
    reasons = [r for r, _ in items]
    flags = [f for _, f in items]
    assert plain_ids(reasons)
    want = json.dumps([{"node": k, "relevant": f, "reason": r} for k, (r, f) in enumerate(items, start=1)])
    assert plain_verdicts_template(flags) % tuple(reasons) == want == verdicts_json(reasons, flags)


@pytest.mark.parametrize("odd", ['a"b', "a\\b", "é", "tab\there", "del\x7f", "nl\n"])
def test_ids_json_would_escape_are_not_plain(odd) -> None:
    assert not plain_ids(["doc-1", odd]) and plain_ids(["doc-1", "a b/c%s{}"])


_IDS = st.lists(
    st.sampled_from(["a", "b", "c", "d", "e", "f", 'q"t', "é", "100%"]), unique=True, min_size=1, max_size=6
)


@settings(max_examples=300, deadline=None)
@given(
    cases=st.lists(
        st.tuples(_IDS, st.lists(st.sampled_from(["a", "b", "c", "x", "é", 'q"t']), max_size=4)), max_size=25
    ),
    threshold=st.sampled_from([0.0, 0.5, 0.7, 1.0]),
    strict=st.booleans(),
)
def test_compute_row_is_compute_for_every_case_of_a_run(cases, threshold, strict) -> None:
    """One metric instance over many cases (patterns repeat and are taken from its memo): every
    row holds what ``compute`` gives that case."""
    metric = LabelContextualPrecisionMetric(threshold=threshold, strict_mode=strict)
    for i, (retrieved, relevant) in enumerate(cases):
        case = LabelledRetrieval(retrieved_ids=retrieved, relevant_ids=relevant, id=str(i))
        want = metric.compute(case)
        row = metric.compute_row(case)
        assert (row.score, row.success, row.reason, dict(row.figures or {})) == (
            want.score, want.success, want.reason, want.figures
        )  # fmt: skip
        assert json.loads(row.verdicts) == [v.model_dump() for v in want.verdicts]
        assert row.verdicts == json.dumps([v.model_dump() for v in want.verdicts])


def test_compute_row_follows_settings_changed_after_use(monkeypatch) -> None:
    monkeypatch.setattr(label_precision, "PATTERN_MEMO_SIZE", 2)
    metric = LabelContextualPrecisionMetric(threshold=0.9)
    case = LabelledRetrieval(retrieved_ids=["x", "a"], relevant_ids=["a"])  # precision 0.5
    assert metric.compute_row(case).success is False
    metric.threshold = 0.4
    assert metric.compute_row(case).success is True
    metric.strict_mode = True
    row = metric.compute_row(case)
    assert row.score == 0.0 and "strict mode" in row.reason
    for k in range(1, 6):  # more patterns than the memo holds: it starts over, results unchanged
        other = LabelledRetrieval(retrieved_ids=[str(i) for i in range(k)], relevant_ids=["0"])
        assert metric.compute_row(other).score == metric.compute(other).score
    assert len(metric._patterns) <= 2
    with pytest.raises(TypeError):
        metric.compute_row(case).figures["k"] = 0  # type: ignore[index]  # shared between rows: read-only


ROWS = [
    (1, '["a", "b", "c"]', '["c", "x"]'),
    (2, '["d\\"q", "\\u00e9t\\u00e9", "f"]', '["\\u00e9t\\u00e9"]'),
    (3, "[7, 8, 9]", "[]"),
    (4, '[" a ", "b\\n"]', '["b\\n", " a "]'),
]


def _table(url: str) -> None:
    engine = sa.create_engine(url)
    md = sa.MetaData()
    t = sa.Table(
        "retrieval_logs",
        md,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("event_time", sa.Text),
        sa.Column("retrieved_ids", sa.Text),
        sa.Column("relevant_ids", sa.Text),
    )
    md.create_all(engine)
    with engine.begin() as conn:
        conn.execute(
            sa.insert(t),
            [{"id": i, "event_time": f"{DAY} 10:00:0{i}", "retrieved_ids": r, "relevant_ids": g} for i, r, g in ROWS],
        )
    engine.dispose()


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_pipeline_rows_equal_the_metric_api(backend, tmp_path, request) -> None:
    url = request.getfixturevalue("pg_url") if backend == "postgresql" else f"sqlite:///{tmp_path / 'wh.db'}"
    _table(url)
    summary = score_partition(PipelineConfig(warehouse=url, metric="label_contextual_precision", chunk_size=3), DAY)
    assert summary.rows_scored == len(ROWS) and summary.rows_failed == 0
    metric = LabelContextualPrecisionMetric()
    stored = {
        r[0]: r[1:]
        for r in query(url, "SELECT log_id, score, success, reason, verdicts, threshold FROM ctxprec_scores")
    }
    for i, r, g in ROWS:
        want = metric.compute(row_to_labelled({"id": i, "retrieved_ids": r, "relevant_ids": g}))
        score, success, reason, verdicts, threshold = stored[str(i)]
        assert (score, bool(success), reason, threshold) == (want.score, want.success, want.reason, 0.5)
        verdicts = json.loads(verdicts) if isinstance(verdicts, str) else verdicts
        assert verdicts == [v.model_dump() for v in want.verdicts]


@pytest.mark.parametrize("native", [True, False])
def test_json_text_is_stored_as_the_json_it_holds(native, tmp_path) -> None:
    """SQLite's executemany passes it through; the generic path (``native=False``) decodes it;
    both store what a list of dicts stores."""
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'o.db'}")
    t = output_tables(None)
    t.metadata.create_all(engine)
    verdicts = [{"node": 1, "relevant": True, "reason": 'é "x"'}]

    def row(log_id: str, v) -> dict:
        return {
            "log_id": log_id, "partition_key": DAY, "metric": "m", "source_table": "s", "mapping": "default", "score": 1.0,
            "success": True, "threshold": 0.5, "verdicts": v, "reason": "r", "judge_model": "j",
            "prompt_version": "p", "run_id": "run", "scored_at": datetime(2026, 11, 28, tzinfo=UTC),
        }  # fmt: skip

    rows = [row("1", JSONText(json.dumps(verdicts))), row("2", verdicts)]
    with engine.begin() as conn:
        upsert(conn, t.scores, rows, native=native)
    got = dict(query(f"sqlite:///{tmp_path / 'o.db'}", "SELECT log_id, verdicts FROM ctxprec_scores"))
    assert got["1"] == got["2"] and json.loads(got["1"]) == verdicts


@pytest.mark.parametrize(
    "value",
    [
        "2026-11-28 09:15:02",
        "2026-11-28T09:15:02",
        "2026-02-30 10:00:00",  # day overflow: whatever datetime() makes of it, both agree
        "2026-11-28 24:00:00",
        "2026-13-01 00:00:00",
        "9999-99-99 99:99:99",
        "2026-11-28 09:15:02.5",
        " 2026-11-28 09:15:02",
        "2026-11-28 09:15:02Z",
        "1764320102",
    ],
)
def test_sqlite_canonical_shortcut_reads_as_the_general_expression(value) -> None:
    engine = sa.create_engine("sqlite://")
    col = sa.column("v", sa.Text)
    with engine.connect() as conn:
        source = sa.text(f"(SELECT {value!r} AS v)")
        fast = conn.execute(sa.select(sqlite_instant(col)).select_from(source)).scalar()
        general = conn.execute(sa.select(sqlite_instant_general(col)).select_from(source)).scalar()
    assert fast == general


def test_a_metric_with_a_filled_memo_pickles_and_copies() -> None:
    import copy
    import pickle

    metric = LabelContextualPrecisionMetric(threshold=0.4)
    case = LabelledRetrieval(retrieved_ids=["x", "a"], relevant_ids=["a"])
    want = metric.compute_row(case)
    for other in (pickle.loads(pickle.dumps(metric)), copy.deepcopy(metric)):
        assert other.threshold == 0.4 and other._patterns == {}
        assert other.compute_row(case) == want
    assert len(metric._patterns) == 1  # the original keeps its memo
