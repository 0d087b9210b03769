"""score_partition / plan_chunks / score_chunk / finalize_run on real SQLite files and a real
PostgreSQL: chunking, idempotent re-runs, crash and resume, bad rows, the judgment cache, budgets."""

from __future__ import annotations

import json
import sqlite3
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from ctxprec_ops.config import Settings
from ctxprec_ops.pipeline import (
    Chunk,
    PipelineConfig,
    ProgressEvent,
    finalize_run,
    plan_chunks,
    score_chunk,
    score_partition,
)
from ctxprec_ops.scoring.formula import contextual_precision
from ctxprec_ops.warehouse.engine import get_engine
from ctxprec_ops.warehouse.source import PartitionKeyError
from tests.fixtures.warehouse_data import (
    CountingJudge,
    JudgeCrash,
    all_ids,
    count,
    create_logs,
    day_rows,
    ids_in,
    log_row,
)

DAY = "2026-11-28"


@pytest.fixture
def url(tmp_path):
    return f"sqlite:///{tmp_path / 'warehouse.db'}"


def scores_by_id(engine) -> dict[str, sa.Row]:
    with engine.connect() as conn:
        return {r.log_id: r for r in conn.execute(sa.text("SELECT * FROM ctxprec_scores"))}


def test_chunk_size_3_on_10_rows_scores_every_row_in_4_chunks(url):
    engine = get_engine(url)
    rows = day_rows(10) + day_rows(2, day="2026-11-29", start_id=100)
    create_logs(engine, rows)
    cfg = PipelineConfig(warehouse=url, chunk_size=3)
    events: list[ProgressEvent] = []
    summary = score_partition(cfg, DAY, progress=events.append)

    assert [c.rows for c in plan_chunks(cfg, DAY)] == [3, 3, 3, 1]
    assert (summary.rows_total, summary.rows_scored, summary.rows_failed) == (10, 10, 0)
    assert summary.status == "succeeded" and summary.completed
    assert ids_in(engine, "ctxprec_scores") == all_ids(rows[:10])
    assert [e.kind for e in events].count("chunk_done") == 4
    assert events[0].kind == "planned" and events[0].total == 10
    assert events[-1].kind == "finished" and events[-1].done == 10
    done = [e.done for e in events if e.kind in ("rows_done", "chunk_done")]
    assert done == sorted(done) and done[-1] == 10

    got = scores_by_id(engine)
    with engine.connect() as conn:
        run = conn.execute(sa.text("SELECT * FROM ctxprec_runs")).one()
    assert run.run_id == summary.run_id and run.status == "succeeded" and run.rows_total == 10
    values = [r.score for r in got.values()]
    assert run.mean_score == pytest.approx(sum(values) / len(values))
    # every score is the metric applied to its stored verdicts, unrounded
    for r in got.values():
        verdicts = json.loads(r.verdicts) if isinstance(r.verdicts, str) else r.verdicts
        assert [v["node"] for v in verdicts] == [1, 2, 3]
        assert r.score == contextual_precision([v["relevant"] for v in verdicts])
        assert r.partition_key == DAY and r.judge_model == "lexical" and r.run_id == summary.run_id


def test_rerun_is_idempotent_and_calls_no_judge(url):
    engine = get_engine(url)
    create_logs(engine, day_rows(7))
    judge = CountingJudge()
    first = score_partition(PipelineConfig(warehouse=url, judge=judge, chunk_size=3), DAY)
    assert judge.calls == 7 and first.rows_scored == 7 and first.rows_cached == 0
    before = scores_by_id(engine)

    again = CountingJudge()
    second = score_partition(PipelineConfig(warehouse=url, judge=again, chunk_size=3), DAY)
    assert again.calls == 0
    assert (second.rows_scored, second.rows_cached, second.rows_failed) == (7, 7, 0)
    assert second.mean_score == first.mean_score and second.run_id != first.run_id
    assert count(engine, "ctxprec_scores") == 7
    assert scores_by_id(engine) == before  # untouched, not rewritten
    assert count(engine, "ctxprec_runs") == 2


