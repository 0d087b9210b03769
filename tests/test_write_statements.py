"""The write path issues a few statements per chunk, never one per row, on every backend that
starts here: SQLite, PostgreSQL, MariaDB, DuckDB and Snowflake (fakesnow).

A partition of 30 rows and one of 300, each scored as one chunk: the larger one may take a few more
statements (SQLite's multi-row statements hold 128 rows, PyMySQL splits a batch at 1 MB), but a
per-row path (UPDATE-then-INSERT for each score and each cached judgment) would add hundreds.
On MariaDB the server's own statement counters say the same as the client's. DuckDB runs an
executemany as one statement per row, so there the native insert is one multi-row ``VALUES``
statement per batch, and each statement the client sends is one the database runs. Snowflake's
MERGE path: a multi-row ``INSERT`` into the stage and one ``MERGE`` per table.
"""

from __future__ import annotations

import json

import pytest
import sqlalchemy as sa

from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import CountingJudge, create_logs, day_rows

FEW, MANY = 30, 300
#: what the larger chunk may add: a few more multi-row statements per output table
SLACK = 16
_WRITES = ("insert", "update", "copy", "merge", "replace", "delete")


@pytest.fixture(params=["sqlite", "postgresql", "mariadb", "duckdb", "snowflake"])
def url(request: pytest.FixtureRequest, tmp_path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'w.db'}"
    fixture = {"postgresql": "pg_url", "mariadb": "mariadb_url", "duckdb": "duckdb_url", "snowflake": "snowflake_url"}[
        request.param
    ]
    return str(request.getfixturevalue(fixture))


def _server_writes(engine: sa.Engine) -> int:
    """MariaDB's global counters of write statements (each multi-row statement counts once)."""
    with engine.connect() as conn:
        rows = conn.exec_driver_sql(
            "SHOW GLOBAL STATUS WHERE Variable_name IN ('Com_insert', 'Com_update', 'Com_delete')"
        )
        return sum(int(v) for _, v in rows)


def _score_counting(url: str, day: str) -> tuple[int, int | None]:
    engine = get_engine(url)
    seen: list[str] = []

    def count(conn, cursor, statement, parameters, context, executemany):  # noqa: ARG001
        head = statement.lstrip().split(None, 1)[0].lower()
        if head in _WRITES and "ctxprec_" in statement:
            seen.append(statement)
            if executemany and conn.dialect.name == "duckdb":  # DuckDB runs it row by row
                seen.extend([statement] * (len(parameters) - 1))

    mysql = engine.dialect.name in ("mysql", "mariadb")
    before = _server_writes(engine) if mysql else None
    sa.event.listen(engine, "before_cursor_execute", count)
    try:
        summary = score_partition(PipelineConfig(warehouse=url, judge=CountingJudge(), chunk_size=MANY), day)
    finally:
        sa.event.remove(engine, "before_cursor_execute", count)
    assert summary.rows_scored in (FEW, MANY)
    server = _server_writes(engine) - before if before is not None else None
    return len(seen), server


def test_one_chunk_takes_a_few_statements_whatever_its_rows(url):
    engine = get_engine(url)
    rows = day_rows(FEW, day="2026-11-27") + day_rows(MANY, day="2026-11-28", start_id=FEW + 1)
    if engine.dialect.name == "snowflake":  # fakesnow has no SQLAlchemy JSON: the nodes as JSON text
        rows = [dict(r, retrieval_context=json.dumps(r["retrieval_context"])) for r in rows]
        create_logs(engine, rows, context_type=sa.Text)
    else:
        create_logs(engine, rows)
    few, few_server = _score_counting(url, "2026-11-27")
    many, many_server = _score_counting(url, "2026-11-28")
    assert many <= few + SLACK, (few, many)
    assert many < MANY / 4, many  # a per-row path would take 2+ statements a row
    if few_server is not None:
        assert many_server is not None and many_server <= few_server + SLACK, (few_server, many_server)
