"""A run refused for a missing table or column leaves the user's warehouse as it was: validate
first, create the ctxprec_* output tables after."""

from __future__ import annotations

from pathlib import Path

import pytest
import sqlalchemy as sa

from ctxprec_ops.cli import main as ctxprec
from ctxprec_ops.pipeline import PipelineConfig, score_partition
from tests.fixtures.warehouse_data import create_logs, day_rows

DAY = "2026-11-28"


def _tables(url: str) -> set[str]:
    engine = sa.create_engine(url)
    try:
        return set(sa.inspect(engine).get_table_names())
    finally:
        engine.dispose()


def _warehouse(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(sa.create_engine(url), day_rows(3))
    return url


def test_a_missing_source_table_creates_no_output_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    url = _warehouse(tmp_path)
    before = _tables(url)
    code = ctxprec(["score", "--warehouse", url, "--partition", DAY, "--judge", "lexical", "--source-table", "nope"])
    assert code != 0 and "nope" in capsys.readouterr().err
    assert _tables(url) == before == {"retrieval_logs"}


def test_a_missing_column_creates_no_output_table(tmp_path: Path) -> None:
    url = _warehouse(tmp_path)
    config = PipelineConfig(warehouse=url, judge="lexical", columns={"retrieval_context": "contexts"})
    with pytest.raises(Exception, match="contexts"):
        score_partition(config, DAY)
    assert _tables(url) == {"retrieval_logs"}


def test_a_valid_run_still_creates_them(tmp_path: Path) -> None:
    url = _warehouse(tmp_path)
    run = score_partition(PipelineConfig(warehouse=url, judge="lexical"), DAY)
    assert run.rows_scored == 3
    assert {"ctxprec_scores", "ctxprec_failures", "ctxprec_runs", "ctxprec_judgments"} <= _tables(url)