def test_judgment_cache_answers_repeated_nodes_without_calls(url):
    engine = get_engine(url)
    rows = day_rows(4)
    # the same retrievals logged again the next day, under new ids
    repeat = [dict(r, id=r["id"] + 100, event_time=r["event_time"].replace(day=29)) for r in rows]
    create_logs(engine, rows + repeat)
    judge = CountingJudge()
    score_partition(PipelineConfig(warehouse=url, judge=judge), DAY)
    assert judge.calls == 4
    assert count(engine, "ctxprec_judgments") == 9  # 4 rows x 2 row-specific nodes + 1 shared node

    cached = CountingJudge()
    summary = score_partition(PipelineConfig(warehouse=url, judge=cached), "2026-11-29")
    assert cached.calls == 0
    assert (summary.rows_scored, summary.rows_cached) == (4, 4)
    got = scores_by_id(engine)
    for r in rows:
        assert got[str(r["id"] + 100)].score == got[str(r["id"])].score
        assert got[str(r["id"] + 100)].judge_calls == 0

    # a different judge model is a different cache: it is asked
    other = CountingJudge(name="other-judge")
    score_partition(PipelineConfig(warehouse=url, judge=other), "2026-11-29")
    assert other.calls == 4
    assert count(engine, "ctxprec_scores") == 12


def test_crash_between_chunks_then_resume_loses_and_duplicates_nothing(url):
    engine = get_engine(url)
    rows = day_rows(10)
    create_logs(engine, rows)
    crashing = CountingJudge(crash_on_call=5)  # chunk 0 = calls 1-3, crash inside chunk 1
    cfg = PipelineConfig(warehouse=url, judge=crashing, chunk_size=3, concurrency=1)
    with pytest.raises(JudgeCrash):
        score_partition(cfg, DAY, run_id="crashed-run")
    assert ids_in(engine, "ctxprec_scores") == all_ids(rows[:3])  # chunk 0 committed, chunk 1 not
    assert count(engine, "ctxprec_failures") == 0
    with engine.connect() as conn:
        status, message = conn.execute(
            sa.text("SELECT status, error_message FROM ctxprec_runs WHERE run_id = 'crashed-run'")
        ).one()
    assert status == "failed" and "JudgeCrash" in message

    # row 4 (call 4) was judged before the crash: its verdicts are committed as they arrive, at
    # once or (an instant judge: commits are slow next to its calls) within a short interval
    judged = count(engine, "ctxprec_judgments")
    assert judged in (3 * 2 + 1, 4 * 2 + 1)
    row_4_kept = judged == 4 * 2 + 1

    resumed_judge = CountingJudge()
    summary = score_partition(PipelineConfig(warehouse=url, judge=resumed_judge, chunk_size=3), DAY)
    assert resumed_judge.calls == 7 - row_4_kept  # only what was missing: rows 4-10, or 5-10
    assert summary.status == "succeeded" and summary.rows_scored == 10 and summary.rows_cached == 3 + row_4_kept
    assert ids_in(engine, "ctxprec_scores") == all_ids(rows)
    assert count(engine, "ctxprec_failures") == 0


def test_chunks_scored_separately_then_finalized_like_airflow(url):
    engine = get_engine(url)
    rows = day_rows(8, start_id=1000)
    create_logs(engine, rows)
    judge = CountingJudge()
    cfg = PipelineConfig(warehouse=url, judge=judge, chunk_size=3)
    chunks = [json.loads(json.dumps(c.to_dict())) for c in plan_chunks(cfg, DAY)]  # through XCom
    results = [score_chunk(cfg, Chunk.from_dict(c), run_id="airflow-run").to_dict() for c in chunks]
    assert [r["rows_scored"] for r in results] == [3, 3, 2]
    summary = finalize_run(cfg, DAY, run_id="airflow-run", chunk_results=results)
    assert summary.rows_scored == 8 and summary.status == "succeeded" and summary.judge_calls == 8
    # finalize without chunk results takes spend from the run's scores
    again = finalize_run(cfg, DAY, run_id="airflow-run")
    assert again.judge_calls == 8 and again.rows_cached == 0
    assert count(engine, "ctxprec_runs") == 1  # upserted, one row per run


def test_chunks_scored_concurrently_on_sqlite(url):
    engine = get_engine(url)
    rows = day_rows(24)
    create_logs(engine, rows)
    cfg = PipelineConfig(warehouse=url, judge=CountingJudge(), chunk_size=4)
    chunks = plan_chunks(cfg, DAY)
    with ThreadPoolExecutor(max_workers=4) as pool:
        # every chunk twice, at the same time: upserts make the duplicates harmless
        results = list(pool.map(lambda c: score_chunk(cfg, c, run_id="par"), chunks + chunks))
    assert sum(r.rows_total for r in results) == 48
    assert ids_in(engine, "ctxprec_scores") == all_ids(rows)
    assert count(engine, "ctxprec_failures") == 0


# -- bad rows -------------------------------------------------------------------------------

