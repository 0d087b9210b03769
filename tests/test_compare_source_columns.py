"""``compare`` on columns that were not recorded at scoring time: ``--pair-on``, ``--by`` and
``--within`` read a column of the input table by ``log_id`` after the fact, with the figures the
recorded segments give (NULL its own value), for a table scored without any ``--segment``, with
some of them, through a mapped id column, on PostgreSQL; and a clear error where the column is in
neither place or the source is a spans table.

The warehouse is tests/segment_data.py's (scored through the real pipeline with the offline
judge): the same rows scored once with the segment columns recorded and once without."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

from ctxprec_ops.monitoring import compare
from ctxprec_ops.monitoring.segment_data import SegmentError
from ctxprec_ops.pipeline import PipelineConfig, score_partition
from tests.segment_data import BAD_DAY, ODD_TENANT, build, write_source

CTXPREC = Path(sys.executable).with_name("ctxprec")
VERSION = "retriever_version"
PAIRED = dict(by=VERSION, baseline="v1", candidate="v2", pair_on="query_id", within="tenant")


def _scored(url: str, **config) -> str:
    engine = sa.create_engine(url)
    write_source(engine)
    engine.dispose()
    score_partition(PipelineConfig(warehouse=url, judge="lexical", **config), BAD_DAY)
    return url


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> str:
    return build(f"sqlite:///{tmp_path_factory.mktemp('rec') / 'wh.db'}", days=[BAD_DAY])


@pytest.fixture(scope="module")
def plain(tmp_path_factory) -> str:
    """The same rows scored without any segment column."""
    return _scored(f"sqlite:///{tmp_path_factory.mktemp('plain') / 'wh.db'}")


@pytest.mark.parametrize(
    "kw",
    [PAIRED, dict(PAIRED, pair_on=None), dict(PAIRED, within=None), dict(by="tenant", baseline=None, candidate="acme")],
    ids=["paired-within", "welch-within", "paired", "null-side"],
)
def test_source_columns_give_the_figures_recorded_segments_give(recorded, plain, kw):
    kw = {k: v for k, v in kw.items() if v is not None or k in ("baseline", "candidate")}
    assert compare(plain, BAD_DAY, **kw).to_dict() == compare(recorded, BAD_DAY, **kw).to_dict()


def test_some_columns_recorded_the_others_read(recorded, tmp_path):
    url = _scored(f"sqlite:///{tmp_path / 'wh.db'}", segments=[VERSION])
    assert compare(url, BAD_DAY, **PAIRED).to_dict() == compare(recorded, BAD_DAY, **PAIRED).to_dict()


def test_cli_pair_on_the_query_text(plain):
    """``--pair-on input``: the most natural key, never recorded as a segment."""
    proc = subprocess.run(
        [str(CTXPREC), "compare", "--warehouse", plain, "--partition", BAD_DAY, "--by", VERSION, "--baseline", "v1",
         "--candidate", "v2", "--pair-on", "input", "--within", "tenant", "--json"],
        capture_output=True, text=True, timeout=120, env=dict(os.environ),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["pair_on"] == "input" and data["pairs"] == 60 * 3 + 25 * 2
    segments = {s["value"]: s for s in data["segments"]}
    assert {None, ODD_TENANT, "globex", "acme", "solo"} <= set(segments)  # NULL is its own value
    assert [v for v, s in segments.items() if s["significant"]] == ["globex"]
    assert segments["acme"]["unpaired_baseline"] == 2 and segments["solo"]["pairs"] == 0


def test_a_mapped_id_column(recorded, tmp_path):
    """The input table's id column under another name (``--column id=...``) is joined on."""
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = sa.create_engine(url)
    write_source(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE retrieval_logs RENAME COLUMN id TO log_key")
    engine.dispose()
    score_partition(PipelineConfig(warehouse=url, judge="lexical", columns={"id": "log_key"}), BAD_DAY)
    proc = subprocess.run(
        [str(CTXPREC), "compare", "--warehouse", url, "--partition", BAD_DAY, "--by", VERSION, "--baseline", "v1",
         "--candidate", "v2", "--pair-on", "query_id", "--within", "tenant", "--column", "id=log_key", "--json"],
        capture_output=True, text=True, timeout=120, env=dict(os.environ),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    want = compare(recorded, BAD_DAY, **PAIRED).to_dict()
    for k in ("pairs", "delta", "ci_low", "ci_high", "p_value", "unpaired_baseline"):
        assert data[k] == pytest.approx(want[k]), k


def test_a_column_in_neither_place_is_a_clear_error(plain):
    with pytest.raises(SegmentError, match=r"'region'.*retrieval_logs has no such column \(its columns: id, "):
        compare(plain, BAD_DAY, by="region", baseline="a", candidate="b")
    with pytest.raises(SegmentError, match="no rows with retriever_version = 'v9'.*v1 .* rows"):
        compare(plain, BAD_DAY, by=VERSION, baseline="v1", candidate="v9")


def test_on_postgresql(pg_url):
    """An integer id joined as text to ``log_id``, NULLs kept, on a server warehouse."""
    url = _scored(pg_url)
    c = compare(url, BAD_DAY, **PAIRED)
    assert [s.label for s in c.segments if s.significant] == ["globex"]
    assert next(s for s in c.segments if s.label == "acme").unpaired_baseline == 2
    assert {s.label for s in c.segments} >= {"(null)", ODD_TENANT}


def test_a_spans_source_needs_the_column_recorded(judge_server, tmp_path):
    from ctxprec_ops.warehouse.engine import get_engine
    from tests.helpers import traces as T
    from tests.test_traces_source import cases, judged

    url = f"sqlite:///{tmp_path / 'wh.db'}"
    T.write_spans(get_engine(url), T.span_rows(T.langchain_spans(cases(4)), BAD_DAY, form="flat"))
    score_partition(judged(url, judge_server, source_format="openinference"), BAD_DAY)
    with pytest.raises(SegmentError, match="spans is a spans table .* score with --segment name"):
        compare(url, BAD_DAY, by="name", baseline="a", candidate="b", source_table="spans")
