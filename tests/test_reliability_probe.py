"""Reliability: regressions for what an adversarial probe found (issue 19).

Each test names the point it proves; docs/reliability.md lists them with their guarantees.
"""

from __future__ import annotations

import json
from datetime import datetime

import pytest
import sqlalchemy as sa

from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import CountingJudge, create_logs, day_rows, log_row, query

DAY = "2026-11-28"
DEEP = "[" * 5000 + "]" * 5000


@pytest.fixture(params=["sqlite", "postgresql"])
def warehouse_url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'wh.db'}"
    return request.getfixturevalue("pg_url")


# -- 1: one row's content never aborts its partition ------------------------------------------


def test_deeply_nested_json_is_that_rows_invalid_input_not_the_partitions_abort(warehouse_url):
    engine = get_engine(warehouse_url)
    rows = day_rows(3, as_text=True) + [
        log_row(4, datetime(2026, 11, 28, 5), context=DEEP),
        log_row(5, datetime(2026, 11, 28, 6), context='["ok", ' + DEEP + "]"),
    ]
    create_logs(engine, rows, context_type=sa.Text)
    judge = CountingJudge()
    summary = score_partition(PipelineConfig(warehouse=warehouse_url, judge=judge, chunk_size=2), DAY)
    assert (summary.rows_total, summary.rows_scored, summary.rows_failed) == (5, 3, 2)
    assert summary.completed
    failed = query(warehouse_url, "SELECT log_id, error_type, error_message FROM ctxprec_failures ORDER BY log_id")
    assert [(f[0], f[1]) for f in failed] == [("4", "invalid_input"), ("5", "invalid_input")]
    for f in failed:
        assert "retrieval_context" in f[2] and "nested too deeply" in f[2] and "\n" not in f[2]


def test_any_exception_while_reading_a_row_becomes_its_invalid_input():
    from ctxprec_ops.errors import InvalidTestCaseError
    from ctxprec_ops.pipeline.rows import case_or_failure

    def explode(row):
        raise MemoryError("cannot allocate\nsecond line")

    with pytest.raises(InvalidTestCaseError) as info:
        case_or_failure(explode, {"id": 1})
    assert str(info.value) == "row could not be read: MemoryError: cannot allocate"


# -- 3: a text id in an INTEGER column ----------------------------------------------------------


@pytest.mark.parametrize("chunk_size", [1, 2, 10])
def test_a_text_id_in_an_integer_column_is_that_rows_failure_not_an_aborted_run(tmp_path, chunk_size):
    """SQLite keeps 'abc', '7 apples' and 3.5 as they are in an INTEGER column: the run scores the
    integer ids and records one invalid_input failure per odd id."""
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    rows = day_rows(3, as_text=True)
    odd = [dict(rows[0], id=v) for v in ("abc", "7 apples", 3.5)]
    with engine.begin() as conn:  # raw SQL: no INTEGER PRIMARY KEY (a rowid alias refuses text)
        conn.exec_driver_sql(
            "CREATE TABLE retrieval_logs (id INTEGER, event_time TEXT, input TEXT, "
            "actual_output TEXT, expected_output TEXT, retrieval_context TEXT)"
        )
        for r in rows + odd:
            conn.exec_driver_sql(
                "INSERT INTO retrieval_logs VALUES (?, ?, ?, ?, ?, ?)",
                (
                    r["id"],
                    str(r["event_time"]),
                    r["input"],
                    r["actual_output"],
                    r["expected_output"],
                    r["retrieval_context"],
                ),
            )
    summary = score_partition(PipelineConfig(warehouse=url, judge=CountingJudge(), chunk_size=chunk_size), DAY)
    assert (summary.rows_total, summary.rows_scored, summary.rows_failed) == (6, 3, 3)
    assert summary.status == "succeeded" and summary.completed
    failed = dict(query(url, "SELECT log_id, error_message FROM ctxprec_failures"))
    assert set(failed) == {"abc", "7 apples", "3.5"}
    assert all("'id' is INTEGER" in m for m in failed.values()), failed
    assert sorted(r[0] for r in query(url, "SELECT log_id FROM ctxprec_scores")) == ["1", "2", "3"]


def test_chunk_bounds_from_json_keep_ids_that_are_not_canonical_integers(tmp_path):
    from ctxprec_ops.warehouse.source import reflect_source

    url = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(get_engine(url), [])
    src = reflect_source(get_engine(url), "retrieval_logs", None, {"id": "id", "event_time": "event_time"})
    assert [src.coerce_id(v) for v in ("42", "-7", " 7", "abc", "07", 3.5)] == [42, -7, " 7", "abc", "07", 3.5]


# -- 4: event_time forms, rows outside every partition -----------------------------------------

