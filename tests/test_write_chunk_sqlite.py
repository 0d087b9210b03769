"""``write_chunk`` on SQLite deletes the failure records of rows that now have a score with driver
SQL (``store._sqlite_scored_failures_delete``): the same rows as the general Core statement."""

from __future__ import annotations

from datetime import UTC, datetime

import sqlalchemy as sa

from ctxprec_ops.warehouse.schema import output_tables
from ctxprec_ops.warehouse.scoring_key import ScoringKey
from ctxprec_ops.warehouse.store import write_chunk

AT = datetime(2026, 11, 28, tzinfo=UTC)
KEY = ScoringKey("contextual_precision", "judge-a", "v1", "logs")
OTHER = ScoringKey("contextual_precision", "judge-b", "v1", "logs")  # another judge: left alone


def _score(log_id: str, key: ScoringKey) -> dict:
    return {
        "log_id": log_id, "partition_key": "2026-11-28", "metric": key.metric, "source_table": key.source_table,
        "mapping": key.mapping or "default",
        "score": 1.0, "success": True, "threshold": 0.5, "verdicts": [], "reason": "r",
        "judge_model": key.judge_model, "prompt_version": key.prompt_version, "run_id": "run", "scored_at": AT,
    }  # fmt: skip


def _failure(log_id: str, key: ScoringKey) -> dict:
    return {
        "log_id": log_id, "partition_key": "2026-11-28", "metric": key.metric, "source_table": key.source_table,
        "mapping": key.mapping or "default",
        "judge_model": key.judge_model, "prompt_version": key.prompt_version, "error_type": "judge_error",
        "error_message": "boom", "attempts": 1, "run_id": "run", "failed_at": AT,
    }  # fmt: skip


def test_scored_rows_lose_their_failures_exactly_as_the_general_statement_says(tmp_path):
    t = output_tables(None)
    chunk = list("1234") + [f"x{i}" for i in range(1200)]  # more ids than one IN list takes
    left = {}
    for native in (None, False):
        engine = sa.create_engine(f"sqlite:///{tmp_path / f'{native}.db'}")
        t.metadata.create_all(engine)
        with engine.begin() as conn:
            conn.execute(sa.insert(t.failures), [_failure(i, k) for i in "123456" for k in (KEY, OTHER)])
            conn.execute(sa.insert(t.scores), [_score("2", KEY), _score("5", OTHER), _score("9", KEY)])
        with engine.begin() as conn:
            write_chunk(
                conn, t, KEY, log_ids=chunk, scores=[_score("4", KEY)], failures=[], judgments=[], native=native
            )
        with engine.connect() as conn:
            left[native] = sorted(conn.execute(sa.select(t.failures.c.log_id, t.failures.c.judge_model)).all())
        engine.dispose()
    assert left[None] == left[False]
    # rows 2 and 4 of KEY are scored now; 5 is scored for another judge only; 6 is not in the chunk
    assert ("2", "judge-a") not in left[None] and ("4", "judge-a") not in left[None]
    assert ("5", "judge-a") in left[None] and ("6", "judge-a") in left[None] and ("2", "judge-b") in left[None]