BAD_ROWS = {
    # id: (column values, words the failure message must contain)
    101: ({"retrieval_context": None}, ["retrieval_context", "NULL"]),
    102: ({"retrieval_context": ""}, ["retrieval_context", "empty"]),
    103: ({"retrieval_context": "[]"}, ["retrieval_context", "empty"]),
    104: ({"retrieval_context": "not json at all"}, ["retrieval_context", "not valid JSON"]),
    105: ({"retrieval_context": '{"node": "x"}'}, ["retrieval_context", "array", "object"]),
    106: ({"retrieval_context": '["fine", 3]'}, ["retrieval_context[1]", "string", "number"]),
    107: ({"expected_output": None}, ["expected_output", "NULL"]),
    108: ({"expected_output": "   "}, ["expected_output", "empty"]),
    109: ({"input": ""}, ["input", "empty"]),
    110: ({"retrieval_context": json.dumps(["x" * 100_001])}, ["retrieval_context[0]", "too long", "100,000"]),
    111: ({"retrieval_context": json.dumps(["n"] * 201)}, ["retrieval_context", "201 nodes", "limit 200"]),
    112: ({"input": "What\x00 is this?"}, ["input", "NUL"]),
    113: ({"expected_output": "Paris is the capital of France. " * 3200}, ["expected_output", "too long"]),
}


def test_bad_rows_become_failures_with_clear_messages_and_good_rows_score(tmp_path):
    path = tmp_path / "warehouse.db"
    url = f"sqlite:///{path}"
    engine = get_engine(url)
    good = day_rows(5)
    create_logs(
        engine,
        [log_row(r["id"], r["event_time"], context=r["retrieval_context"], as_text=True) for r in good],
        context_type=sa.Text,
    )
    with engine.begin() as conn:
        for rid, (values, _) in BAD_ROWS.items():
            row = log_row(rid, datetime(2026, 11, 28, 9), as_text=True)
            row.update(values)
            conn.execute(
                sa.text(
                    "INSERT INTO retrieval_logs VALUES (:id, :event_time, :input, :actual_output, :expected_output, "
                    ":retrieval_context)"
                ),
                row,
            )
    raw = sqlite3.connect(path)  # bytes that are not UTF-8, stored as TEXT
    raw.execute(
        "INSERT INTO retrieval_logs VALUES (120, '2026-11-28 10:00:00', CAST(x'5061726973ff' AS TEXT), "
        "'a', 'Paris is the capital of France.', '[\"Paris\"]')"
    )
    raw.commit()
    raw.close()

    judge = CountingJudge()
    summary = score_partition(PipelineConfig(warehouse=url, judge=judge, chunk_size=4), DAY)
    assert judge.calls == 5  # bad rows never reach the judge
    assert summary.rows_total == 5 + len(BAD_ROWS) + 1 and summary.rows_scored == 5
    assert summary.status == "succeeded" and summary.completed  # bad input is recorded, not retried
    assert summary.failures_by_type == {"invalid_input": len(BAD_ROWS) + 1}
    with engine.connect() as conn:
        failures = {r.log_id: r for r in conn.execute(sa.text("SELECT * FROM ctxprec_failures"))}
    assert ids_in(engine, "ctxprec_scores") == all_ids(good)
    assert set(failures) == {str(i) for i in [*BAD_ROWS, 120]}
    for rid, (_, words) in BAD_ROWS.items():
        f = failures[str(rid)]
        assert f.error_type == "invalid_input"
        for w in words:
            assert w in f.error_message, (rid, f.error_message)
    assert "input" in failures["120"].error_message and "UTF-8" in failures["120"].error_message

    # the data gets fixed: the next run scores the row and removes its failure record
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "UPDATE retrieval_logs SET retrieval_context = '[\"Paris is the capital of France.\"]' WHERE id = 104"
        )
    fixed = score_partition(PipelineConfig(warehouse=url, judge=CountingJudge(), chunk_size=4), DAY)
    assert fixed.rows_scored == 6 and fixed.rows_failed == len(BAD_ROWS)
    assert "104" in ids_in(engine, "ctxprec_scores") and "104" not in ids_in(engine, "ctxprec_failures")
    scored, failed = set(ids_in(engine, "ctxprec_scores")), set(ids_in(engine, "ctxprec_failures"))
    assert not scored & failed