#: (stored value, partition it belongs to or None)
EVENT_TIMES = [
    ("2026-11-28T10:00:00+0000", DAY),
    ("2026-11-28 10:00:00 UTC", DAY),
    (" 2026-11-28 10:00:00", DAY),
    ("2026-11-28T23:30:00-0500", "2026-11-29"),
    ("2026-11-28t10:00:00Z", None),  # lower-case t: SQLite reads no such form
    (1764324000, "2025-11-28"),  # epoch seconds, number
    ("1795860000", DAY),  # epoch seconds as text (2026-11-28 10:00 UTC)
    (1795860000123, DAY),  # epoch milliseconds
    ("28/11/2026 10:00", None),  # day or month first: unknowable
    (None, None),
    ("garbage", None),
]


@pytest.mark.parametrize("declared", ["TEXT", "DATETIME", "TIMESTAMP", ""])
def test_sqlite_event_time_forms_are_read_or_counted_as_outside_every_partition(tmp_path, declared, caplog):
    import logging

    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    good = day_rows(1, as_text=True)[0]
    with engine.begin() as conn:
        conn.exec_driver_sql(
            f"CREATE TABLE retrieval_logs (id INTEGER PRIMARY KEY, event_time {declared}, "
            "input TEXT, actual_output TEXT, expected_output TEXT, retrieval_context TEXT)"
        )
        conn.exec_driver_sql("CREATE INDEX ix_time ON retrieval_logs (event_time)")
        for i, (value, _) in enumerate(EVENT_TIMES, start=1):
            conn.exec_driver_sql(
                "INSERT INTO retrieval_logs VALUES (?, ?, ?, ?, ?, ?)",
                (i, value, good["input"], good["actual_output"], good["expected_output"], good["retrieval_context"]),
            )
    want: dict[str | None, set[str]] = {}
    for i, (_, day) in enumerate(EVENT_TIMES, start=1):
        want.setdefault(day, set()).add(str(i))
    outside = len(want[None])
    config = PipelineConfig(warehouse=url, judge=CountingJudge(), chunk_size=2)
    for day in sorted(d for d in want if d is not None):
        with caplog.at_level(logging.WARNING, logger="ctxprec_ops"):
            summary = score_partition(config, day)
        assert summary.rows_total == summary.rows_scored == len(want[day]), day
        assert summary.rows_unpartitioned == outside
        got = {r[0] for r in query(url, "SELECT log_id FROM ctxprec_scores WHERE partition_key = :p", p=day)}
        assert got == want[day], day
    assert f"{outside} row(s) belong to no partition" in caplog.text
    # the run rows record the count too; no row is in two partitions, every row is accounted for
    assert {r[0] for r in query(url, "SELECT rows_unpartitioned FROM ctxprec_runs")} == {outside}
    scored = [r[0] for r in query(url, "SELECT log_id FROM ctxprec_scores")]
    assert len(scored) == len(set(scored)) == len(EVENT_TIMES) - outside


def test_sqlite_partition_filter_still_uses_the_event_time_index(tmp_path):
    from ctxprec_ops.warehouse.source import Partition, reflect_source

    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    create_logs(engine, day_rows(3, as_text=True), time_type=sa.Text, context_type=sa.Text)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE INDEX ix_time ON retrieval_logs (event_time)")
    src = reflect_source(engine, "retrieval_logs", None, {"id": "id", "event_time": "event_time"})
    stmt = sa.select(sa.func.count()).select_from(src.table).where(src.partition_filter(Partition.of(DAY)))
    with engine.connect() as conn:
        sql = str(stmt.compile(engine, compile_kwargs={"literal_binds": True}))
        plan = " ".join(str(r[-1]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql))
        assert conn.execute(stmt).scalar_one() == 3
    # the table is searched through the index, never scanned (the reading of an unusual
    # event_time is a correlated subquery of constant rows: "SCAN (subquery-1)" is no table scan)
    assert "MULTI-INDEX OR" in plan and "ix_time" in plan and "SCAN retrieval_logs" not in plan, plan


