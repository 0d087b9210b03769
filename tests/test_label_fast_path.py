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

from ctxprec_ops.json_text import JSONText, verdicts_json
from ctxprec_ops.metrics.label_precision import LabelContextualPrecisionMetric
from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.warehouse.label_rows import row_to_labelled
from ctxprec_ops.warehouse.schema import output_tables
from ctxprec_ops.warehouse.source import sqlite_instant, sqlite_instant_general
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
            "log_id": log_id, "partition_key": DAY, "metric": "m", "source_table": "s", "score": 1.0,
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
