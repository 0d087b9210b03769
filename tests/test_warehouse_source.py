"""Reading source tables: UTC-day partitions on SQLite text and PostgreSQL timestamp/timestamptz
under non-UTC session time zones, keyset chunks, reflection errors."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
import sqlalchemy as sa

from ctxprec_ops.pipeline import Chunk, PipelineConfig, SourceColumns, plan_chunks
from ctxprec_ops.warehouse.engine import get_engine, normalize_url, read_connection
from ctxprec_ops.warehouse.source import (
    Partition,
    PartitionKeyError,
    SourceTableError,
    iter_partition_ids,
    read_chunk_rows,
    reflect_source,
)
from tests.fixtures.warehouse_data import create_logs, log_row

COLS = {
    "id": "id",
    "event_time": "event_time",
    "input": "input",
    "actual_output": "actual_output",
    "expected_output": "expected_output",
    "retrieval_context": "retrieval_context",
}

# (stored text, UTC day it belongs to or None)
SQLITE_TIMES = [
    ("2026-11-27 23:59:59", "2026-11-27"),
    ("2026-11-27 23:59:59.999999", "2026-11-27"),
    ("2026-11-28 00:00:00", "2026-11-28"),
    ("2026-11-28T00:00:00", "2026-11-28"),
    ("2026-11-28 00:00:00.000000", "2026-11-28"),
    ("2026-11-28T12:00:00Z", "2026-11-28"),
    ("2026-11-28T12:00:00+00:00", "2026-11-28"),
    ("2026-11-28 23:59:59", "2026-11-28"),
    ("2026-11-28T23:59:59.999", "2026-11-28"),
    ("2026-11-28T20:00:00-05:00", "2026-11-29"),  # 01:00 UTC next day
    ("2026-11-29T03:00:00+05:30", "2026-11-28"),  # 21:30 UTC the day before
    ("2026-11-29 00:00:00", "2026-11-29"),
    ("not a time", None),
    (None, None),
]


def test_partition_key_must_be_a_date():
    for bad in ("2026-11-31", "20261128", "2026-11-28T00:00", "", "yesterday"):
        with pytest.raises(PartitionKeyError):
            Partition.of(bad)
    day = Partition.of("2026-11-28")
    assert day.start == datetime(2026, 11, 28, tzinfo=UTC) and day.end - day.start == timedelta(days=1)
    assert day.key == str(day) == "2026-11-28" and Partition.of(day) is day


def test_sqlite_text_forms_land_in_their_utc_day(tmp_path):
    engine = get_engine(f"sqlite:///{tmp_path / 'wh.db'}")
    create_logs(engine, [], time_type=sa.Text)  # raw text, exactly as written
    with engine.begin() as conn:
        conn.execute(
            sa.text("INSERT INTO retrieval_logs (id, event_time, input) VALUES (:id, :t, 'q')"),
            [{"id": i, "t": t} for i, (t, _) in enumerate(SQLITE_TIMES)],
        )
    src = reflect_source(engine, "retrieval_logs", None, COLS)
    with read_connection(engine) as conn:
        for day in ("2026-11-27", "2026-11-28", "2026-11-29"):
            want = [i for i, (_, d) in enumerate(SQLITE_TIMES) if d == day]
            assert list(iter_partition_ids(conn, src, Partition.of(day))) == want, day
            # the chunk read (id-bounded, non-indexable filter) agrees with the plan
            rows = read_chunk_rows(conn, src, Partition.of(day), None, len(SQLITE_TIMES))
            assert [r["id"] for r in rows] == want


def test_sqlite_datetime_column_written_by_sqlalchemy(tmp_path):
    engine = get_engine(f"sqlite:///{tmp_path / 'wh.db'}")
    create_logs(
        engine,
        [
            log_row(1, datetime(2026, 11, 27, 23, 59, 59, 999999)),
            log_row(2, datetime(2026, 11, 28, 0, 0, 0)),
            log_row(3, datetime(2026, 11, 28, 23, 59, 59, 999999)),
            log_row(4, datetime(2026, 11, 29, 0, 0, 0)),
        ],
    )
    cfg = PipelineConfig(warehouse=f"sqlite:///{tmp_path / 'wh.db'}", chunk_size=1)
    chunks = plan_chunks(cfg, "2026-11-28")
    assert [(c.after_id, c.upto_id, c.rows) for c in chunks] == [(None, 2, 1), (2, 3, 1)]
    # the key is parsed once: every chunk carries that one Partition; a chunk that travelled as a
    # dict (another Airflow task) parses its key again into an equal one
    assert chunks[0].partition is chunks[1].partition and chunks[0].partition.day.isoformat() == "2026-11-28"
    travelled = Chunk.from_dict(chunks[1].to_dict())
    assert travelled == chunks[1] and travelled.partition == chunks[1].partition
    assert [c.to_dict() for c in plan_chunks(cfg, Partition.of("2026-11-28"))] == [c.to_dict() for c in chunks]


@pytest.mark.parametrize("n,size,expect", [(10, 3, [3, 3, 3, 1]), (9, 3, [3, 3, 3]), (0, 3, []), (2, 500, [2])])
def test_plan_chunks_keyset_boundaries(tmp_path, n, size, expect):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    rows = [log_row(i * 10, datetime(2026, 11, 28, i % 24)) for i in range(1, n + 1)]
    rows.append(log_row(5, datetime(2026, 11, 27, 12)))  # other day, inside the id range
    create_logs(get_engine(url), rows)
    chunks = plan_chunks(PipelineConfig(warehouse=url, chunk_size=size), "2026-11-28")
    assert [c.rows for c in chunks] == expect
    assert [c.index for c in chunks] == list(range(len(expect)))
    for prev, nxt in zip(chunks, chunks[1:]):
        assert nxt.after_id == prev.upto_id
    engine = get_engine(url)
    src = reflect_source(engine, "retrieval_logs", None, COLS)
    seen = []
    with read_connection(engine) as conn:
        for c in chunks:
            got = read_chunk_rows(conn, src, Partition.of("2026-11-28"), c.after_id, c.upto_id)
            assert len(got) == c.rows
            seen += [r["id"] for r in got]
    assert seen == [i * 10 for i in range(1, n + 1)]


def test_text_ids_and_json_round_trip_of_chunks(tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    ids = ["b-2", "a-10", "a-9", "C", "c", "z"]
    create_logs(get_engine(url), [log_row(i, datetime(2026, 11, 28, 5)) for i in ids], id_type=sa.String)
    chunks = plan_chunks(PipelineConfig(warehouse=url, chunk_size=4), "2026-11-28")
    assert [c.rows for c in chunks] == [4, 2]
    assert sorted(ids)[3] == chunks[0].upto_id
    import json

    from ctxprec_ops.pipeline import Chunk

    assert [Chunk.from_dict(json.loads(json.dumps(c.to_dict()))) for c in chunks] == chunks


def test_missing_table_and_column_errors_name_them(tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    create_logs(engine, [])
    with pytest.raises(SourceTableError, match="'no_such_logs' does not exist"):
        plan_chunks(PipelineConfig(warehouse=url, source_table="no_such_logs"), "2026-11-28")
    with pytest.raises(SourceTableError, match="no column 'expected'.*'expected_output'") as exc:
        plan_chunks(PipelineConfig(warehouse=url, columns=SourceColumns(expected_output="expected")), "2026-11-28")
    assert "retrieval_context" in str(exc.value)  # lists the columns it has


# -- PostgreSQL: naive timestamps are UTC, timestamptz instants land in their UTC day -----------

UTC = UTC
PG_CASES = [
    # (naive UTC value, day)
    (datetime(2026, 11, 27, 23, 59, 59, 999999), "2026-11-27"),
    (datetime(2026, 11, 28, 0, 0, 0), "2026-11-28"),
    (datetime(2026, 11, 28, 3, 30, 0), "2026-11-28"),  # 22:30 the day before in New York
    (datetime(2026, 11, 28, 20, 0, 0), "2026-11-28"),  # 01:30 the day after in Kolkata
    (datetime(2026, 11, 28, 23, 59, 59, 999999), "2026-11-28"),
    (datetime(2026, 11, 29, 0, 0, 0), "2026-11-29"),
    (datetime(2026, 11, 29, 2, 0, 0), "2026-11-29"),  # 21:00 on the 28th in New York
]


@pytest.mark.parametrize("session_tz", [None, "Asia/Kolkata"])
@pytest.mark.parametrize("aware", [False, True])
def test_postgres_partitions_ignore_the_session_time_zone(pg_server, session_tz, aware):
    db = pg_server.create_database(timezone=session_tz)
    try:
        url = pg_server.url(db)
        plain = sa.create_engine(normalize_url(url))  # the server's own session time zone
        with plain.connect() as conn:
            shown = conn.exec_driver_sql("SHOW timezone").scalar_one()
        plain.dispose()
        assert shown == (session_tz or pg_server.timezone) and shown != "UTC"
        engine = get_engine(url)
        with engine.connect() as conn:  # the warehouse's sessions run in UTC
            assert conn.exec_driver_sql("SHOW timezone").scalar_one() == "UTC"
        rows = [log_row(i, (t.replace(tzinfo=UTC) if aware else t)) for i, (t, _) in enumerate(PG_CASES)]
        create_logs(engine, rows, time_type=sa.DateTime(timezone=aware))
        with engine.begin() as conn:
            # a row written as SQL text in the session's own zone (timestamptz only)
            if aware:
                conn.exec_driver_sql(
                    "INSERT INTO retrieval_logs (id, event_time, input) VALUES (100, '2026-11-28 23:30:00+00', 'q')"
                )
        src = reflect_source(engine, "retrieval_logs", None, COLS)
        assert src.time_mode == ("aware" if aware else "naive")
        with read_connection(engine) as conn:
            for day in ("2026-11-27", "2026-11-28", "2026-11-29"):
                want = [i for i, (_, d) in enumerate(PG_CASES) if d == day]
                if aware and day == "2026-11-28":
                    want.append(100)
                assert list(iter_partition_ids(conn, src, Partition.of(day))) == want, (day, session_tz, aware)
                assert [r["id"] for r in read_chunk_rows(conn, src, Partition.of(day), None, 1000)] == want
    finally:
        pg_server.drop_database(db)


def test_postgres_text_ids_keyset_and_schema_qualified_table(pg_url):
    engine = get_engine(pg_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("CREATE SCHEMA analytics")
    ids = [f"log-{i:03d}" for i in range(7)] + ["A", "b"]
    create_logs(engine, [log_row(i, datetime(2026, 11, 28, 12)) for i in ids], id_type=sa.String, schema="analytics")
    cfg = PipelineConfig(warehouse=pg_url, source_table="analytics.retrieval_logs", chunk_size=2)
    chunks = plan_chunks(cfg, "2026-11-28")
    assert sum(c.rows for c in chunks) == len(ids) and len(chunks) == 5
    src = reflect_source(engine, "retrieval_logs", "analytics", COLS)
    got = []
    with read_connection(engine) as conn:
        for c in chunks:
            got += [r["id"] for r in read_chunk_rows(conn, src, Partition.of("2026-11-28"), c.after_id, c.upto_id)]
    assert sorted(got) == sorted(ids) and len(set(got)) == len(ids)


def test_a_chunk_with_text_that_is_not_utf8_is_read_whole(tmp_path):
    """SQLite chunk reads decode text on the driver's fast path, which refuses invalid UTF-8: the
    chunk is then read again keeping the bad bytes as surrogates, so every row comes back and the
    bad one is reported by the row checks, not by the read."""
    from ctxprec_ops.pipeline.rows import row_to_test_case
    from ctxprec_ops.warehouse.dialects.sqlite.session import text_factory

    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    create_logs(engine, [log_row(i, datetime(2026, 11, 28, 5)) for i in (1, 2, 3)])
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE retrieval_logs SET input = CAST(x'5061726973ff' AS TEXT) WHERE id = 2")
    src = reflect_source(engine, "retrieval_logs", None, COLS)
    with read_connection(engine) as conn:
        rows = read_chunk_rows(conn, src, Partition.of("2026-11-28"), None, 3)
        again = read_chunk_rows(conn, src, Partition.of("2026-11-28"), 1, 3)
        assert conn.connection.driver_connection.text_factory is text_factory  # restored after the fast path
    assert [r["id"] for r in rows] == [1, 2, 3] and [r["id"] for r in again] == [2, 3]
    assert rows[1]["input"] == "Paris\udcff" and rows[0]["input"] == rows[2]["input"] == log_row(1, None)["input"]
    with pytest.raises(Exception, match="not valid UTF-8"):
        row_to_test_case(rows[1])
    plain = sa.create_engine(url)  # an engine not made by get_engine keeps its own text factory
    with plain.connect() as conn:
        assert [r["id"] for r in read_chunk_rows(conn, src, Partition.of("2026-11-28"), 2, 3)] == [3]
        assert conn.connection.driver_connection.text_factory is str


def test_streamed_batches_hold_every_row_in_order_with_each_columns_own_values(tmp_path):
    """``stream_batches``: the driver's own rows on SQLite when no column converts its values,
    SQLAlchemy's where one does (a DATETIME column comes back as ``datetime``, not text)."""
    from decimal import Decimal

    from ctxprec_ops.warehouse.engine import stream_batches

    engine = get_engine(f"sqlite:///{tmp_path / 'wh.db'}")
    meta = sa.MetaData()
    t = sa.Table(
        "t",
        meta,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("score", sa.Float),
        sa.Column("at", sa.DateTime),
        sa.Column("amount", sa.Numeric(10, 2)),
    )
    meta.create_all(engine)
    rows = [
        {"id": i, "score": i / 7, "at": datetime(2026, 11, 28, i % 24), "amount": Decimal(i) / 4} for i in range(1, 26)
    ]
    with engine.begin() as conn:
        conn.execute(t.insert(), rows)
    with engine.connect() as conn:
        plain = list(stream_batches(conn, sa.select(t.c.id, t.c.score).order_by(t.c.score.desc()), 10))
        converted = list(stream_batches(conn, sa.select(t.c.id, t.c.at, t.c.amount).order_by(t.c.id), 10))
    assert [len(b) for b in plain] == [len(b) for b in converted] == [10, 10, 5]
    assert [tuple(r) for b in plain for r in b] == [(r["id"], r["score"]) for r in reversed(rows)]
    assert [tuple(r) for b in converted for r in b] == [(r["id"], r["at"], r["amount"]) for r in rows]