def test_sqlite_partition_ids_are_read_without_a_scan_of_every_day_or_a_sort_of_the_day(tmp_path):
    """Planning finds one day's smallest and largest id in the event-time index, then reads the
    ids between them in order: in plain id order SQLite would rather walk the whole table (every
    row of every day) in rowid order, and sorting the day's ids would hold them all in memory.
    Rows of other days inside the day's id range are left out."""
    from ctxprec_ops.warehouse.engine import read_connection
    from ctxprec_ops.warehouse.source import Partition, iter_partition_ids, reflect_source

    engine = get_engine(f"sqlite:///{tmp_path / 'wh.db'}")
    days = [f"2026-11-{d:02d}" for d in range(1, 29)]
    rows = [r for k, d in enumerate(days) for r in day_rows(5, d, start_id=1 + 5 * k, as_text=True)]
    rows.reverse()  # inserted newest first
    for r in rows:  # the day's ids 1,000 - 1,008 (even); two rows of the day before in between
        r["id"] = 1_000 + 2 * (r["id"] - 136) if r["id"] > 135 else r["id"]
    rows += day_rows(2, "2026-11-27", start_id=1_003, as_text=True)[:1] + day_rows(
        1, "2026-11-27", start_id=1_005, as_text=True
    )
    create_logs(engine, rows, time_type=sa.Text, context_type=sa.Text)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE INDEX ix_time ON retrieval_logs (event_time)")
    src = reflect_source(engine, "retrieval_logs", None, {"id": "id", "event_time": "event_time"})
    statements: list[tuple[str, tuple]] = []
    sa.event.listen(
        engine, "before_cursor_execute", lambda _c, _cur, sql, params, *_a: statements.append((sql, params))
    )
    with read_connection(engine) as conn:
        ids = list(iter_partition_ids(conn, src, Partition.of(DAY)))
        assert list(iter_partition_ids(conn, src, Partition.of("2026-12-15"))) == []  # an empty day
    assert ids == [1_000, 1_002, 1_004, 1_006, 1_008]
    selects = [(sql, params) for sql, params in statements if sql.lstrip().upper().startswith("SELECT")]
    with engine.connect() as conn:
        plans = [
            " ".join(str(r[-1]) for r in conn.exec_driver_sql("EXPLAIN QUERY PLAN " + sql, params))
            for sql, params in selects
        ]
    assert any("ix_time" in p for p in plans) and any("INTEGER PRIMARY KEY" in p for p in plans), plans
    assert not any("SCAN retrieval_logs" in p or "TEMP B-TREE" in p for p in plans), plans
    # without an index on event_time every plan scans the table: once, in id order, as before
    with engine.begin() as conn:
        conn.exec_driver_sql("DROP INDEX ix_time")
    statements.clear()
    fresh = sa.create_engine(engine.url)  # reflection is cached per engine: see the table as it is now
    unindexed = reflect_source(fresh, "retrieval_logs", None, {"id": "id", "event_time": "event_time"})
    fresh.dispose()
    assert src.time_indexed and not unindexed.time_indexed
    with read_connection(engine) as conn:
        assert list(iter_partition_ids(conn, unindexed, Partition.of(DAY))) == ids
    assert len([sql for sql, _ in statements if sql.lstrip().upper().startswith("SELECT")]) == 1


def test_postgres_rows_with_a_null_event_time_are_counted_in_the_run(pg_url):
    engine = get_engine(pg_url)
    rows = day_rows(3) + [log_row(4, None), log_row(5, None)]
    create_logs(engine, rows)
    summary = score_partition(PipelineConfig(warehouse=pg_url, judge=CountingJudge()), DAY)
    assert (summary.rows_total, summary.rows_scored, summary.rows_unpartitioned) == (3, 3, 2)
    assert query(pg_url, "SELECT rows_unpartitioned, rows_without_id FROM ctxprec_runs") == [(2, 0)]


# -- 6: an empty 200 body is retried; a 400 gets a proper error type -----------------------------


def _openai_config(url: str, judge_server, **kw) -> PipelineConfig:
    return PipelineConfig(
        warehouse=url, judge="gpt-4o-mini", judge_base_url=judge_server.base_url, judge_api_key="sk-probe", **kw
    )


def test_an_empty_200_body_is_retried_and_exhausted_retries_are_judge_unavailable(judge_server, tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(get_engine(url), day_rows(2))
    judge_server.script(["empty_body", "empty_body"])  # the first two calls: retried, then fine
    summary = score_partition(_openai_config(url, judge_server, chunk_size=2, concurrency=1), DAY)
    assert summary.status == "succeeded" and summary.rows_scored == 2
    assert judge_server.outcomes["empty_body"] == 2

    judge_server.script(["empty_body"] * 3)
    with get_engine(url).begin() as conn:
        conn.exec_driver_sql("DELETE FROM ctxprec_scores WHERE log_id = '1'")
        conn.exec_driver_sql("DELETE FROM ctxprec_judgments")
    again = score_partition(_openai_config(url, judge_server, max_retries=2), DAY)
    assert again.failures_by_type == {"judge_unavailable": 1}
    ((attempts, message),) = query(url, "SELECT attempts, error_message FROM ctxprec_failures")
    assert attempts == 3 and "empty or unreadable body" in message


def test_an_http_400_is_judge_request_rejected_or_that_rows_invalid_input_and_not_retried(judge_server, tmp_path):
    from ctxprec_ops.pipeline.outcome import Outcome, decide

    url = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(get_engine(url), day_rows(1))
    judge_server.script(["bad_request"])  # "maximum context length" (code context_length_exceeded)
    summary = score_partition(_openai_config(url, judge_server), DAY)
    assert judge_server.calls == 1  # never retried: the endpoint would answer the same
    ((error_type, message),) = query(url, "SELECT error_type, error_message FROM ctxprec_failures")
    assert error_type == "invalid_input" and "HTTP 400" in message and "context length" in message
    assert decide(summary).outcome is Outcome.DONE

    # any other 400 (not about response_format or temperature): judge_request_rejected, not retried
    judge_server.reset()
    judge_server.bad_request = ("The prompt was rejected by the content filter.", "content_filter")
    judge_server.script(["bad_request"])
    with get_engine(url).begin() as conn:
        conn.exec_driver_sql("DELETE FROM ctxprec_failures")
    summary = score_partition(_openai_config(url, judge_server), DAY)
    assert judge_server.calls == 1
    ((error_type, message),) = query(url, "SELECT error_type, error_message FROM ctxprec_failures")
    assert error_type == "judge_request_rejected" and message == (
        "the judge endpoint refused the request (HTTP 400): The prompt was rejected by the content filter."
    )
    decision = decide(summary)
    assert decision.outcome is Outcome.FAIL and "judge_request_rejected: 1" in decision.reason


# -- 7: response size is bounded -----------------------------------------------------------------


@pytest.mark.parametrize("declared", [True, False], ids=["content-length", "chunked"])
def test_a_huge_judge_answer_is_refused_without_reading_it(judge_server, declared):
    """50 MB answers: refused from the Content-Length, or as soon as the body passes the limit
    (no length): the process never holds more than a piece over ``max_response_bytes``."""
    import resource

    from ctxprec_ops.judge.models.capped_http import JudgeResponseTooLargeError
    from ctxprec_ops.judge.models.openai_judge import OpenAIJudge

    judge_server.huge_bytes = 50_000_000
    judge_server.huge_chunked = not declared
    judge = OpenAIJudge("gpt-4o-mini", base_url=judge_server.base_url, api_key="sk-probe", max_response_bytes=100_000)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    for _ in range(3):
        judge_server.script(["huge"])
        with pytest.raises(JudgeResponseTooLargeError, match="over the limit of 100,000 bytes") as info:
            judge.generate("hello")
        assert info.value.error_type == "judge_answer_invalid"
    grew_mb = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) / 1024
    assert grew_mb < 20, grew_mb


