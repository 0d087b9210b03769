"""Every source row of a partition ends in exactly one of ``ctxprec_scores`` /
``ctxprec_failures``, and the run's ledger row reconciles with the partition's source rows."""

from __future__ import annotations

import json
from datetime import timedelta

from tests.fixtures.warehouse_data import CountingJudge

from .invariants import DAY, assert_each_row_once, assert_ledger, day_start, log, logs, outcome, score, source_count

#: bad input: no judge call is made, the row is recorded as a failure
BAD = {
    901: {"retrieval_context": "[]"},  # empty retrieval context
    902: {"expected_output": ""},  # empty expected output
    903: {"retrieval_context": "[not json"},  # not JSON
    904: {"retrieval_context": None},
    905: {"expected_output": "   "},  # blank
    906: {"retrieval_context": json.dumps(["fine", 3])},  # a node that is not text
}


def _mixed_day(day: str = DAY) -> tuple[list[dict], list[int]]:
    good = list(range(1, 13))
    rows = logs(good, day)
    start = day_start(day)
    for i, (rid, bad) in enumerate(BAD.items()):
        rows.append(log(rid, start + timedelta(hours=2 * i), 100 + i, **bad))
    return rows, good


def test_every_row_ends_in_exactly_one_of_scores_or_failures(warehouse):
    rows, good = _mixed_day()
    warehouse.create_source(rows)
    judge = CountingJudge()
    summary = score(warehouse.url, judge=judge, chunk_size=5)
    assert judge.calls == len(good)  # bad input never reaches the judge
    out = assert_each_row_once(warehouse, good, list(BAD))
    assert {error for _, _, error in out.failures} == {"invalid_input"}
    assert_ledger(warehouse, summary, len(rows))


def test_the_ledger_reconciles_with_the_partitions_source_rows(warehouse):
    """Rows on the days around the partition, and rows of no day (NULL ``event_time``), are not
    the partition's: ``rows_total`` is the test's own ``COUNT(*)`` of the day."""
    rows, good = _mixed_day()
    rows += logs(range(201, 206), "2026-11-27") + logs(range(301, 304), "2026-11-29")
    rows += [log(401, None, 401), log(402, None, 402)]
    warehouse.create_source(rows)
    counted = source_count(warehouse)
    assert counted == len(good) + len(BAD)
    summary = score(warehouse.url)
    assert_ledger(warehouse, summary, counted)
    assert_each_row_once(warehouse, good, list(BAD))
    assert not [r for r in outcome(warehouse).scores if r[1] != DAY]


def test_a_sampled_run_accounts_for_the_rows_it_left_out(warehouse):
    ids = list(range(1, 41))
    warehouse.create_source(logs(ids))
    summary = score(warehouse.url, sample_rate=0.5)
    row = assert_ledger(warehouse, summary, source_count(warehouse))
    scored = outcome(warehouse).scored()
    assert 0 < len(scored) < len(ids) and row["rows_scored"] == len(scored)
    assert set(scored) <= {str(i) for i in ids}


def test_a_row_moved_to_another_day_counts_in_the_day_it_says_now(warehouse):
    """A row whose ``event_time`` is corrected to another day after its partition was scored:
    each re-run's ledger is its partition's source rows now (the row counts in its new day only)."""
    table = warehouse.create_source(logs(range(1, 7)) + logs(range(7, 10), "2026-11-29", first=7))
    score(warehouse.url)
    score(warehouse.url, "2026-11-29")
    with warehouse.engine() as engine, engine.begin() as conn:
        conn.execute(table.update().where(table.c.id == 3).values(event_time=day_start("2026-11-29")))
    for day in (DAY, "2026-11-29"):
        assert_ledger(warehouse, score(warehouse.url, day), source_count(warehouse, day))
