"""What is particular to DuckDB (the invariants every backend shares are in
tests/conformance/): its staged write works without pyarrow."""

from __future__ import annotations

import json
import sys

import sqlalchemy as sa

from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import CountingJudge, create_logs, day_rows

DAY = "2026-11-28"


def _load(url: str, n: int = 7) -> list[dict]:
    """A source table of ``n`` rows (retrieval context as JSON text: fakesnow has no SQLAlchemy JSON)."""
    rows = [dict(r, retrieval_context=json.dumps(r["retrieval_context"])) for r in day_rows(n)]
    create_logs(get_engine(url), rows, context_type=sa.Text)
    return rows


def test_duckdb_writes_the_same_rows_without_pyarrow(duckdb_url, tmp_path, monkeypatch):
    """DuckDB's staged write needs neither pyarrow nor pandas (the ``duckdb`` extra installs
    neither): with pyarrow hidden, the same score and judgment rows as with it importable."""
    arrow_url = f"duckdb:///{tmp_path / 'arrow.duckdb'}"
    for url in (arrow_url, duckdb_url):
        _load(url)
    score_partition(PipelineConfig(warehouse=arrow_url, judge=CountingJudge(), chunk_size=3), DAY)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # ``import pyarrow`` raises ImportError
    score_partition(PipelineConfig(warehouse=duckdb_url, judge=CountingJudge(), chunk_size=3), DAY)

    def rows(url: str) -> tuple[list, list]:
        with get_engine(url).connect() as conn:
            scores = conn.exec_driver_sql(
                "SELECT log_id, score, success, verdicts::VARCHAR, judge_calls FROM ctxprec_scores ORDER BY log_id"
            ).fetchall()
            cache = conn.exec_driver_sql(
                "SELECT key, relevant, reason, agreement FROM ctxprec_judgments ORDER BY key"
            ).fetchall()
        return scores, cache

    assert rows(duckdb_url) == rows(arrow_url)
    assert rows(duckdb_url)[0] and rows(duckdb_url)[1]


def test_a_failed_frame_write_reports_its_own_error(duckdb_url):
    """A frame insert DuckDB refuses (a NULL for a NOT NULL column) aborts the transaction, and
    DuckDB then refuses to unregister the frame as well: the error raised is the write's own,
    naming the column, not "Current transaction is aborted"; the frame is gone with it."""
    from ctxprec_ops.warehouse.dialects.duckdb.frames import frame_upsert
    from ctxprec_ops.warehouse.schema import ensure_output_tables
    from ctxprec_ops.warehouse.write_rows import ColumnRows

    engine = get_engine(duckdb_url)
    t = ensure_output_tables(engine)
    rows = ColumnRows({"key": [b"\x01" * 23], "relevant": [True], "reason": ["r"]}, {"judge_model": None})
    with engine.connect() as conn:
        trans = conn.begin()
        try:
            frame_upsert(conn, t.judgments, rows, ["key"], None)
        except sa.exc.DBAPIError as exc:
            message = str(exc.orig)
        else:
            raise AssertionError("the NULL judge_model was accepted")
        finally:
            trans.rollback()
        assert "judge_model" in message and "aborted" not in message, message
        frames = conn.exec_driver_sql("SELECT count(*) FROM duckdb_views() WHERE view_name LIKE 'ctxprec_stage_%'")
        assert frames.scalar() == 0
