"""What is particular to Snowflake (the invariants every backend shares are in
tests/conformance/): keys are informational, so readers must keep each key's latest row.
Snowflake is the ``fakesnow`` emulator of tests/fixtures/fakesnow_env.py."""

from __future__ import annotations

import json
from datetime import timedelta

import pytest
import sqlalchemy as sa

from ctxprec_ops.monitoring.check import check_partition
from ctxprec_ops.monitoring.trend import trend_results
from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import CountingJudge, create_logs, day_rows

DAY = "2026-11-28"


def _load(url: str, n: int = 7) -> list[dict]:
    """A source table of ``n`` rows (retrieval context as JSON text: fakesnow has no SQLAlchemy JSON)."""
    rows = [dict(r, retrieval_context=json.dumps(r["retrieval_context"])) for r in day_rows(n)]
    create_logs(get_engine(url), rows, context_type=sa.Text)
    return rows


def _trend(url: str) -> list[tuple]:
    """Each trend partition's case count, rows, mean and median (sums rounded: row order may differ)."""
    history, _results = trend_results(url, end=DAY)
    out = []
    for key, p in sorted(history.partitions.items()):
        mean = p.moments.total / p.moments.n if p.moments.n else None
        out.append((key, p.moments.n, p.rows, None if mean is None else round(mean, 9), p.median))
    assert any(row[1] for row in out), out  # the scored day is in the window
    return out


def test_snowflake_readers_keep_the_latest_row_of_a_duplicated_key(snowflake_url):
    """Snowflake's keys are informational: two racing writers may leave a key twice. Simulated by
    a ``ctxprec_scores`` without its primary key and a stale second row per key (older
    ``scored_at``, inverted score): ``check`` and ``trend`` read each key once, its latest row."""
    from sqlalchemy.schema import CreateTable

    from ctxprec_ops.warehouse.schema import output_tables

    engine = get_engine(snowflake_url)
    declared = output_tables().scores
    keyless = sa.Table(declared.name, sa.MetaData(), *[sa.Column(c.name, c.type) for c in declared.columns])
    with engine.begin() as conn:
        conn.execute(CreateTable(keyless))
    _load(snowflake_url)
    score_partition(PipelineConfig(warehouse=snowflake_url, judge=CountingJudge(), chunk_size=3), DAY)
    before = check_partition(snowflake_url, DAY).to_dict()["figures"]
    trend_before = _trend(snowflake_url)
    with engine.begin() as conn:
        rows = [dict(r._mapping) for r in conn.execute(sa.select(keyless))]
        stale = [dict(r, score=1.0 - r["score"], scored_at=r["scored_at"] - timedelta(days=1)) for r in rows]
        conn.execute(sa.insert(keyless), stale)
        assert conn.execute(sa.select(sa.func.count()).select_from(keyless)).scalar_one() == 2 * len(rows)
    after = check_partition(snowflake_url, DAY).to_dict()["figures"]
    # the same figures; sums to the last bit only up to row order (the aggregate's order is free)
    floats = {k for k, v in before.items() if isinstance(v, float)}
    assert {k: v for k, v in after.items() if k not in floats} == {k: v for k, v in before.items() if k not in floats}
    assert {k: after[k] for k in floats} == pytest.approx({k: before[k] for k in floats}, rel=1e-12)
    assert _trend(snowflake_url) == trend_before
    again = CountingJudge()
    score_partition(PipelineConfig(warehouse=snowflake_url, judge=again, chunk_size=3), DAY)
    assert again.calls == 0
