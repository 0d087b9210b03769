"""What is particular to DuckDB (the invariants every backend shares are in
tests/conformance/): its staged write works without pyarrow."""

from __future__ import annotations

import asyncio
import json
import sys

import pytest
import sqlalchemy as sa

from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.warehouse.engine import get_engine, release_sqlite_files
from tests.fixtures.warehouse_data import CountingJudge, create_logs, day_rows

DAY = "2026-11-28"


def _load(url: str, n: int = 7) -> list[dict]:
    """A source table of ``n`` rows (retrieval context as JSON text: fakesnow has no SQLAlchemy JSON)."""
    rows = [dict(r, retrieval_context=json.dumps(r["retrieval_context"])) for r in day_rows(n)]
    create_logs(get_engine(url), rows, context_type=sa.Text)
    return rows


def test_duckdb_writes_the_same_rows_without_pyarrow(duckdb_url, tmp_path, monkeypatch):
    """DuckDB's staged write needs neither pyarrow nor pandas (the ``duckdb`` extra installs
    neither): with pyarrow hidden, the same score and judgment rows as with it importable."""
    arrow_url = f"duckdb:///{tmp_path / 'arrow.duckdb'}"
    for url in (arrow_url, duckdb_url):
        _load(url)
    score_partition(PipelineConfig(warehouse=arrow_url, judge=CountingJudge(), chunk_size=3), DAY)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # ``import pyarrow`` raises ImportError
    score_partition(PipelineConfig(warehouse=duckdb_url, judge=CountingJudge(), chunk_size=3), DAY)

    def rows(url: str) -> tuple[list, list]:
        with get_engine(url).connect() as conn:
            scores = conn.exec_driver_sql(
                "SELECT log_id, score, success, verdicts::VARCHAR, judge_calls FROM ctxprec_scores ORDER BY log_id"
            ).fetchall()
            cache = conn.exec_driver_sql(
                "SELECT key, relevant, reason, agreement FROM ctxprec_judgments ORDER BY key"
            ).fetchall()
        return scores, cache

    assert rows(duckdb_url) == rows(arrow_url)
    assert rows(duckdb_url)[0] and rows(duckdb_url)[1]


def test_a_failed_frame_write_reports_its_own_error(duckdb_url):
    """A frame insert DuckDB refuses (a NULL for a NOT NULL column) aborts the transaction, and
    DuckDB then refuses to unregister the frame as well: the error raised is the write's own,
    naming the column, not "Current transaction is aborted"; the frame is gone with it."""
    from ctxprec_ops.warehouse.dialects.duckdb.frames import frame_upsert
    from ctxprec_ops.warehouse.schema import ensure_output_tables
    from ctxprec_ops.warehouse.write_rows import ColumnRows

    engine = get_engine(duckdb_url)
    t = ensure_output_tables(engine)
    rows = ColumnRows({"key": [b"\x01" * 23], "relevant": [True], "reason": ["r"]}, {"judge_model": None})
    with engine.connect() as conn:
        trans = conn.begin()
        try:
            frame_upsert(conn, t.judgments, rows, ["key"], None)
        except sa.exc.DBAPIError as exc:
            message = str(exc.orig)
        else:
            raise AssertionError("the NULL judge_model was accepted")
        finally:
            trans.rollback()
        assert "judge_model" in message and "aborted" not in message, message
        frames = conn.exec_driver_sql("SELECT count(*) FROM duckdb_views() WHERE view_name LIKE 'ctxprec_stage_%'")
        assert frames.scalar() == 0


def _kinds_table(md: sa.MetaData, name: str) -> sa.Table:
    return sa.Table(
        name,
        md,
        sa.Column("k", sa.String, primary_key=True),
        sa.Column("i", sa.Integer),
        sa.Column("big", sa.BigInteger),
        sa.Column("f", sa.Float),
        sa.Column("b", sa.Boolean),
        sa.Column("t", sa.String),
        sa.Column("stamp", sa.DateTime(timezone=True)),
        sa.Column("j", sa.JSON),
        sa.Column("raw", sa.LargeBinary),
    )


