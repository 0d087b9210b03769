"""The run ledger: a partition's source rows reconciled with its score and failure rows.

A row that arrives while a run scores its day is in neither output table when the run ends: the
run says so (``partial``, ``rows_unaccounted``, the ids named; the CLI exits 1) instead of
``succeeded``, and the next run scores it. A row whose ``event_time`` is corrected to another day
counts in the day it says now: its score follows it, at no judge cost.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa

from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.pipeline.outcome import Outcome, decide
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import CountingJudge, create_logs, day_rows, log_row, query

DAY, NEXT, LATER = "2026-11-28", "2026-11-29", "2026-11-30"
CONSOLE_SCRIPT = Path(sys.executable).with_name("ctxprec")


def _insert(url: str, rows: list[dict[str, Any]]) -> None:
    engine = sa.create_engine(url)
    try:
        md = sa.MetaData()
        table = sa.Table("retrieval_logs", md, autoload_with=engine)
        with engine.begin() as conn:
            conn.execute(sa.insert(table), rows)
    finally:
        engine.dispose()


def _move(url: str, log_id: int, day: str) -> None:
    engine = sa.create_engine(url)
    try:
        with engine.begin() as conn:
            conn.execute(
                sa.text("UPDATE retrieval_logs SET event_time = :t WHERE id = :i"),
                {"t": datetime.fromisoformat(f"{day}T12:00:00"), "i": log_id},
            )
    finally:
        engine.dispose()


class ArrivingLogs(CountingJudge):
    """A judge during whose first call a new log row of the day lands in the source table (as
    production logs keep arriving while the nightly run scores)."""

    def __init__(self, url: str, late: dict[str, Any]) -> None:
        super().__init__()
        self.url, self.late, self.once = url, late, threading.Lock()
        self.inserted = False

    def generate(self, prompt: str, schema: Any = None) -> Any:
        with self.once:
            if not self.inserted:
                self.inserted = True
                _insert(self.url, [self.late])
        return super().generate(prompt, schema)


def _counts(url: str, day: str) -> tuple[int, int]:
    scores = query(url, "SELECT count(*) FROM ctxprec_scores WHERE partition_key = :d", d=day)[0][0]
    failures = query(url, "SELECT count(*) FROM ctxprec_failures WHERE partition_key = :d", d=day)[0][0]
    return scores, failures


def test_a_row_arriving_after_the_plan_is_unaccounted_named_and_scored_by_the_next_run(tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(get_engine(url), day_rows(6))
    late = log_row(1000, datetime.fromisoformat(f"{DAY}T23:00:00"), context=["Paris is the capital of France."])
    judge = ArrivingLogs(url, late)
    first = score_partition(PipelineConfig(warehouse=url, judge=judge, chunk_size=2), DAY)

    assert judge.inserted and judge.calls == 6  # the late row was never planned
    assert first.status == "partial" and not first.completed
    assert (first.rows_total, first.rows_scored, first.rows_failed, first.rows_unaccounted) == (7, 6, 0, 1)
    assert first.unaccounted_ids == ["1000"]
    decision = decide(first)
    assert decision.outcome is Outcome.RETRY and "'1000'" in decision.reason
    stored = query(url, "SELECT status, rows_total, rows_unaccounted, error_message FROM ctxprec_runs")
    assert stored[0][:3] == ("partial", 7, 1) and "'1000'" in stored[0][3]

    again = CountingJudge()
    second = score_partition(PipelineConfig(warehouse=url, judge=again, chunk_size=2), DAY)
    assert again.calls == 1 and second.status == "succeeded" and second.rows_unaccounted == 0
    assert (second.rows_total, second.rows_scored) == (7, 7)
    assert decide(second).outcome is Outcome.DONE


def test_the_cli_exits_non_zero_and_names_the_unaccounted_rows(tmp_path, judge_server):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(get_engine(url), day_rows(4))
    arrived = threading.Event()

    def latency(record: dict) -> float:  # the first judge request: a log row arrives meanwhile
        if not arrived.is_set():
            arrived.set()
            _insert(url, [log_row("9999", datetime.fromisoformat(f"{DAY}T22:00:00"))])
        return 0.0

    judge_server.latency = latency
    env = {
        "PATH": "/usr/bin:/bin",
        "OPENAI_API_KEY": "test-key",
        "OPENAI_BASE_URL": judge_server.base_url,
        **({"PYTHONPATH": p} if (p := __import__("os").environ.get("PYTHONPATH")) else {}),
    }
    args = [str(CONSOLE_SCRIPT), "score", "--warehouse", url, "--partition", DAY, "--judge", "judge-test-model"]
    done = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
    assert arrived.is_set()
    assert done.returncode == 1, done.stderr
    assert "1 row(s) of the source in neither ctxprec_scores nor ctxprec_failures" in done.stderr
    assert "'9999'" in done.stderr and "re-run" in done.stderr
    assert query(url, "SELECT status, rows_unaccounted FROM ctxprec_runs") == [("partial", 1)]

    rerun = subprocess.run(args, capture_output=True, text=True, env=env, timeout=120)
    assert rerun.returncode == 0, rerun.stderr
    statuses = query(url, "SELECT status, rows_total, rows_unaccounted FROM ctxprec_runs ORDER BY started_at")
    assert statuses[-1] == ("succeeded", 5, 0)


def test_a_row_moved_to_another_day_counts_there_at_no_judge_cost(tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(get_engine(url), day_rows(5) + day_rows(3, day=NEXT, start_id=100))
    for day in (DAY, NEXT):
        score_partition(PipelineConfig(warehouse=url, judge=CountingJudge()), day)
    _move(url, 3, NEXT)  # a corrected event_time: row 3 belongs to the next day now

    judge = CountingJudge()
    nxt = score_partition(PipelineConfig(warehouse=url, judge=judge), NEXT)
    assert judge.calls == 0  # its verdicts were paid for already
    assert (nxt.rows_total, nxt.rows_scored, nxt.rows_unaccounted, nxt.status) == (4, 4, 0, "succeeded")
    assert query(url, "SELECT partition_key FROM ctxprec_scores WHERE log_id = '3'") == [(NEXT,)]

    judge = CountingJudge()
    day = score_partition(PipelineConfig(warehouse=url, judge=judge), DAY)
    assert judge.calls == 0 and (day.rows_total, day.rows_scored, day.status) == (4, 4, "succeeded")
    assert _counts(url, DAY) == (4, 0) and _counts(url, NEXT) == (4, 0)


def test_a_row_that_left_the_day_is_removed_from_it_and_scored_where_it_went(tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(get_engine(url), day_rows(5))
    score_partition(PipelineConfig(warehouse=url, judge=CountingJudge()), DAY)
    mean_before = query(url, "SELECT avg(score) FROM ctxprec_scores")[0][0]
    _move(url, 2, LATER)

    judge = CountingJudge()
    rerun = score_partition(PipelineConfig(warehouse=url, judge=judge), DAY)
    assert judge.calls == 0
    assert (rerun.rows_total, rerun.rows_scored, rerun.status) == (4, 4, "succeeded")
    assert _counts(url, DAY) == (4, 0)
    assert query(url, "SELECT count(*) FROM ctxprec_scores WHERE log_id = '2'") == [(0,)]
    assert mean_before is not None

    judge = CountingJudge()
    later = score_partition(PipelineConfig(warehouse=url, judge=judge), LATER)
    assert judge.calls == 0  # the judgment cache answers for the row where it went
    assert (later.rows_total, later.rows_scored, later.status) == (1, 1, "succeeded")


def test_a_sampled_run_accounts_for_its_sample_only(tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(get_engine(url), day_rows(40))
    summary = score_partition(PipelineConfig(warehouse=url, judge=CountingJudge(), sample_rate=0.5), DAY)
    assert summary.rows_total == 40 and 0 < summary.rows_sampled < 40
    assert summary.rows_scored == summary.rows_sampled and summary.rows_unaccounted == 0
    assert summary.status == "succeeded"


def test_the_ledgers_binary_search_agrees_with_numpys_set_operations():
    """``_distinct`` and ``_within`` (sorted arrays, binary search: ~40 bytes a row at the peak)
    give what ``np.unique`` and ``np.isin`` give, repeats, extremes and empty arrays included."""
    import numpy as np
    from hypothesis import given
    from hypothesis import strategies as st

    from ctxprec_ops.pipeline.ledger import _distinct, _within

    int64 = st.integers(min_value=-(2**63), max_value=2**63 - 1)
    pool = st.lists(int64, min_size=1, max_size=8)

    @given(pool.flatmap(lambda p: st.tuples(st.lists(st.sampled_from(p)), st.lists(st.sampled_from(p) | int64))))
    def check(pair):
        haystack = np.array(pair[0], dtype=np.int64)
        needles = np.array(pair[1], dtype=np.int64)
        distinct = _distinct(haystack.copy())
        assert distinct.tolist() == np.unique(haystack).tolist()
        assert _within(distinct, needles).tolist() == np.isin(needles, haystack).tolist()

    check()


def _raw_logs(url: str, rows: list[tuple[str | bytes, str, str]], *, id_key: str = "") -> None:
    """A ``retrieval_logs`` table (``id TEXT`` + ``id_key``: none by default, so ids may repeat)
    holding good rows with these (id, event_time, retrieval_context); an id given as bytes is
    stored as text of those bytes (not necessarily UTF-8)."""
    with sa.create_engine(url).begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE retrieval_logs (id TEXT{id_key}, event_time TEXT, input TEXT, actual_output TEXT, "
            "expected_output TEXT, retrieval_context TEXT)"
        )
    _add_raw(url, rows)


def _add_raw(url: str, rows: list[tuple[str | bytes, str, str]]) -> None:
    good = log_row(1, datetime.fromisoformat(f"{DAY}T00:00:00"))
    engine = sa.create_engine(url)
    with engine.begin() as conn:
        for id_, when, context in rows:
            conn.exec_driver_sql(
                "INSERT INTO retrieval_logs VALUES (CAST(? AS TEXT), ?, ?, ?, ?, ?)",
                (id_, when, good["input"], good["actual_output"], good["expected_output"], context),
            )
    engine.dispose()


#: a good row's retrieval_context as stored
_NODES = json.dumps(log_row(1, datetime.fromisoformat(f"{DAY}T00:00:00"))["retrieval_context"])


def test_an_id_on_two_days_stays_with_the_day_that_scored_it_and_the_other_says_why(tmp_path):
    """Output rows are keyed by id, not by day: with one id on two days, each day's run found the
    id scored and the ledger moved its score into its own day — both runs ``succeeded`` while one
    day's row was in neither table, the days taking it from each other run after run. Now the
    output stays where it is, and the other day counts its row apart and names the id."""
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    _raw_logs(  # no key on id: the source allows the repeat
        url,
        [
            ("a", f"{DAY} 10:00:00", _NODES),
            ("x", f"{DAY} 11:00:00", _NODES),
            ("a", f"{NEXT} 10:00:00", "not JSON"),
            ("y", f"{NEXT} 11:00:00", _NODES),
        ],
    )
    config = PipelineConfig(warehouse=url, judge=CountingJudge())
    for _ in range(2):  # it stays so, run after run
        first = score_partition(config, DAY)
        assert (first.status, first.rows_scored, first.rows_without_id) == ("succeeded", 2, 0)
        assert query(url, "SELECT log_id FROM ctxprec_scores WHERE partition_key = :d ORDER BY 1", d=DAY) == [
            ("a",),
            ("x",),
        ]
        second = score_partition(config, NEXT)
        assert (second.status, second.rows_scored, second.rows_unaccounted, second.rows_without_id) == (
            "succeeded",
            1,
            0,
            1,
        )
        assert "1 row(s) share their id with a row of another day" in (second.error_message or "")
        assert f"'a' (also in {DAY})" in (second.error_message or "")
        assert query(url, "SELECT log_id FROM ctxprec_scores WHERE partition_key = :d", d=NEXT) == [("y",)]


def test_a_duplicate_arriving_after_its_id_was_scored_turns_the_score_into_the_not_unique_failure(tmp_path):
    """Two rows sharing an id: neither is scored until the duplicate is removed. A second row with
    the id of a row scored earlier was skipped as "scored" — the old score stayed, and the new row
    was never read. Now the score gives way to the failure, and comes back once the id is unique."""
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    _raw_logs(url, [("a", f"{DAY} 10:00:00", _NODES), ("b", f"{DAY} 11:00:00", _NODES)])  # no key on id
    config = PipelineConfig(warehouse=url, judge=CountingJudge())
    assert score_partition(config, DAY).rows_scored == 2

    _add_raw(url, [("a", f"{DAY} 12:00:00", "not JSON")])  # the same id again
    again = score_partition(config, DAY)
    assert (again.status, again.rows_total, again.rows_scored, again.rows_failed) == ("succeeded", 3, 1, 1)
    assert query(url, "SELECT log_id FROM ctxprec_scores ORDER BY 1") == [("b",)]
    (message,) = query(url, "SELECT error_message FROM ctxprec_failures WHERE log_id = 'a'")[0]
    assert "not unique" in message

    with get_engine(url).begin() as conn:  # the duplicate removed: the id is scored again
        conn.exec_driver_sql("DELETE FROM retrieval_logs WHERE retrieval_context = 'not JSON'")
    last = score_partition(config, DAY)
    assert (last.status, last.rows_total, last.rows_scored, last.rows_failed) == ("succeeded", 2, 2, 0)
    assert query(url, "SELECT count(*) FROM ctxprec_failures") == [(0,)]


@pytest.mark.parametrize("chunk_size", [1, 2, 100])
def test_an_id_that_is_not_utf8_is_counted_apart_and_the_other_rows_scored(tmp_path, chunk_size):
    """SQLite stores any bytes as text; read back, an id that is not UTF-8 holds surrogates no
    driver can send back — as a chunk's bound, in the scored-ids look-up, as a ``log_id``. Every
    run of its partition failed with a UnicodeEncodeError and wrote nothing. Now that row is
    counted apart (``rows_without_id``, named in the note) and the others are scored."""
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    ids: list[str | bytes] = ["a", b"b\xff", "c", b"z\xff"]
    _raw_logs(url, [(i, f"{DAY} 0{h}:00:00", _NODES) for h, i in enumerate(ids, start=1)], id_key=" PRIMARY KEY")
    summary = score_partition(PipelineConfig(warehouse=url, judge=CountingJudge(), chunk_size=chunk_size), DAY)
    assert (summary.status, summary.rows_scored, summary.rows_failed) == ("succeeded", 2, 0)
    assert (summary.rows_unaccounted, summary.rows_without_id) == (0, 2)
    assert "'b\\udcff' (not valid UTF-8)" in (summary.error_message or "")
    assert query(url, "SELECT log_id FROM ctxprec_scores ORDER BY 1") == [("a",), ("c",)]
