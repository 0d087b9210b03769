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


def _logs(url: str, id_and_time: str, rows: list[tuple[object, object]], *, indexed: bool = True) -> None:
    """A ``retrieval_logs`` table whose ``id`` and ``event_time`` are declared ``id_and_time``,
    of good rows with these (id, stored event_time) values."""
    good = day_rows(1, as_text=True)[0]
    with get_engine(url).begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE retrieval_logs (id {id_and_time}, "
            "input TEXT, actual_output TEXT, expected_output TEXT, retrieval_context TEXT)"
        )
        if indexed:
            conn.exec_driver_sql("CREATE INDEX ix_time ON retrieval_logs (event_time)")
        for id_, when in rows:
            conn.exec_driver_sql(
                "INSERT INTO retrieval_logs VALUES (?, ?, ?, ?, ?, ?)",
                (id_, when, f"{good['input']} {id_}", good["actual_output"], good["expected_output"],
                 good["retrieval_context"]),
            )  # fmt: skip


@pytest.mark.parametrize("declared", ["TEXT", "DATETIME", ""])
def test_values_at_a_days_edges_land_in_the_utc_day_they_name(tmp_path, declared):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    _logs(url, f"INTEGER PRIMARY KEY, event_time {declared}", [(i, v) for i, (v, _) in enumerate(EDGES, start=1)])
    config = PipelineConfig(warehouse=url, judge=CountingJudge(), chunk_size=3)
    for day in DAYS:
        summary = score_partition(config, day)
        want = {str(i) for i, (_, d) in enumerate(EDGES, start=1) if d == day}
        got = {r[0] for r in query(url, "SELECT log_id FROM ctxprec_scores WHERE partition_key = :p", p=day)}
        wrong = {EDGES[int(i) - 1][0]: day for i in got ^ want}
        assert got == want, f"{day}: misplaced values {wrong}"
        assert (summary.rows_total, summary.rows_unpartitioned) == (len(want), 0)


#: instants SQLite's day test reads from forms the plan's and ledger's index ranges once missed
#: (they scanned ISO prefixes, numbers and 10-digit text led by '1' only): (stored value, its day)
OTHER_FORMS = [
    ("987654321", "2001-04-19"),  # epoch seconds of 9 digits
    ("0987654321", "2001-04-19"),  # the same with a leading zero
    ("2000000000", "2033-05-18"),  # 10 digits led by '2'
    ("999950000000", "2001-09-08"),  # epoch milliseconds of 12 digits
    ("999999999.5", "2001-09-09"),  # a day whose epoch seconds gain a digit: its 9-digit part...
    ("1000079999", "2001-09-09"),  # ...and its 10-digit part
    (b"2026-11-28 02:00:00", "2026-11-28"),  # ISO text stored as a BLOB
    ("1795824000", "2026-11-28"),  # the day's first second as text
]


@pytest.mark.parametrize("declared", ["TEXT", "DATETIME"])
@pytest.mark.parametrize("indexed", [False, True])
def test_every_form_the_day_test_reads_is_scored_and_accounted_for_in_its_day(tmp_path, indexed, declared):
    """A row the chunk read's exact test puts in the day but the plan's and ledger's scan missed
    was scored, then deleted as stale by the ledger: in neither table under a succeeded run (or,
    with an index on ``event_time``, never read at all). Each such row is now scored in its day."""
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    rows = []
    for i, (value, day) in enumerate(
        OTHER_FORMS, start=1
    ):  # ids on both sides of the odd one's, as the index plan bounds them
        rows += [(f"{i}-form", value), (f"{i}-iso-a", f"{day} 00:00:01"), (f"{i}-iso-z", f"{day} 23:59:00")]
    _logs(url, f"TEXT PRIMARY KEY, event_time {declared}", rows, indexed=indexed)
    config = PipelineConfig(warehouse=url, judge=CountingJudge(), chunk_size=2)
    for day in sorted({d for _, d in OTHER_FORMS}):
        summary = score_partition(config, day)
        forms = {f"{i}-form" for i, (_, d) in enumerate(OTHER_FORMS, start=1) if d == day}
        got = {r[0] for r in query(url, "SELECT log_id FROM ctxprec_scores WHERE partition_key = :p", p=day)}
        assert forms <= got, f"{day}: {sorted(forms - got)} not scored"
        assert summary.status == "succeeded"
        assert (summary.rows_total, summary.rows_scored, summary.rows_unpartitioned) == (len(got), len(got), 0)
