"""Segment values as the source says them now, shown so no two look alike, named as the table does.

- a segment value corrected at the source is recorded by the next run with the same ``--segment``
  list (the score is not paid for again);
- a NULL segment and the literal text ``(null)`` are two segments, each selectable in ``compare``;
- ``--segment tenant`` then ``--segment TENANT`` name one column (SQLite's column names ignore case).
"""

from __future__ import annotations

from datetime import datetime

import pytest
import sqlalchemy as sa

from ctxprec_ops.cli import main
from ctxprec_ops.monitoring import check_segments, compare
from ctxprec_ops.monitoring.segment_data import label, parse_value
from ctxprec_ops.pipeline import PipelineConfig, score_partition
from tests.fixtures.warehouse_data import CountingJudge, log_row, query

DAY = "2026-11-28"
NODES_GOOD = ["Paris is the capital of France.", "Berlin is in Germany."]
NODES_BAD = ["Berlin is in Germany.", "Rome is in Italy.", "Paris is the capital of France."]


def _warehouse(url: str, tenants: list[str | None]) -> None:
    engine = sa.create_engine(url)
    md = sa.MetaData()
    table = sa.Table(
        "retrieval_logs",
        md,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("event_time", sa.DateTime),
        sa.Column("input", sa.Text),
        sa.Column("actual_output", sa.Text),
        sa.Column("expected_output", sa.Text),
        sa.Column("retrieval_context", sa.JSON),
        sa.Column("tenant", sa.Text),
    )
    md.create_all(engine)
    rows = []
    for i, tenant in enumerate(tenants):
        nodes = NODES_GOOD if i % 2 else NODES_BAD
        row = log_row(i + 1, datetime.fromisoformat(f"{DAY}T{i % 24:02d}:00:00"), context=nodes)
        rows.append({**row, "tenant": tenant})
    with engine.begin() as conn:
        conn.execute(table.insert(), rows)
    engine.dispose()


def _recorded(url: str) -> dict[str, str | None]:
    return dict(query(url, "SELECT log_id, seg_tenant FROM ctxprec_segments"))


def test_a_segment_value_corrected_at_the_source_is_recorded_by_the_next_run(tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    _warehouse(url, ["acme", "acme", "globex", "globex"])
    score_partition(PipelineConfig(warehouse=url, judge=CountingJudge(), segments=["tenant"]), DAY)
    engine = sa.create_engine(url)
    with engine.begin() as conn:  # two rows were attributed to the wrong tenant
        conn.execute(sa.text("UPDATE retrieval_logs SET tenant = 'initech' WHERE id IN (1, 3)"))
    engine.dispose()

    judge = CountingJudge()
    rerun = score_partition(PipelineConfig(warehouse=url, judge=judge, segments=["tenant"]), DAY)
    assert judge.calls == 0 and rerun.status == "succeeded"
    assert _recorded(url) == {"1": "initech", "2": "acme", "3": "initech", "4": "globex"}
    got = {s.label: s.rows for s in check_segments(url, DAY, "tenant").segments}
    assert got == {"initech": 2, "acme": 1, "globex": 1}


def test_a_null_segment_and_the_text_null_label_are_two_segments(tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    _warehouse(url, [None, None, "(null)", "(null)", "(null)", "acme"])
    score_partition(PipelineConfig(warehouse=url, judge=CountingJudge(), segments=["tenant"]), DAY)
    labels = {s.label: s.rows for s in check_segments(url, DAY, "tenant").segments}
    assert labels == {"(null)": 2, "'(null)'": 3, "acme": 1}
    both = compare(url, DAY, by="tenant", baseline=parse_value("(null)"), candidate=parse_value("'(null)'"))
    assert (both.overall.baseline.n, both.overall.candidate.n) == (2, 3)
    for value in (None, "(null)", "'quoted'", "acme", "'", "''"):
        assert parse_value(label(value)) == value, value


def test_the_same_segment_column_in_another_letter_case_is_one_segment(tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    _warehouse(url, ["acme", "globex"])
    base = ["score", "--warehouse", url, "--partition", DAY, "--judge", "lexical"]
    assert main([*base, "--segment", "tenant"]) == 0
    assert main([*base, "--segment", "TENANT"]) == 0, capsys.readouterr().err
    columns = [r[1] for r in query(url, "PRAGMA table_info(ctxprec_segments)") if r[1].startswith("seg_")]
    assert columns == ["seg_tenant"]
    assert _recorded(url) == {"1": "acme", "2": "globex"}


@pytest.mark.parametrize("text", ["(null)", "'(null)'", "''(null)''", "acme", "'acme'"])
def test_labels_read_back_to_their_values(text):
    assert label(parse_value(text)) == text or parse_value(text) == text