def test_a_huge_answer_fails_that_row_once_and_the_others_score(judge_server, tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(get_engine(url), day_rows(3))
    judge_server.script(["huge"])
    summary = score_partition(_openai_config(url, judge_server, concurrency=1), DAY)
    assert (summary.rows_scored, summary.failures_by_type) == (2, {"judge_answer_invalid": 1})
    assert judge_server.calls == 3  # not retried
    ((message,),) = query(url, "SELECT error_message FROM ctxprec_failures")
    assert "over the limit of 1,048,576 bytes" in message


# -- 11: a judge name the tables cannot hold is refused before anything is spent ----------------


@pytest.mark.parametrize(
    "name, needle",
    [
        ("g" * 300, "300 characters long (limit 255)"),
        ("gpt 4o\nmini", "may only contain"),
        ("_gpt", "may only contain"),
    ],
)
def test_a_bad_judge_name_exits_2_before_any_call_or_write(warehouse_url, openai_env, capsys, name, needle):
    from ctxprec_ops.cli import main

    create_logs(get_engine(warehouse_url), day_rows(2))
    code = main(["score", "--warehouse", warehouse_url, "--partition", DAY, f"--judge={name}", "--quiet"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and err[0].startswith("ctxprec score: error:") and needle in err[0], err
    assert openai_env.calls == 0
    assert "ctxprec_runs" not in sa.inspect(get_engine(warehouse_url)).get_table_names()


def test_a_custom_judge_whose_name_cannot_be_stored_is_refused_before_judging(warehouse_url):
    from ctxprec_ops.errors import JudgeConfigurationError

    create_logs(get_engine(warehouse_url), day_rows(2))
    judge = CountingJudge(name="custom-" + "x" * 300)
    with pytest.raises(JudgeConfigurationError, match=r"judge_model .* holds 1 to 255 characters, got 307"):
        score_partition(PipelineConfig(warehouse=warehouse_url, judge=judge), DAY)
    assert judge.calls == 0
    assert query(warehouse_url, "SELECT count(*) FROM ctxprec_runs") == [(0,)]


# -- 8: a role that cannot write the output tables fails before judging, in one line ------------


@pytest.fixture
def limited_pg(pg_server, pg_url):
    """``(owner URL, URL of a role with every privilege on the output tables but INSERT on
    ctxprec_scores)``, the tables created and the source filled by the owner."""
    from psycopg import sql

    engine = get_engine(pg_url)
    create_logs(engine, day_rows(3))
    score_partition(PipelineConfig(warehouse=pg_url, judge=CountingJudge()), "2026-11-27")  # creates the tables
    role = "ctxprec_no_insert"
    if not pg_server.admin("SELECT 1 FROM pg_roles WHERE rolname = %s", role):
        pg_server.admin(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)).as_string())
    with engine.begin() as conn:
        conn.exec_driver_sql(f"GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO {role}")
        conn.exec_driver_sql(f"REVOKE INSERT ON ctxprec_scores FROM {role}")
    url = sa.engine.make_url(pg_url).set(username=role).render_as_string(hide_password=False)
    try:
        yield pg_url, url
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"REVOKE ALL ON ALL TABLES IN SCHEMA public FROM {role}")
        get_engine(url).dispose()


