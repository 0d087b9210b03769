"""Output tables and idempotent upserts (native ON CONFLICT and the generic path)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from ctxprec_ops.warehouse.engine import get_engine, write_transaction
from ctxprec_ops.warehouse.schema import ensure_output_tables
from ctxprec_ops.warehouse.upsert import insert_ignore, upsert

NOW = datetime(2026, 11, 29, 1, 2, 3, tzinfo=UTC)
DESIGN_COLUMNS = {
    "ctxprec_scores": [
        "log_id",
        "partition_key",
        "metric",
        "score",
        "success",
        "threshold",
        "verdicts",
        "reason",
        "judge_model",
        "prompt_version",
        "prompt_tokens",
        "completion_tokens",
        "cost",
        "run_id",
        "scored_at",
    ],
    "ctxprec_failures": [
        "log_id",
        "partition_key",
        "metric",
        "error_type",
        "error_message",
        "attempts",
        "run_id",
        "failed_at",
    ],
    "ctxprec_runs": [
        "run_id",
        "partition_key",
        "metric",
        "status",
        "rows_total",
        "rows_scored",
        "rows_cached",
        "rows_failed",
        "mean_score",
        "median_score",
        "pass_rate",
        "ci_low",
        "ci_high",
        "prompt_tokens",
        "completion_tokens",
        "cost",
        "judge_model",
        "prompt_version",
        "started_at",
        "finished_at",
    ],
    "ctxprec_judgments": ["key", "judge_model", "prompt_version", "relevant", "reason", "created_at"],
}


def score_row(log_id: str, score: float, run: str = "r1", pv: str = "v1") -> dict:
    return {
        "log_id": log_id,
        "partition_key": "2026-11-28",
        "metric": "contextual_precision",
        "source_table": "retrieval_logs",
        "mapping": "default",
        "score": score,
        "success": score >= 0.5,
        "threshold": 0.5,
        "verdicts": [{"node": 1, "relevant": True, "reason": "ok"}],
        "reason": "r",
        "judge_model": "m",
        "prompt_version": pv,
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "cost": 1e-6,
        "run_id": run,
        "scored_at": NOW,
    }


@pytest.fixture(params=["sqlite", "postgresql"])
def engine(request, tmp_path):
    if request.param == "sqlite":
        return get_engine(f"sqlite:///{tmp_path / 'wh.db'}")
    return get_engine(request.getfixturevalue("pg_url"))


def test_output_tables_have_the_design_columns(engine):
    ensure_output_tables(engine)
    ensure_output_tables(engine)  # idempotent
    insp = sa.inspect(engine)
    for table, cols in DESIGN_COLUMNS.items():
        have = [c["name"] for c in insp.get_columns(table)]
        assert set(cols) <= set(have), (table, set(cols) - set(have))
    pk = insp.get_pk_constraint("ctxprec_scores")["constrained_columns"]
    assert pk == ["log_id", "metric", "judge_model", "prompt_version", "source_table", "mapping"]
    score_type = {c["name"]: c["type"] for c in insp.get_columns("ctxprec_scores")}["score"]
    if engine.dialect.name == "postgresql":
        assert isinstance(score_type, sa.Float) and "DOUBLE" in str(score_type).upper()


@pytest.mark.parametrize("native", [None, False])
def test_upsert_is_idempotent_and_overwrites(engine, native):
    t = ensure_output_tables(engine)
    exact = 1 / 3  # stored unrounded
    with write_transaction(engine) as conn:
        upsert(conn, t.scores, [score_row("1", exact), score_row("2", 0.25)], native=native)
    with write_transaction(engine) as conn:  # re-run: same keys, new values, one new row
        upsert(conn, t.scores, [score_row("1", 0.75, run="r2"), score_row("3", 1.0, run="r2")], native=native)
    with write_transaction(engine) as conn:  # duplicates inside one batch: last wins
        upsert(conn, t.scores, [score_row("2", 0.1, run="r3"), score_row("2", exact, run="r3")], native=native)
    with engine.connect() as conn:
        got = {r.log_id: r for r in conn.execute(sa.select(t.scores))}
    assert sorted(got) == ["1", "2", "3"]
    assert got["1"].score == 0.75 and got["1"].run_id == "r2"
    assert got["2"].score == exact and got["2"].run_id == "r3"
    assert got["1"].verdicts == [{"node": 1, "relevant": True, "reason": "ok"}]
    # a different prompt version is a different row
    with write_transaction(engine) as conn:
        upsert(conn, t.scores, [score_row("1", 0.5, pv="v2")], native=native)
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(t.scores)).scalar_one() == 4


@pytest.mark.parametrize("native", [None, False])
def test_insert_ignore_keeps_the_first_judgment(engine, native):
    t = ensure_output_tables(engine)
    row = {
        "key": b"k" * 23,
        "judge_model": "m",
        "prompt_version": "v",
        "relevant": True,
        "reason": "first",
        "created_at": NOW,
    }
    with write_transaction(engine) as conn:
        insert_ignore(conn, t.judgments, [row, dict(row, reason="dup in batch")], native=native)
    with write_transaction(engine) as conn:
        insert_ignore(conn, t.judgments, [dict(row, reason="second", relevant=False)], native=native)
    with engine.connect() as conn:
        rows = conn.execute(sa.select(t.judgments.c.reason, t.judgments.c.relevant)).all()
    assert len(rows) == 1 and rows[0].relevant is True


def test_failed_transaction_writes_nothing(engine):
    t = ensure_output_tables(engine)
    with pytest.raises(RuntimeError):
        with write_transaction(engine) as conn:
            upsert(conn, t.scores, [score_row("1", 0.5)])
            raise RuntimeError("crash mid-chunk")
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(t.scores)).scalar_one() == 0


def test_each_row_keeps_its_own_value_when_values_are_equal_but_not_identical(engine):
    """Bind values are processed per row unless every row holds the very same object:
    ``1 == True == 1.0`` must not make a JSON column store one of them for all."""
    t = ensure_output_tables(engine)
    shared = [{"node": 1, "relevant": True, "reason": "same list object in every row"}]
    verdicts = {"a": [1], "b": [True], "c": [1.0]}
    rows = [dict(score_row(k, 0.5), verdicts=v) for k, v in verdicts.items()]
    rows += [dict(score_row(f"s{i}", 0.5), verdicts=shared) for i in range(3)]
    with write_transaction(engine) as conn:
        upsert(conn, t.scores, rows)
    with engine.connect() as conn:
        raw = dict(conn.execute(sa.select(t.scores.c.log_id, sa.cast(t.scores.c.verdicts, sa.Text))).all())
        when = set(conn.execute(sa.select(t.scores.c.scored_at)).scalars())
    assert [raw[k].replace(" ", "") for k in "abc"] == ["[1]", "[true]", "[1.0]"]
    assert all('"same list object in every row"' in raw[f"s{i}"] for i in range(3))
    [stored] = when
    assert (stored if stored.tzinfo else stored.replace(tzinfo=UTC)) == NOW
