"""A re-run of a scored partition is free: no judge call, and the score rows are left exactly as
they were (no duplicate, no rewrite)."""

from __future__ import annotations

from tests.fixtures.warehouse_data import CountingJudge

from .invariants import assert_each_row_once, assert_ledger, logs, score, source_count

IDS = list(range(1, 11))


def _score_rows(warehouse) -> list[tuple]:
    return warehouse.query("SELECT * FROM ctxprec_scores ORDER BY log_id")


def test_a_rerun_is_free_and_leaves_the_score_rows_identical(warehouse):
    warehouse.create_source(logs(IDS))
    first_judge = CountingJudge()
    first = score(warehouse.url, judge=first_judge)
    assert first_judge.calls == len(IDS) and first.rows_scored == len(IDS)
    before = _score_rows(warehouse)

    judge = CountingJudge()
    again = score(warehouse.url, judge=judge)
    assert judge.calls == 0
    assert again.rows_cached == len(IDS)
    assert _score_rows(warehouse) == before
    assert_each_row_once(warehouse, IDS)
    assert_ledger(warehouse, again, source_count(warehouse))
