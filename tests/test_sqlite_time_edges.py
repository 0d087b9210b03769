"""SQLite reads ``event_time`` to the microsecond at a day's edges: a value in the last
millisecond of a UTC day stays in that day (SQLite's own time functions round to milliseconds, so
``23:59:59.9996`` became the next day's midnight), and ``T24:00:00`` is the next day's midnight
(ISO 8601's end of a day), whatever form the value has: ISO text with or without a fraction or an
offset, epoch seconds or milliseconds, as a number or as text."""

from __future__ import annotations

import pytest

from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import CountingJudge, day_rows, query

#: (stored value, the UTC day of the instant it names)
EDGES = [
    (1795910399.9996, "2026-11-28"),  # epoch seconds: 2026-11-28 23:59:59.9996 UTC
    ("1795910399.9996", "2026-11-28"),  # the same as text
    (1795910399999.6, "2026-11-28"),  # epoch milliseconds: 23:59:59.9996
    (1795910400, "2026-11-29"),
    ("2026-11-28 23:59:59.9996", "2026-11-28"),
    ("2026-11-28T23:59:59.999999Z", "2026-11-28"),
    ("2026-11-28 23:59:59.999999 UTC", "2026-11-28"),
    ("2026-11-28T08:59:59.999999+09:00", "2026-11-27"),  # 2026-11-27 23:59:59.999999 UTC
    ("2026-11-29T08:59:59.9999+0900", "2026-11-28"),
    ("2026-11-28T19:59:59.9999-04:00", "2026-11-28"),  # 23:59:59.9999 UTC
    ("2026-11-27T24:00:00", "2026-11-28"),  # the end of the 27th: the 28th's midnight
    ("2026-11-28 24:00:00", "2026-11-29"),
    ("2026-11-28T24:00:00Z", "2026-11-29"),
    ("2026-11-28T00:00:00.000001+00:00", "2026-11-28"),
]
DAYS = sorted({day for _, day in EDGES})


@pytest.mark.parametrize("declared", ["TEXT", "DATETIME", ""])
def test_values_at_a_days_edges_land_in_the_utc_day_they_name(tmp_path, declared):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    good = day_rows(1, as_text=True)[0]
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE retrieval_logs (id INTEGER PRIMARY KEY, event_time {declared}, "
            "input TEXT, actual_output TEXT, expected_output TEXT, retrieval_context TEXT)"
        )
        conn.exec_driver_sql("CREATE INDEX ix_time ON retrieval_logs (event_time)")
        for i, (value, _) in enumerate(EDGES, start=1):
            conn.exec_driver_sql(
                "INSERT INTO retrieval_logs VALUES (?, ?, ?, ?, ?, ?)",
                (i, value, f"{good['input']} {i}", good["actual_output"], good["expected_output"],
                 good["retrieval_context"]),
            )  # fmt: skip
    config = PipelineConfig(warehouse=url, judge=CountingJudge(), chunk_size=3)
    for day in DAYS:
        summary = score_partition(config, day)
        want = {str(i) for i, (_, d) in enumerate(EDGES, start=1) if d == day}
        got = {r[0] for r in query(url, "SELECT log_id FROM ctxprec_scores WHERE partition_key = :p", p=day)}
        wrong = {EDGES[int(i) - 1][0]: day for i in got ^ want}
        assert got == want, f"{day}: misplaced values {wrong}"
        assert (summary.rows_total, summary.rows_unpartitioned) == (len(want), 0)
