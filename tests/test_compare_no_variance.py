"""``ctxprec compare`` when the difference has no variance: every query of v2 ranks the relevant
nodes one place lower than v1 does, so every pair differs by exactly the same amount (and each
side's scores are all alike). A t-test has no noise to measure then: the output says "no
variance" instead of ``p=0`` and a zero-width interval; the JSON keeps its keys and documented
values (the p-value of a difference without spread is 0, ``monitoring/stats.py``)."""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from ctxprec_ops.pipeline import PipelineConfig, score_partition
from tests.segment_data import EXPECTED, _nodes

CTXPREC = Path(sys.executable).with_name("ctxprec")
DAY = "2026-11-28"
QUERIES = 30


@pytest.fixture(scope="module")
def url(tmp_path_factory) -> str:
    url = f"sqlite:///{tmp_path_factory.mktemp('novar') / 'wh.db'}"
    engine = sa.create_engine(url)
    md = sa.MetaData()
    t = sa.Table(
        "retrieval_logs", md,
        sa.Column("id", sa.Integer, primary_key=True), sa.Column("event_time", sa.DateTime),
        sa.Column("input", sa.Text), sa.Column("expected_output", sa.Text),
        sa.Column("retrieval_context", sa.Text), sa.Column("retriever_version", sa.Text),
        sa.Column("query_id", sa.Text),
    )  # fmt: skip
    md.create_all(engine)
    rows = []
    for q in range(QUERIES):
        for version, relevant_at in (("v1", (1, 2)), ("v2", (2, 3))):  # precision 1.0 vs 0.583 for every query
            rows.append(
                {
                    "id": len(rows) + 1,
                    "event_time": dt.datetime(2026, 11, 28, 9, q % 60),
                    "input": f"question {q}",
                    "expected_output": EXPECTED,
                    "retrieval_context": json.dumps(_nodes(relevant_at)),
                    "retriever_version": version,
                    "query_id": f"q{q}",
                }  # fmt: skip
            )
    with engine.begin() as conn:
        conn.execute(t.insert(), rows)
    engine.dispose()
    score_partition(PipelineConfig(warehouse=url, judge="lexical", segments=["retriever_version", "query_id"]), DAY)
    return url


def _compare(url: str, *extra: str) -> subprocess.CompletedProcess:
    argv = ["compare", "--warehouse", url, "--partition", DAY, "--by", "retriever_version", "--baseline", "v1",
            "--candidate", "v2", *extra]  # fmt: skip
    return subprocess.run([str(CTXPREC), *argv], capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, COLUMNS="100"))  # fmt: skip


@pytest.mark.parametrize("paired", [True, False])
def test_the_text_says_no_variance(url, paired):
    proc = _compare(url, *(["--pair-on", "query_id"] if paired else []))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    flat = " ".join(out.split())
    assert "no variance" in flat
    assert "p=0" not in flat and "p=1" not in flat
    assert not re.search(r"([+-]\d\.\d{3}) … \1", out)  # no zero-width interval
    assert not re.search(r"95% CI ([+-]\d\.\d{3}), \1", flat)
    assert re.search(r"overall .*-0\.417 .*no variance", out)  # the row still shows the difference
    size = f"{QUERIES} pairs" if paired else f"{QUERIES} vs {QUERIES} rows"
    assert f"= -0.417 ({'paired' if paired else 'Welch'} t-test, {size}, no variance" in flat


def test_the_json_keeps_its_keys(url):
    proc = _compare(url, "--pair-on", "query_id", "--json")
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    for k in ("pairs", "baseline_mean", "candidate_mean", "delta", "ci_low", "ci_high", "p_value", "segments"):
        assert k in data, k
    assert data["pairs"] == QUERIES and data["delta"] == pytest.approx(7 / 12 - 1)
    # a difference without spread is certain (the statistics' documented convention): p 0, the
    # interval the difference itself; the text output says "no variance" instead of these
    assert data["p_value"] == 0.0 and data["ci_low"] == data["ci_high"] == pytest.approx(data["delta"])