def test_a_frame_stores_what_sqlalchemys_insert_stores(duckdb_url):
    """Typed columns (all floats, all ints, all bools), object columns (a None among numbers, an
    int among floats) and shared values (one parameter) store exactly what SQLAlchemy's
    own insert of the same rows stores; an integer past 64 bits fails both ways."""
    from datetime import datetime, timedelta, timezone

    from ctxprec_ops.warehouse.dialects.duckdb.frames import _array, frame_upsert
    from ctxprec_ops.warehouse.write_rows import ColumnRows

    engine = get_engine(duckdb_url)
    md = sa.MetaData()
    framed, plain = _kinds_table(md, "framed"), _kinds_table(md, "plain")
    md.create_all(engine)
    at = datetime(2026, 11, 28, 23, 59, 59, 999999, tzinfo=timezone(timedelta(hours=-5)))
    blocks = [
        # every column typed or shared
        {
            "i": [1, -(2**31), 2**31 - 1],
            "big": [2**63 - 1, -(2**63), 0],
            "f": [0.1 + 0.2, -0.0, float("inf")],
            "b": [True, False, True],
        },
        # objects: a None among numbers, ints and floats in one column
        {"i": [None, 3, 4], "big": [7, None, 9], "f": [1, 2.5, None], "b": [None, True, False]},
    ]
    for n, block in enumerate(blocks):
        keys = [f"{n}-{j}" for j in range(3)]
        texts = ["a'b", "", None]
        columns = {"k": keys, "t": texts, **block}
        shared = {"stamp": at, "j": {"x": [1, "é"]}, "raw": b"\x00\xff"}
        with engine.begin() as conn:
            frame_upsert(conn, framed, ColumnRows(columns, shared), ["k"], None)
            conn.execute(sa.insert(plain), ColumnRows(columns, shared).as_dicts())
    with engine.connect() as conn:
        got = [conn.execute(sa.select(t).order_by(t.c.k)).all() for t in (framed, plain)]
    assert got[0] == got[1] and len(got[0]) == 6
    assert got[0][0].stamp == at and got[0][0].j == {"x": [1, "é"]} and got[0][0].big == 2**63 - 1
    assert _array([1.5, 2.0]).dtype == "float64" and _array([1, 2]).dtype == "int64" and _array([True]).dtype == bool
    assert _array([1, True]).dtype == object and _array([1, None]).dtype == object and _array([2**64]).dtype == object
    for write in (
        lambda conn: frame_upsert(conn, framed, ColumnRows({"k": ["x"], "big": [2**64]}, {}), ["k"], None),
        lambda conn: conn.execute(sa.insert(plain), [{"k": "x", "big": 2**64}]),
    ):
        with engine.connect() as conn, pytest.raises((sa.exc.DBAPIError, OverflowError)):
            with conn.begin():
                write(conn)


@pytest.fixture
def spells():
    from ctxprec_ops.warehouse.dialects.duckdb.conflicts import forget_spells

    forget_spells()
    yield
    forget_spells()


def test_rows_go_in_plainly_and_a_key_that_exists_runs_the_write_again(duckdb_url, spells, caplog):
    """Under ``write_retrying`` new rows are inserted without ``ON CONFLICT``; a write meeting an
    existing key gives its transaction up and runs again at once (no pause), with ``ON CONFLICT``,
    for that and the next ``CONFLICT_SPELL`` writes of the table; then plainly again. Outside
    ``write_retrying`` (nothing would run it again) always ``ON CONFLICT``. A NOT NULL violation is
    raised as it is and starts no spell."""
    import logging

    from ctxprec_ops.warehouse.dialects.duckdb.conflicts import CONFLICT_SPELL
    from ctxprec_ops.warehouse.engine import write_retrying, write_transaction
    from ctxprec_ops.warehouse.upsert import upsert

    engine = get_engine(duckdb_url)
    md = sa.MetaData()
    t = sa.Table("s", md, sa.Column("k", sa.String, primary_key=True), sa.Column("v", sa.Integer, nullable=False))
    md.create_all(engine)
    inserts: list[str] = []

    @sa.event.listens_for(engine, "before_cursor_execute")
    def seen(conn, cursor, statement, params, context, many):  # noqa: ARG001
        if statement.startswith("INSERT INTO s"):
            inserts.append("upsert" if "ON CONFLICT" in statement else "plain")

    def write(rows: list[dict]) -> list[str]:
        inserts.clear()
        write_retrying(engine, lambda conn: upsert(conn, t, rows))
        return list(inserts)

    try:
        assert write([{"k": "a", "v": 1}, {"k": "b", "v": 1}]) == ["plain"]
        with caplog.at_level(logging.DEBUG, logger="ctxprec_ops.warehouse.engine"):
            assert write([{"k": "b", "v": 2}, {"k": "c", "v": 2}]) == ["plain", "upsert"]
        assert "running it again" in caplog.text and "write conflict" not in caplog.text  # at once
        with engine.connect() as conn:
            assert dict(conn.execute(sa.select(t.c.k, t.c.v)).all()) == {"a": 1, "b": 2, "c": 2}
        spell = [write([{"k": f"n{i}", "v": 0}]) for i in range(CONFLICT_SPELL)]
        assert spell == [["upsert"]] * CONFLICT_SPELL  # new keys, yet straight to ON CONFLICT
        assert write([{"k": "after", "v": 0}]) == ["plain"]
        inserts.clear()
        with write_transaction(engine) as conn:  # not run again when given up: never plain
            upsert(conn, t, [{"k": "once", "v": 0}])
        assert inserts == ["upsert"]
        with pytest.raises(sa.exc.DBAPIError, match="NOT NULL"):
            write([{"k": "null", "v": None}])
        assert write([{"k": "next", "v": 0}]) == ["plain"]  # no spell from a NOT NULL error
    finally:
        sa.event.remove(engine, "before_cursor_execute", seen)