def test_a_role_without_insert_on_scores_fails_before_judging_with_one_line(limited_pg, capsys, caplog):
    from ctxprec_ops.cli import main
    from ctxprec_ops.warehouse.permissions import OutputPermissionError

    owner, url = limited_pg
    judge = CountingJudge()
    with pytest.raises(OutputPermissionError) as info:
        score_partition(PipelineConfig(warehouse=url, judge=judge), DAY)
    assert judge.calls == 0
    assert str(info.value).startswith("the warehouse user cannot INSERT ctxprec_scores (permission denied")
    assert "\n" not in str(info.value) and "SELECT" not in str(info.value).split(";")[0]

    code = main(["score", "--warehouse", url, "--partition", DAY, "--judge", "lexical", "--quiet"])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 1 and len(err) == 1 and "cannot INSERT ctxprec_scores" in err[0], err
    assert "INSERT INTO" not in caplog.text and "parameters" not in caplog.text
    # nothing of the partition was written (no run row, no score, no failure)
    for table in ("ctxprec_runs", "ctxprec_scores", "ctxprec_failures"):
        assert query(owner, f"SELECT count(*) FROM {table} WHERE partition_key = :p", p=DAY) == [(0,)]


def test_a_run_aborted_by_a_warehouse_error_records_one_line_without_sql_or_row_data(pg_url, caplog):
    """An error after the run started (here: a constraint no score meets) is recorded in
    ctxprec_runs and logged as the driver's first line only."""
    engine = get_engine(pg_url)
    create_logs(engine, day_rows(2))
    config = PipelineConfig(warehouse=pg_url, judge=CountingJudge())
    score_partition(config, "2026-11-27")  # creates the output tables
    with engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE ctxprec_scores ADD CONSTRAINT no_scores CHECK (score < -1)")
    with pytest.raises(sa.exc.IntegrityError):
        score_partition(config, DAY)
    ((status, message),) = query(
        pg_url, "SELECT status, error_message FROM ctxprec_runs WHERE partition_key = :p", p=DAY
    )
    assert status == "failed" and message.startswith("CheckViolation: ") and "\n" not in message
    assert "INSERT" not in message and "0.0" not in message and "run_id" not in message
    assert "INSERT INTO" not in caplog.text and "Paris" not in caplog.text


# -- 9: two processes on one PostgreSQL partition pay for each row once ---------------------------


@pytest.mark.parametrize(
    "workers",
    [
        [("partition", "dagster-backfill"), ("partition", "cli-run")],
        [("partition", "dagster-backfill"), ("chunks", "airflow-run")],
        [("chunks", "airflow-run"), ("chunks", "airflow-run")],
    ],
    ids=["partition-vs-partition", "partition-vs-chunks", "same-run-twice"],
)
def test_two_processes_on_one_postgres_partition_judge_each_row_once(judge_server, pg_url, tmp_path, workers):
    """Chunks are claimed (advisory locks): the second process scores other chunks or waits,
    then skips what the first scored. Every row is judged exactly once overall, and each run's
    judge_calls and rows_cached say who paid for what."""
    from tests.helpers.planted import planted_rows
    from tests.test_reliability_concurrency import run_pair

    n = 120
    rows, _ = planted_rows(n, seed=3)  # unique node texts: one judge call per row, no shared cache hit
    create_logs(get_engine(pg_url), rows)
    judge_server.latency = 0.01
    summaries = run_pair(judge_server, pg_url, tmp_path, workers)
    assert judge_server.calls == n, judge_server.calls
    assert sum(s["judge_calls"] for s in summaries) == n
    assert all(s["rows_scored"] == n and s["status"] == "succeeded" for s in summaries)
    if len({s["run_id"] for s in summaries}) == 2:
        # each run's cached rows are the rows the other run judged
        assert sorted(s["rows_cached"] for s in summaries) == sorted(n - s["judge_calls"] for s in summaries)
        for s in summaries:
            assert s["rows_cached"] == n - s["judge_calls"]
    assert query(pg_url, "SELECT count(*), count(DISTINCT log_id) FROM ctxprec_scores") == [(n, n)]


# -- 10: partition keys at the ends of the calendar ------------------------------------------------


