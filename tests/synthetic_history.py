"""Synthetic warehouse histories for the monitoring tests: real output tables, seeded data."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ctxprec_ops.warehouse.schema import ensure_output_tables

JUDGE = "gpt-4o-mini"
PROMPT = "cp-v1"
METRIC = "contextual_precision"


@dataclass
class Day:
    """One partition: per-case scores (None -> no scored rows) plus failed rows."""

    partition_key: str
    scores: Sequence[float] = ()
    failed: int = 0
    judge_model: str = JUDGE
    prompt_version: str = PROMPT
    threshold: float = 0.5
    verdicts: list[list[dict]] | None = None  # per case, optional
    reasons: list[str] | None = None
    run: bool = True
    ids: list[str] = field(default_factory=list)


def day_keys(start: str, n: int) -> list[str]:
    d0 = dt.date.fromisoformat(start)
    return [(d0 + dt.timedelta(days=i)).isoformat() for i in range(n)]


def beta_scores(rng: np.random.Generator, n: int, mean: float, concentration: float = 6.0) -> list[float]:
    """Scores in [0, 1] with the given mean (beta distribution)."""
    a, b = mean * concentration, (1 - mean) * concentration
    return [float(x) for x in rng.beta(a, b, size=n)]


def write_history(
    engine: Engine, days: Sequence[Day], *, metric: str = METRIC, source_table: str | None = None
) -> None:
    if source_table is None:
        source_table = "conversation_logs" if metric == "turn_contextual_precision" else "retrieval_logs"
    tables = ensure_output_tables(engine)
    now = dt.datetime(2026, 12, 1, tzinfo=dt.UTC)
    with engine.begin() as conn:
        for di, day in enumerate(days):
            run_id = f"run-{day.partition_key}-{day.judge_model}-{day.prompt_version}"
            stamp = now + dt.timedelta(minutes=di)
            rows = []
            for i, s in enumerate(day.scores):
                verdicts = day.verdicts[i] if day.verdicts else [{"node": 1, "relevant": s > 0.5, "reason": "r"}]
                rows.append(
                    dict(
                        log_id=f"{day.partition_key}-{i}",
                        partition_key=day.partition_key,
                        metric=metric,
                        source_table=source_table,
                        mapping="default",
                        score=float(s),
                        success=bool(s >= day.threshold),
                        threshold=day.threshold,
                        verdicts=verdicts,
                        reason=(day.reasons[i] if day.reasons else f"case {i}"),
                        judge_model=day.judge_model,
                        prompt_version=day.prompt_version,
                        prompt_tokens=100,
                        completion_tokens=20,
                        cost=0.0001,
                        run_id=run_id,
                        scored_at=stamp,
                    )
                )
            if rows:
                conn.execute(tables.scores.insert(), rows)
            fails = [
                dict(
                    log_id=f"{day.partition_key}-f{i}",
                    partition_key=day.partition_key,
                    metric=metric,
                    source_table=source_table,
                    mapping="default",
                    judge_model=day.judge_model,
                    prompt_version=day.prompt_version,
                    error_type="judge_unavailable",
                    error_message="judge kept failing",
                    attempts=6,
                    run_id=run_id,
                    failed_at=stamp,
                )
                for i in range(day.failed)
            ]
            if fails:
                conn.execute(tables.failures.insert(), fails)
            if day.run and (rows or fails):
                sc = np.asarray(day.scores, dtype=float)
                conn.execute(
                    tables.runs.insert(),
                    dict(
                        run_id=run_id,
                        partition_key=day.partition_key,
                        metric=metric,
                        source_table=source_table,
                        mapping="default",
                        status="completed",
                        rows_total=len(rows) + len(fails),
                        rows_scored=len(rows),
                        rows_cached=0,
                        rows_failed=len(fails),
                        mean_score=float(sc.mean()) if sc.size else None,
                        median_score=float(np.median(sc)) if sc.size else None,
                        pass_rate=float((sc >= day.threshold).mean()) if sc.size else None,
                        cost=0.0001 * len(rows),
                        judge_model=day.judge_model,
                        prompt_version=day.prompt_version,
                        started_at=stamp,
                        finished_at=stamp,
                    ),
                )


def write_source_logs(engine: Engine, rows: Sequence[dict]) -> None:
    """A minimal ``retrieval_logs`` table (id, event_time, input, expected_output, retrieval_context)."""
    md = sa.MetaData()
    t = sa.Table(
        "retrieval_logs",
        md,
        sa.Column("id", sa.Text, primary_key=True),
        sa.Column("event_time", sa.DateTime),
        sa.Column("input", sa.Text),
        sa.Column("actual_output", sa.Text),
        sa.Column("expected_output", sa.Text),
        sa.Column("retrieval_context", sa.Text),
    )
    md.create_all(engine)
    with engine.begin() as conn:
        conn.execute(
            t.insert(),
            [
                dict(
                    id=r["id"],
                    event_time=r.get("event_time"),
                    input=r["input"],
                    actual_output=None,
                    expected_output=r.get("expected_output", "x"),
                    retrieval_context=json.dumps(r["retrieval_context"]),
                )
                for r in rows
            ],
        )


def steady_history(rng: np.random.Generator, start: str, n_days: int, *, n: int = 60, mean: float = 0.72) -> list[Day]:
    return [Day(k, beta_scores(rng, n, mean)) for k in day_keys(start, n_days)]