@pytest.mark.parametrize(
    ("pool", "judge"),
    [
        ("engine of the caller", "lexical"),
        ("engine of the caller", "network"),
        ("url", "network"),
        ("url", "in a loop"),
    ],
)
def test_an_in_memory_duckdb_database_is_scored_whole(duckdb_url, judge_server, judge, pool):
    """An in-memory DuckDB database exists once per connection: the caller's engine (SQLAlchemy
    gives it a connection per thread) and ``get_engine("duckdb:///:memory:")`` (one connection
    shared) must both be read and written where the caller's tables are, by an inline judge and by
    a judge over the network (whose run otherwise reads, writes and commits verdicts on threads) —
    the URL's also from inside a running event loop (a notebook's), where the run goes on a thread
    of its own."""
    engine = (
        sa.create_engine("duckdb:///:memory:") if pool == "engine of the caller" else get_engine("duckdb:///:memory:")
    )
    rows = [dict(r, retrieval_context=json.dumps(r["retrieval_context"])) for r in day_rows(11)]
    create_logs(engine, rows, context_type=sa.Text)
    network = dict(judge="judge-test-model", judge_base_url=judge_server.base_url, judge_api_key="k", concurrency=4)
    cfg = PipelineConfig(warehouse=engine, chunk_size=4, **(network if judge != "lexical" else {"judge": "lexical"}))
    if judge == "in a loop":

        async def in_a_loop():
            return score_partition(cfg, DAY)

        summary = asyncio.run(in_a_loop())
    else:
        summary = score_partition(cfg, DAY)
    assert (summary.status, summary.rows_total, summary.rows_scored) == ("succeeded", 11, 11), summary.error_message
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM ctxprec_scores").scalar() == 11
        if judge != "lexical":  # the verdicts were written, with their chunks or as they came
            assert conn.exec_driver_sql("SELECT count(*) FROM ctxprec_judgments").scalar() > 0
    if pool == "url":  # the process's cached engine: a later run on the URL starts from nothing
        release_sqlite_files()


def test_a_database_attached_read_only_is_refused_before_judging(duckdb_url):
    """DuckDB has no grants to probe: a file opened with ``access_mode=read_only`` is refused by
    one catalogue query before any judge call, with a message that says so (not "grant it ..."),
    and nothing is written; the same file opened writable is scored."""
    from ctxprec_ops.warehouse.permissions import OutputPermissionError
    from ctxprec_ops.warehouse.schema import ensure_output_tables

    _load(duckdb_url)
    ensure_output_tables(get_engine(duckdb_url))  # the tables exist: ensuring them writes nothing
    get_engine(duckdb_url).dispose()  # DuckDB: one process opens a file one way
    read_only = f"{duckdb_url}?access_mode=read_only"
    judge = CountingJudge()
    with pytest.raises(OutputPermissionError) as info:
        score_partition(PipelineConfig(warehouse=read_only, judge=judge, chunk_size=3), DAY)
    assert "attached read-only" in str(info.value) and "grant" not in str(info.value)
    assert judge.calls == 0
    with get_engine(read_only).connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM ctxprec_runs").scalar_one() == 0
    get_engine(read_only).dispose()
    summary = score_partition(PipelineConfig(warehouse=duckdb_url, judge=judge, chunk_size=3), DAY)
    assert summary.rows_scored == 7 and judge.calls > 0


def test_the_output_tables_columns_are_read_in_one_query(duckdb_url):
    """Ensuring the output tables reads the four tables' columns from ``information_schema`` in
    one query (``migrate.StoredColumns``), not twice a table; a table an older version left
    without a column still gets it."""
    from ctxprec_ops.warehouse import schema

    engine = get_engine(duckdb_url)
    tables = schema.ensure_output_tables(engine)
    with engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE ctxprec_scores DROP COLUMN reference")  # nullable: added back
    statements: list[str] = []

    def seen(conn, cursor, statement, *args):
        statements.append(statement)

    sa.event.listen(engine, "before_cursor_execute", seen)
    try:
        schema._ensured.pop(engine, None)
        schema.ensure_output_tables(engine)
    finally:
        sa.event.remove(engine, "before_cursor_execute", seen)
    reads = [s for s in statements if "information_schema.columns" in s]
    assert len(reads) == 1, reads  # the four tables at once (eight queries before)
    assert sum("ADD COLUMN" in s for s in statements) == 1
    with engine.connect() as conn:
        names = [c["name"] for c in schema.get_columns(conn, "ctxprec_scores")]
    assert "reference" in names and set(names) == {c.name for c in tables.scores.columns}
