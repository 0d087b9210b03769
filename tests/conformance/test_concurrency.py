"""Concurrent runs on one partition judge each row once: the judge is paid once per row and no
score row is written twice, whether the runs plan the same chunks or not.

The overlap is made certain, not left to timing: each run's judge holds its first call at a gate
(a barrier of all the runs, or an event the test sets) until the others are under way too. The
gate opens after ``GATE_S`` seconds whatever happens, so a correct product that makes one run
wait for another's claim costs a few seconds, never a deadlock.
"""

from __future__ import annotations

import asyncio
import threading
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from tests.fixtures.warehouse_data import CountingJudge

from .invariants import assert_each_row_once, assert_ledger, count_calls, logs, run_row, score, source_count

GATE_S = 3.0


class GatedJudge(CountingJudge):
    """A ``CountingJudge`` whose first call waits at ``gate`` (a ``Barrier`` or an ``Event``)."""

    def __init__(self, gate: threading.Barrier | threading.Event) -> None:
        super().__init__()
        self.gate = gate
        self.first_call = threading.Event()

    def _pass_gate(self) -> None:
        if self.first_call.is_set():
            return
        self.first_call.set()
        if isinstance(self.gate, threading.Barrier):
            try:
                self.gate.wait(GATE_S)
            except threading.BrokenBarrierError:
                pass
        else:
            self.gate.wait(GATE_S)

    def generate(self, prompt: str, schema: Any = None) -> Any:
        self._pass_gate()
        return super().generate(prompt, schema)

    async def a_generate(self, prompt: str, schema: Any = None) -> Any:
        await asyncio.to_thread(self._pass_gate)
        return super().generate(prompt, schema)


def _ledger_of_a_run_that_ended_first(warehouse, summary, arrived_later: list[int]) -> None:
    """A run that ends before a concurrent one has scored the rows that arrived after its plan
    says so (docs/reliability.md): ``partial``, naming only such rows; else its ledger accounts
    for every row. Where the ledger and the counts are not one snapshot, the other run may score
    some of the named rows in between: each row is then counted at least once."""
    if summary.status != "partial":
        assert_ledger(warehouse, summary, source_count(warehouse))
        return
    later = {str(i) for i in arrived_later}
    assert summary.rows_unaccounted > 0 and set(summary.unaccounted_ids) <= later, (
        f"{summary.rows_unaccounted} unaccounted, named {summary.unaccounted_ids}: not rows that arrived later"
    )
    row = run_row(warehouse, summary.run_id)
    assert row["rows_total"] == source_count(warehouse)
    assert row["rows_scored"] + row["rows_failed"] + summary.rows_unaccounted >= row["rows_total"]


def _no_duplicate_score_rows(warehouse) -> None:
    ((rows, keys),) = warehouse.query("SELECT COUNT(*), COUNT(DISTINCT log_id) FROM ctxprec_scores")
    assert rows == keys, f"{rows} score rows for {keys} ids"


def test_runs_started_together_judge_each_row_once(warehouse):
    """Three runs plan the same chunks at the same time (an Airflow retry overlapping its first
    try, a backfill overlapping the schedule): each row is judged by one of them."""
    ids = list(range(1, 16))  # three chunks: one for each run to hold at the gate
    warehouse.create_source(logs(ids))
    gate = threading.Barrier(3)
    judges = [GatedJudge(gate) for _ in range(3)]
    with ThreadPoolExecutor(3) as pool:
        runs = [pool.submit(score, warehouse.url, judge=j, chunk_size=5, concurrency=2) for j in judges]
        summaries = [r.result(timeout=120) for r in runs]
    assert count_calls(judges) == len(ids), f"judge calls per run {[j.calls for j in judges]} for {len(ids)} rows"
    _no_duplicate_score_rows(warehouse)
    assert_each_row_once(warehouse, ids)
    for summary in summaries:
        assert_ledger(warehouse, summary, source_count(warehouse))


def test_runs_that_plan_different_chunks_judge_each_row_once(warehouse):
    """Rows arrive between two runs' plans, so their chunks differ (every boundary moves): a row
    the first run is judging is not judged again by the second, which scores every row."""
    first_ids = list(range(10, 110, 10))
    table = warehouse.create_source(logs(first_ids))
    gate = threading.Event()
    early = GatedJudge(gate)
    with ThreadPoolExecutor(1) as pool:
        first = pool.submit(score, warehouse.url, judge=early, chunk_size=5)
        assert early.first_call.wait(60), "the first run never reached the judge"
        later_ids = list(range(15, 115, 10))  # one between every two: no chunk keeps its bounds
        warehouse.insert(table, logs(later_ids, first=len(first_ids) + 1))
        late = CountingJudge()
        second = score(warehouse.url, judge=late, chunk_size=5)
        gate.set()
        summaries = [first.result(timeout=120), second]
    ids = first_ids + later_ids
    assert early.calls + late.calls == len(ids), f"judge calls {early.calls} + {late.calls} for {len(ids)} rows"
    _no_duplicate_score_rows(warehouse)
    assert_each_row_once(warehouse, ids)
    # the first run may end first (its gate opens while a slow warehouse still serves the second)
    _ledger_of_a_run_that_ended_first(warehouse, summaries[0], later_ids)
    assert_ledger(warehouse, summaries[1], source_count(warehouse))