@pytest.mark.parametrize("key", ["0001-01-01", "9999-12-31", "1899-12-31"])
def test_a_partition_key_at_the_end_of_the_calendar_exits_2_without_a_run_row(tmp_path, capsys, key):
    from ctxprec_ops.cli import main
    from ctxprec_ops.warehouse.source import PartitionKeyError

    url = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(get_engine(url), day_rows(1))
    assert main(["score", "--warehouse", url, "--partition", key, "--judge", "lexical", "--quiet"]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "out of range (1900-01-01 to 9998-12-31)" in err[0], err
    with pytest.raises(PartitionKeyError):
        score_partition(PipelineConfig(warehouse=url, judge=CountingJudge()), key)
    assert "ctxprec_runs" not in sa.inspect(get_engine(url)).get_table_names()


def test_the_last_accepted_partition_keys_score(tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(
        get_engine(url),
        [log_row(1, datetime(1900, 1, 1, 5), as_text=True), log_row(2, datetime(9998, 12, 31, 23, 59), as_text=True)],
        context_type=sa.Text,
    )
    for key in ("1900-01-01", "9998-12-31"):
        assert score_partition(PipelineConfig(warehouse=url, judge=CountingJudge()), key).rows_scored == 1


# -- 12: estimate counts prompt tokens with the model's tokenizer ------------------------------


def _estimate_rows(tmp_path):
    from tests.helpers.planted import planted_rows

    url = f"sqlite:///{tmp_path / 'wh.db'}"
    rows, _ = planted_rows(4, seed=5)  # unique node texts: every node is judged, none cached
    create_logs(get_engine(url), rows)
    return url, rows


def test_estimate_counts_prompt_tokens_with_the_models_bpe_encoding_offline(tmp_path):
    """The bundled o200k_base ranks count the very prompts the run would send (no download)."""
    import bpe_openai

    from ctxprec_ops.metrics.contextual_precision import ContextualPrecisionMetric
    from ctxprec_ops.pipeline.estimate import estimate_partition
    from ctxprec_ops.pipeline.rows import row_to_test_case

    url, rows = _estimate_rows(tmp_path)
    est = estimate_partition(PipelineConfig(warehouse=url, judge="gpt-4o-mini"), DAY)
    assert est.tokenizer == "o200k_base BPE (bpe-openai)" and "o200k_base BPE" in est.method
    enc = bpe_openai.get_encoding("o200k_base")
    template = ContextualPrecisionMetric(model="lexical").evaluation_template
    want = 0
    for row in rows:
        case = row_to_test_case({**row, "retrieval_context": json.dumps(row["retrieval_context"])})
        ids = list(range(1, len(case.retrieval_context) + 1))
        prompt = template.generate_verdicts(case.input, case.expected_output, case.retrieval_context, ids)
        want += len(enc.encode(prompt)) + 8
    assert est.prompt_tokens == want
    heuristic = estimate_partition(PipelineConfig(warehouse=url, judge="gpt-4"), DAY)
    assert heuristic.tokenizer == "cl100k_base BPE (bpe-openai)"


def test_estimate_says_when_it_falls_back_to_characters_per_token(tmp_path, monkeypatch):
    import sys

    from ctxprec_ops.judge import tokens
    from ctxprec_ops.pipeline.estimate import estimate_partition

    url, _ = _estimate_rows(tmp_path)
    tokens._encoding.cache_clear()
    monkeypatch.setitem(sys.modules, "bpe_openai", None)  # as if the 'tokens' extra were not installed
    try:
        est = estimate_partition(PipelineConfig(warehouse=url, judge="gpt-4o-mini"), DAY)
    finally:
        tokens._encoding.cache_clear()
    assert est.tokenizer.startswith("characters/4 (no offline tokenizer installed")
    assert est.prompt_tokens > 0


def test_encoding_of_model_names():
    from ctxprec_ops.judge.tokens import encoding_for

    assert encoding_for("gpt-4o-mini") == ("o200k_base", True)
    assert encoding_for("ft:gpt-4o-mini:org:x:1") == ("o200k_base", True)
    assert encoding_for("openai/gpt-4.1") == ("o200k_base", True)
    assert encoding_for("gpt-4-turbo") == ("cl100k_base", True)
    assert encoding_for("gpt-3.5-turbo") == ("cl100k_base", True)
    assert encoding_for("llama3.1:8b") == ("o200k_base", False)


# -- 2: the source table is part of the identity of scores, failures and runs ------------------

RELEVANT_NODES = ["the RELEVANT fact", "another RELEVANT fact"]
IRRELEVANT_NODES = ["IRRELEVANT filler", "more IRRELEVANT filler"]


def _relevance_oracle_judge():
    """A judge that finds a node relevant iff its text holds RELEVANT (as a word)."""
    import re

    from ctxprec_ops.judge.models.base import JudgeModel

    class Oracle(JudgeModel):
        offline = True
        calls = 0

        def get_model_name(self) -> str:
            return "oracle"

        def judge_nodes(self, input, expected, todo):
            from ctxprec_ops.scoring.verdicts import NodeVerdict

            Oracle.calls += 1
            return {
                rank: NodeVerdict(node=rank, relevant=bool(re.search(r"(?<!IR)\bRELEVANT\b", text)), reason="")
                for rank, text in todo
            }

        def generate(self, prompt, schema=None):
            raise AssertionError("not used")

        async def a_generate(self, prompt, schema=None):
            raise AssertionError("not used")

    return Oracle()


def _table(engine, name: str, schema: str | None, nodes: list[str]) -> None:
    from tests.fixtures.warehouse_data import retrieval_table

    md = sa.MetaData()
    t = retrieval_table(md, name, schema=schema, context_type=sa.Text)
    md.create_all(engine)
    with engine.begin() as conn:
        conn.execute(sa.insert(t), [log_row(i, datetime(2026, 11, 28, i), context=nodes, as_text=True) for i in (1, 2)])


def test_two_tables_with_overlapping_ids_never_share_scores_on_postgres(pg_url, tmp_path, capsys):
    """retrieval_logs, "RETRIEVAL_LOGS" and staging.retrieval_logs, ids 1 and 2 in each: each
    table is judged and scored on its own, and every reader shows the table it is asked about."""
    from ctxprec_ops.cli import main
    from ctxprec_ops.monitoring import check_partition, load_trend

    engine = get_engine(pg_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE SCHEMA staging")
    _table(engine, "retrieval_logs", None, RELEVANT_NODES)
    _table(engine, "RETRIEVAL_LOGS", None, IRRELEVANT_NODES)
    _table(engine, "retrieval_logs", "staging", IRRELEVANT_NODES)
    judge = _relevance_oracle_judge()
    want = {"retrieval_logs": 1.0, "RETRIEVAL_LOGS": 0.0, "staging.retrieval_logs": 0.0}
    for table, mean in want.items():
        s = score_partition(PipelineConfig(warehouse=pg_url, judge=judge, source_table=table), DAY)
        assert (s.rows_scored, s.rows_cached, s.mean_score, s.source_table) == (2, 0, mean, table), table
    assert judge.calls == 6  # every row of every table judged
    rows = query(pg_url, "SELECT source_table, log_id, score FROM ctxprec_scores ORDER BY 1, 2")
    assert rows == [(t, i, want[t]) for t in sorted(want) for i in ("1", "2")]
    assert sorted(r[0] for r in query(pg_url, "SELECT source_table FROM ctxprec_runs")) == sorted(want)
    # a re-run of one table: everything cached, the others untouched
    again = score_partition(PipelineConfig(warehouse=pg_url, judge=judge, source_table="RETRIEVAL_LOGS"), DAY)
    assert (again.rows_cached, again.judge_calls, again.mean_score, judge.calls) == (2, 0, 0.0, 6)
    # readers: check, trend and the CLI (check, trend, report) compare one table's scores
    for table, mean in want.items():
        result = check_partition(pg_url, DAY, source_table=table)
        assert result.figures.summary.mean == mean and result.population.source_table == table
        assert result.figures.rows == 2
        df = load_trend(pg_url, days=1, source_table=table)
        assert df.attrs["source_table"] == table and list(df["mean"]) == [mean]
        capsys.readouterr()
        main(["check", "--warehouse", pg_url, "--partition", DAY, "--source-table", table, "--json"])
        assert json.loads(capsys.readouterr().out)["figures"]["mean"] == mean
    out = tmp_path / "r.html"
    assert main(["report", "--warehouse", pg_url, "--out", str(out), "--source-table", "staging.retrieval_logs"]) == 0
    html = out.read_text()
    assert "IRRELEVANT filler" in html and "the RELEVANT fact" not in html  # texts of the table asked about


def _old_tables(engine) -> None:
    """The output tables as the version before source_table declared them, with one old row each."""
    from ctxprec_ops.metrics.contextual_precision import ContextualPrecisionMetric

    version = ContextualPrecisionMetric(model=CountingJudge()).prompt_version
    now = datetime(2026, 11, 29, 1)
    with engine.begin() as conn:
        conn.exec_driver_sql(
            "CREATE TABLE ctxprec_scores (log_id TEXT NOT NULL, partition_key VARCHAR(10) NOT NULL, metric VARCHAR(64) "
            "NOT NULL, score FLOAT NOT NULL, success BOOLEAN NOT NULL, threshold FLOAT NOT NULL, verdicts TEXT, "
            "reason TEXT, judge_model VARCHAR(255) NOT NULL, prompt_version VARCHAR(64) NOT NULL, prompt_tokens "
            "INTEGER, completion_tokens INTEGER, cost FLOAT, run_id TEXT NOT NULL, scored_at TIMESTAMP NOT NULL, "
            "CONSTRAINT ctxprec_scores_pk PRIMARY KEY (log_id, metric, judge_model, prompt_version))"
        )
        conn.exec_driver_sql("CREATE INDEX ix_ctxprec_scores_partition ON ctxprec_scores (partition_key, metric)")
        conn.exec_driver_sql(
            "CREATE TABLE ctxprec_failures (log_id TEXT NOT NULL, partition_key VARCHAR(10) NOT NULL, metric "
            "VARCHAR(64) NOT NULL, judge_model VARCHAR(255) NOT NULL, prompt_version VARCHAR(64) NOT NULL, "
            "error_type VARCHAR(64) NOT NULL, error_message TEXT NOT NULL, attempts INTEGER NOT NULL, run_id TEXT "
            "NOT NULL, failed_at TIMESTAMP NOT NULL, "
            "CONSTRAINT ctxprec_failures_pk PRIMARY KEY (log_id, metric, judge_model, prompt_version))"
        )
        conn.exec_driver_sql(
            "CREATE TABLE ctxprec_runs (run_id TEXT NOT NULL, partition_key VARCHAR(10) NOT NULL, metric VARCHAR(64) "
            "NOT NULL, status VARCHAR(32) NOT NULL, rows_total INTEGER NOT NULL, rows_scored INTEGER NOT NULL, "
            "rows_cached INTEGER NOT NULL, rows_failed INTEGER NOT NULL, mean_score FLOAT, median_score FLOAT, "
            "pass_rate FLOAT, ci_low FLOAT, ci_high FLOAT, prompt_tokens INTEGER, completion_tokens INTEGER, "
            "cost FLOAT, judge_model VARCHAR(255), prompt_version VARCHAR(64), started_at TIMESTAMP, finished_at "
            "TIMESTAMP, CONSTRAINT ctxprec_runs_pk PRIMARY KEY (run_id, partition_key, metric))"
        )
        conn.execute(
            sa.text(
                "INSERT INTO ctxprec_scores VALUES ('1', :p, 'contextual_precision', 0.25, false, 0.5, '[]', 'old', "
                ":j, :v, 1, 1, 0.0, 'old-run', :t)"
            ),
            {"p": DAY, "j": "counting-judge", "v": version, "t": now},
        )
        conn.execute(
            sa.text(
                "INSERT INTO ctxprec_failures VALUES ('2', :p, 'contextual_precision', :j, :v, 'judge_unavailable', "
                "'old failure', 6, 'old-run', :t)"
            ),
            {"p": DAY, "j": "counting-judge", "v": version, "t": now},
        )
        conn.execute(
            sa.text(
                "INSERT INTO ctxprec_runs VALUES ('old-run', :p, 'contextual_precision', 'partial', 2, 1, 0, 1, 0.25, "
                "0.25, 0, NULL, NULL, 1, 1, 0.0, :j, :v, :t, :t)"
            ),
            {"p": DAY, "j": "counting-judge", "v": version, "t": now},
        )


def test_output_tables_of_the_previous_version_are_migrated_in_place(warehouse_url):
    """Old rows keep the table they came from (the configured input table of their metric): the
    old score is still this table's (not re-judged), the old failure is retried, the old run row
    stays; the keys now include source_table."""
    engine = get_engine(warehouse_url)
    _old_tables(engine)
    create_logs(engine, day_rows(3, as_text=True), name="my_logs", context_type=sa.Text)
    judge = CountingJudge()
    summary = score_partition(PipelineConfig(warehouse=warehouse_url, judge=judge, source_table="my_logs"), DAY)
    assert (summary.rows_scored, summary.rows_cached, summary.rows_failed, judge.calls) == (3, 1, 0, 2)
    scores = dict(
        (r[0], r[1:]) for r in query(warehouse_url, "SELECT log_id, source_table, score, reason FROM ctxprec_scores")
    )
    assert scores["1"] == ("my_logs", 0.25, "old")  # kept, as the configured table's
    assert {v[0] for v in scores.values()} == {"my_logs"}
    assert query(warehouse_url, "SELECT count(*) FROM ctxprec_failures") == [(0,)]  # re-judged, now scored
    runs = dict(query(warehouse_url, "SELECT run_id, source_table FROM ctxprec_runs"))
    assert runs["old-run"] == "my_logs" and runs[summary.run_id] == "my_logs"
    insp = sa.inspect(engine)
    for table, key in (
        ("ctxprec_scores", ["log_id", "metric", "judge_model", "prompt_version", "source_table", "mapping"]),
        ("ctxprec_failures", ["log_id", "metric", "judge_model", "prompt_version", "source_table", "mapping"]),
        ("ctxprec_runs", ["run_id", "partition_key", "metric", "source_table", "mapping"]),
    ):
        assert insp.get_pk_constraint(table)["constrained_columns"] == key, table
        nullable = {c["name"]: c["nullable"] for c in insp.get_columns(table)}
        assert nullable["source_table"] is False and nullable["mapping"] is False
    # the old rows count as the default mapping's (no mapping configured), as this run's rows do
    assert query(warehouse_url, "SELECT DISTINCT mapping FROM ctxprec_scores") == [("default",)]
    assert query(warehouse_url, "SELECT DISTINCT mapping FROM ctxprec_runs") == [("default",)]
    assert "ix_ctxprec_scores_partition" in {i["name"] for i in insp.get_indexes("ctxprec_scores")}
    # another table with the same ids gets its own scores: id 1, scored for my_logs before the
    # migration, is judged for other_logs (ids 2, 3: identical texts, verdicts from the judgment cache)
    create_logs(engine, day_rows(3, as_text=True), name="other_logs", context_type=sa.Text)
    other = score_partition(PipelineConfig(warehouse=warehouse_url, judge=judge, source_table="other_logs"), DAY)
    assert (other.rows_scored, other.judge_calls, judge.calls) == (3, 1, 3)
    assert query(warehouse_url, "SELECT count(*) FROM ctxprec_scores WHERE source_table = 'other_logs'") == [(3,)]


def test_readers_of_output_tables_not_migrated_yet_still_work(tmp_path):
    from ctxprec_ops.monitoring import check_partition

    url = f"sqlite:///{tmp_path / 'wh.db'}"
    _old_tables(get_engine(url))
    result = check_partition(url, DAY)
    assert result.figures.summary.mean == 0.25 and result.population.source_table is None