def test_budget_caps_spend_and_a_later_run_picks_up_the_rest(url):
    engine = get_engine(url)
    create_logs(engine, day_rows(6))
    pricey = CountingJudge(price=(1000.0, 1000.0))  # $ per million tokens: ~ $0.5 a call
    cfg = PipelineConfig(warehouse=url, judge=pricey, concurrency=1, max_cost=1.2, chunk_size=4)
    summary = score_partition(cfg, DAY)
    assert 0 < pricey.calls < 6
    assert summary.status == "budget_exhausted" and not summary.completed
    assert summary.rows_scored == pricey.calls
    assert summary.failures_by_type == {"budget_exhausted": 6 - pricey.calls}
    with engine.connect() as conn:
        msg = conn.exec_driver_sql("SELECT error_message FROM ctxprec_failures LIMIT 1").scalar_one()
    assert "budget" in msg

    rest = CountingJudge(price=(1000.0, 1000.0))
    after = score_partition(PipelineConfig(warehouse=url, judge=rest), DAY)
    assert rest.calls == 6 - pricey.calls and after.status == "succeeded"
    assert count(engine, "ctxprec_failures") == 0


def test_judge_failures_are_recorded_and_the_run_is_failed(url):
    engine = get_engine(url)
    create_logs(engine, day_rows(3))

    class Broken(CountingJudge):
        def generate(self, prompt, schema=None):
            super().generate(prompt, schema)
            return "I think node 1 is good"  # never valid, even when re-asked

    summary = score_partition(PipelineConfig(warehouse=url, judge=Broken(), max_retries=0), DAY)
    assert summary.status == "failed" and not summary.completed and summary.rows_failed == 3
    assert summary.failures_by_type == {"judge_answer_invalid": 3}
    with engine.connect() as conn:
        attempts = conn.exec_driver_sql("SELECT min(attempts) FROM ctxprec_failures").scalar_one()
    assert attempts >= 1


def test_partition_key_and_config_errors(url):
    create_logs(get_engine(url), day_rows(1))
    with pytest.raises(PartitionKeyError, match="YYYY-MM-DD"):
        score_partition(PipelineConfig(warehouse=url), "28/11/2026")
    with pytest.raises(ValueError):
        PipelineConfig(warehouse=url, chunk_size=0)
    with pytest.raises(ValueError):
        PipelineConfig(warehouse=url, metric="precision")  # type: ignore[arg-type]


def test_the_settings_pipeline_config_reads_the_environment():
    env = {
        "CTXPREC_WAREHOUSE_URL": "sqlite:///x.db",
        "CTXPREC_CHUNK_SIZE": "7",
        "CTXPREC_THRESHOLD": "0.7",
        "CTXPREC_CONVERSATION_TABLE": "chats",
        "CTXPREC_SOURCE_TABLE": "logs",
    }
    s = Settings.from_env(env)
    cfg = s.pipeline_config(concurrency=3, max_cost=None)
    assert (cfg.warehouse, cfg.chunk_size, cfg.threshold, cfg.concurrency, cfg.table_name) == (
        "sqlite:///x.db",
        7,
        0.7,
        3,
        "logs",
    )
    turn = s.pipeline_config(metric="turn_contextual_precision")
    assert turn.table_name == "chats"
    with pytest.raises(TypeError):
        s.pipeline_config(chunksize=3)


# -- PostgreSQL -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "id_type,context_type,aware",
    [(sa.Integer, "jsonb", True), (sa.String, sa.Text, False), (sa.BigInteger, sa.JSON, False)],
)
def test_postgres_end_to_end(pg_url, id_type, context_type, aware):
    from sqlalchemy.dialects.postgresql import JSONB

    engine = get_engine(pg_url)
    ctype = JSONB if context_type == "jsonb" else context_type
    rows = day_rows(7)
    if id_type is sa.String:
        rows = [dict(r, id=f"log-{r['id']}") for r in rows]
    if ctype is sa.Text:
        rows = [dict(r, retrieval_context=json.dumps(r["retrieval_context"])) for r in rows]
    if aware:
        rows = [dict(r, event_time=r["event_time"].replace(tzinfo=UTC)) for r in rows]
    bad = log_row(rows[-1]["id"] + 1 if id_type is not sa.String else "log-zz", rows[0]["event_time"], context=None)
    create_logs(engine, rows + [bad], id_type=id_type, context_type=ctype, time_type=sa.DateTime(timezone=aware))

    judge = CountingJudge()
    summary = score_partition(PipelineConfig(warehouse=pg_url, judge=judge, chunk_size=3), DAY)
    assert judge.calls == 7
    assert (summary.rows_total, summary.rows_scored, summary.rows_failed) == (8, 7, 1)
    assert ids_in(engine, "ctxprec_scores") == all_ids(rows)
    again = CountingJudge()
    rerun = score_partition(PipelineConfig(warehouse=pg_url, judge=again, chunk_size=3), DAY)
    assert again.calls == 0 and rerun.rows_cached == 7
    assert count(engine, "ctxprec_scores") == 7 and count(engine, "ctxprec_failures") == 1
    with engine.connect() as conn:
        verdicts = conn.exec_driver_sql("SELECT verdicts FROM ctxprec_scores LIMIT 1").scalar_one()
        kind = conn.exec_driver_sql("SELECT jsonb_typeof(verdicts) FROM ctxprec_scores LIMIT 1").scalar_one()
    assert kind == "array" and len(verdicts) == 3


