"""What the conformance tests write and what they assert, shared by every test of the suite.

Rows are built here (distinct node texts per row, so the judgment cache never answers for another
row and judge calls count rows); outcomes are read back from the public output tables with the
test's own engine, never through the product's readers.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

import sqlalchemy as sa

from ctxprec_ops.pipeline import PipelineConfig, RunSummary, score_partition
from tests.fixtures.warehouse_data import EXPECTED, NODES, QUESTION, CountingJudge

from .backends import Warehouse

DAY = "2026-11-28"


def day_start(day: str = DAY) -> datetime:
    return datetime.fromisoformat(day)


def log(id: Any, event_time: Any, n: int, **columns: Any) -> dict[str, Any]:
    """One good row (``n`` makes its node texts its own), retrieval context as JSON text."""
    row = {
        "id": id,
        "event_time": event_time,
        "input": f"{QUESTION} (case {n})",
        "actual_output": "Paris.",
        "expected_output": EXPECTED,
        "retrieval_context": json.dumps([f"{NODES[0]} (doc {n})", f"{NODES[1]} Source {n}.", NODES[2]]),
    }
    row.update(columns)
    return row


def logs(ids: Iterable[Any], day: str = DAY, *, first: int = 1, **columns: Any) -> list[dict[str, Any]]:
    """Good rows for ``ids``, spread over the hours of ``day`` (naive UTC timestamps); their
    contents are numbered from ``first`` (rows added later take numbers of their own)."""
    start = day_start(day)
    return [
        log(rid, start + timedelta(seconds=(i * 3_607) % 86_400), i, **columns)
        for i, rid in enumerate(ids, start=first)
    ]


def score(url: str, day: str = DAY, *, judge: Any = None, **config: Any) -> RunSummary:
    """One ``score_partition`` run (a ``CountingJudge`` unless ``judge`` is given)."""
    config.setdefault("chunk_size", 25)
    return score_partition(PipelineConfig(warehouse=url, judge=judge or CountingJudge(), **config), day)


@dataclass(frozen=True)
class Outcome:
    """The output tables as the test reads them: (log_id, partition_key[, error_type]) rows."""

    scores: list[tuple[str, str]]
    failures: list[tuple[str, str, str]]

    def scored(self, day: str = DAY) -> list[str]:
        return sorted(log_id for log_id, key in self.scores if key == day)

    def failed(self, day: str = DAY) -> list[str]:
        return sorted(log_id for log_id, key, _ in self.failures if key == day)


def outcome(wh: Warehouse) -> Outcome:
    scores = [(str(a), str(b)) for a, b in wh.query("SELECT log_id, partition_key FROM ctxprec_scores")]
    failures = [
        (str(a), str(b), str(c))
        for a, b, c in wh.query("SELECT log_id, partition_key, error_type FROM ctxprec_failures")
    ]
    return Outcome(scores, failures)


def assert_each_row_once(wh: Warehouse, good: Sequence[Any], bad: Sequence[Any] = (), day: str = DAY) -> Outcome:
    """Every source row of the partition is in exactly one of scores / failures: the good rows
    scored, the bad rows failed, no row in both, none twice."""
    out = outcome(wh)
    scored, failed = out.scored(day), out.failed(day)
    doubled = [i for i, n in Counter(scored + failed).items() if n > 1]
    assert not doubled, f"rows in scores/failures more than once: {doubled[:10]}"
    want_scored, want_failed = sorted(str(i) for i in good), sorted(str(i) for i in bad)
    assert scored == want_scored, f"partition {day}: scored {_short(scored)}, expected {_short(want_scored)}"
    assert failed == want_failed, f"partition {day}: failed {_short(failed)}, expected {_short(want_failed)}"
    return out


def _short(ids: list[str]) -> str:
    shown = [i if len(i) <= 40 else i[:37] + "..." for i in ids[:20]]
    return f"{shown}{' ...' if len(ids) > 20 else ''} ({len(ids)})"


def run_row(wh: Warehouse, run_id: str) -> dict[str, Any]:
    with wh.engine() as engine, engine.connect() as conn:
        rows = [
            dict(r._mapping)
            for r in conn.execute(sa.text("SELECT * FROM ctxprec_runs WHERE run_id = :r"), {"r": run_id})
        ]
    assert len(rows) == 1, f"run {run_id}: {len(rows)} ledger rows"
    return rows[0]


def source_count(wh: Warehouse, day: str = DAY, table: str = "retrieval_logs") -> int:
    """The partition's source rows, counted by the test: naive ``event_time`` in [day, day + 1) UTC."""
    start = day_start(day)
    ((n,),) = wh.query(
        f"SELECT COUNT(*) FROM {table} WHERE event_time >= :lo AND event_time < :hi",
        lo=start,
        hi=start + timedelta(days=1),
    )
    return int(n)


def assert_ledger(wh: Warehouse, summary: RunSummary, source_rows: int) -> dict[str, Any]:
    """The run's ``ctxprec_runs`` row reconciles with the source: ``rows_total`` is the
    partition's source row count, and scored + failed (+ rows left out by sampling) is that
    count too — no row unaccounted for."""
    row = run_row(wh, summary.run_id)
    sampled = row.get("rows_sampled")
    left_out = row["rows_total"] - sampled if sampled is not None else 0
    assert row["rows_total"] == source_rows, (
        f"ledger rows_total {row['rows_total']} != {source_rows} source rows of the partition"
    )
    accounted = row["rows_scored"] + row["rows_failed"] + left_out
    assert accounted == source_rows, (
        f"ledger accounts for {accounted} rows (scored {row['rows_scored']}, failed {row['rows_failed']}, "
        f"left out by sampling {left_out}) of {source_rows} source rows"
    )
    return row


def count_calls(judges: Iterable[CountingJudge]) -> int:
    return sum(j.calls for j in judges)