def test_warehouse_password_never_reaches_logs_or_tables(pg_server, caplog):
    import logging

    db = pg_server.create_database()
    try:
        # the test server trusts local connections, so any password is accepted (and must be hidden)
        url = pg_server.url(db).replace("postgres@", "postgres:pg-s3cret-pw@")
        engine = get_engine(url)
        create_logs(engine, day_rows(2))
        with caplog.at_level(logging.DEBUG, logger="ctxprec_ops"):
            summary = score_partition(PipelineConfig(warehouse=url), DAY)
        assert summary.rows_scored == 2
        assert "scoring contextual_precision partition" in caplog.text
        assert "pg-s3cret-pw" not in caplog.text and "***" in caplog.text
        with engine.connect() as conn:
            dump = " ".join(
                str(v)
                for t in ("ctxprec_runs", "ctxprec_scores")
                for row in conn.exec_driver_sql(f"SELECT * FROM {t}")
                for v in row
            )
        assert "pg-s3cret-pw" not in dump
    finally:
        pg_server.drop_database(db)


def test_worker_processes_score_every_chunk_once(url):
    from ctxprec_ops.pipeline.workers import can_fork_out as _can_fork_out

    engine = get_engine(url)
    rows = day_rows(40)
    create_logs(engine, rows)
    cfg = PipelineConfig(warehouse=url, judge="lexical", chunk_size=5)
    assert _can_fork_out(cfg)
    assert not _can_fork_out(PipelineConfig(warehouse=url, judge=CountingJudge()))  # holds a lock: not picklable
    assert not _can_fork_out(PipelineConfig(warehouse=url, max_cost=1.0))
    events: list[ProgressEvent] = []
    summary = score_partition(cfg, DAY, workers=2, progress=events.append)
    assert (summary.rows_total, summary.rows_scored, summary.status) == (40, 40, "succeeded")
    assert ids_in(engine, "ctxprec_scores") == all_ids(rows)
    done = [e.done for e in events if e.kind == "chunk_done"]
    assert len(done) == 8 and done[-1] == 40
    sequential = score_partition(PipelineConfig(warehouse=url, judge="lexical", chunk_size=5), DAY)
    assert sequential.mean_score == summary.mean_score and sequential.rows_cached == 40


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_run_figures_are_those_of_the_stored_scores(request, tmp_path, backend):
    """finalize_run streams the partition's scores in sorted batches: its figures equal numpy's on
    the whole sample, and the stream holds every score once, ascending, in batches of the size asked."""
    import numpy as np
    from scipy import stats

    from ctxprec_ops.warehouse.schema import output_tables
    from ctxprec_ops.warehouse.scoring_key import ScoringKey
    from ctxprec_ops.warehouse.store import partition_scores

    url = f"sqlite:///{tmp_path / 'wh.db'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    engine = get_engine(url)
    from tests.helpers.planted import planted_rows

    create_logs(engine, planted_rows(23)[0])
    summary = score_partition(PipelineConfig(warehouse=url, chunk_size=4), DAY)
    with engine.connect() as conn:
        stored = conn.execute(
            sa.text("SELECT score, success FROM ctxprec_scores WHERE partition_key = :p"), {"p": DAY}
        ).all()
        key = ScoringKey("contextual_precision", summary.judge_model, summary.prompt_version)
        streamed = list(partition_scores(conn, output_tables(), key, DAY, batch=5))
    arr = np.array([r.score for r in stored])
    assert len(stored) == 23 and len(set(arr.tolist())) > 2  # varied scores
    assert [b.size for b in streamed] == [5, 5, 5, 5, 3]
    assert np.concatenate(streamed).tolist() == sorted(arr.tolist())
    assert summary.mean_score == pytest.approx(arr.mean(), abs=1e-12)
    assert summary.median_score == np.median(arr)
    assert summary.pass_rate == sum(r.success for r in stored) / 23
    half = stats.t.ppf(0.975, 22) * arr.std(ddof=1) / np.sqrt(23)
    assert summary.ci_low == pytest.approx(max(0.0, arr.mean() - half), abs=1e-9)
    assert summary.ci_high == pytest.approx(min(1.0, arr.mean() + half), abs=1e-9)
