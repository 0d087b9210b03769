"""Databricks' write path as compiled SQL (no Databricks stand-in starts here: docs/warehouses.md).

The ``MERGE INTO`` statement ``DatabricksDialect`` writes a chunk with is compiled by
databricks-sqlalchemy's own dialect for the real output tables, checked against Databricks'
documented grammar (``MERGE INTO target [AS alias] USING source [AS alias] ON condition WHEN
MATCHED THEN UPDATE SET ... WHEN NOT MATCHED THEN INSERT (...) VALUES (...)``) and parsed by
sqlglot's Databricks dialect; its bound values are the rows, de-duplicated, through the columns'
types. The DDL of the output tables is compiled too (Delta tables, no index)."""

from __future__ import annotations

import re
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from sqlalchemy.schema import CreateTable

from ctxprec_ops.warehouse.dialects import dialect_class, for_dialect
from ctxprec_ops.warehouse.schema import output_tables
from ctxprec_ops.warehouse.scoring_key import ScoringKey

databricks_sqlalchemy = pytest.importorskip("databricks.sqlalchemy", reason="the [databricks] extra")
sqlglot = pytest.importorskip("sqlglot")

NOW = datetime(2026, 11, 28, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="module")
def sa_dialect():
    return databricks_sqlalchemy.DatabricksDialect()


@pytest.fixture(scope="module")
def family():
    return for_dialect("databricks")


def _score_row(log_id: str, score: float) -> dict:
    tables = output_tables()
    row = {c.name: None for c in tables.scores.columns}
    row.update(
        log_id=log_id, partition_key="2026-11-28", metric="contextual_precision", source_table="retrieval_logs",
        mapping="default", score=score, success=score >= 0.5, threshold=0.5, judge_model="m", prompt_version="v1",
        scored_at=NOW, run_id="r1",
    )  # fmt: skip
    return {k: v for k, v in row.items() if k in {c.name for c in tables.scores.columns}}


def _compiled(sa_dialect, stmt) -> tuple[str, dict]:
    compiled = stmt.compile(dialect=sa_dialect)
    return str(compiled), compiled.construct_params()


def test_the_family_is_registered_and_of_the_merge_family(family):
    assert type(family).__name__ == "DatabricksDialect"
    assert dialect_class("databricks") is type(family)
    assert not family.keys_enforced and family.native_upsert and family.claims == "lease"


def test_an_upsert_is_one_merge_into_statement_per_batch_in_databricks_grammar(sa_dialect, family):
    scores = output_tables().scores
    keys = [c.name for c in scores.primary_key.columns]
    rows = [_score_row("a", 0.25), _score_row("b", 0.75)]
    cols = list(rows[0])
    others = [c for c in cols if c not in keys]
    sql, params = _compiled(sa_dialect, family.merge_batch(sa_dialect, scores, rows, keys, others))
    flat = " ".join(sql.split())
    assert flat.startswith("MERGE INTO ctxprec_scores AS t USING (SELECT CAST(v.log_id AS STRING) AS log_id, ")
    assert f"AS v({', '.join(cols)})) AS s ON " in flat
    assert "ON " + " AND ".join(f"t.{k} = s.{k}" for k in keys) + " WHEN MATCHED THEN UPDATE SET " in flat
    assert "score = s.score" in flat and "log_id = s.log_id" not in flat.split("WHEN MATCHED")[1].split("WHEN NOT")[0]
    assert flat.endswith(
        f"WHEN NOT MATCHED THEN INSERT ({', '.join(cols)}) VALUES ({', '.join('s.' + c for c in cols)})"
    )
    # two rows of len(cols) named parameters, backtick-quoted markers (databricks-sqlalchemy's style)
    assert len(re.findall(r":`r\d+_\d+`", sql)) == 2 * len(cols)
    assert params[f"r1_{cols.index('log_id')}"] == "b" and params[f"r0_{cols.index('score')}"] == 0.25
    # the key columns' types as the family chose them; instants as TIMESTAMP (not TIMESTAMP_NTZ)
    assert "CAST(v.scored_at AS TIMESTAMP) AS scored_at" in flat
    assert "CAST(v.score AS " in flat
    parsed = sqlglot.parse_one(re.sub(r":`(\w+)`", r":\1", sql), read="databricks")
    assert type(parsed).__name__ == "Merge"


def test_insert_if_absent_has_no_when_matched_clause(sa_dialect, family):
    scores = output_tables().scores
    keys = [c.name for c in scores.primary_key.columns]
    sql, _ = _compiled(sa_dialect, family.merge_batch(sa_dialect, scores, [_score_row("a", 1.0)], keys, None))
    assert "WHEN MATCHED" not in sql and "WHEN NOT MATCHED THEN INSERT" in sql
    sqlglot.parse_one(re.sub(r":`(\w+)`", r":\1", sql), read="databricks")


def test_a_key_given_twice_is_written_once_with_its_last_row(sa_dialect, family):
    """The statements ``upsert`` executes, recorded by a connection stand-in that only collects
    them (nothing to run them against)."""
    scores = output_tables().scores
    keys = [c.name for c in scores.primary_key.columns]
    rows = [_score_row("a", 0.1), _score_row("b", 0.2), _score_row("a", 0.9)]

    class Recorder:
        dialect = sa_dialect
        statements: list = []

        def execute(self, stmt):
            self.statements.append(_compiled(sa_dialect, stmt))

    conn = Recorder()
    assert family.upsert(conn, scores, rows, keys) == 2
    ((sql, params),) = conn.statements
    score = list(rows[0]).index("score")
    log_id = list(rows[0]).index("log_id")
    assert {params[f"r{i}_{log_id}"]: params[f"r{i}_{score}"] for i in range(2)} == {"a": 0.9, "b": 0.2}


def test_a_chunk_over_one_batch_takes_one_statement_per_500_rows(sa_dialect, family):
    scores = output_tables().scores
    keys = [c.name for c in scores.primary_key.columns]
    rows = [_score_row(f"id{i}", 0.5) for i in range(1_200)]

    class Recorder:
        dialect = sa_dialect
        count = 0

        def execute(self, stmt):
            Recorder.count += 1

    assert family.insert_ignore(Recorder(), scores, rows, keys) == 1_200
    assert Recorder.count == 3


def test_the_output_tables_compile_as_delta_tables(sa_dialect):
    tables = output_tables()
    for table in (tables.scores, tables.failures, tables.runs, tables.judgments):
        ddl = str(CreateTable(table).compile(dialect=sa_dialect))
        assert "USING DELTA" in ddl, ddl
    judgments = str(CreateTable(tables.judgments).compile(dialect=sa_dialect))
    assert re.search(r"\bkey\b`? BINARY", judgments), judgments
    assert ScoringKey.FIELDS  # the key the scores' MERGE matches on is the declared one
    assert [c.name for c in tables.scores.primary_key.columns] == ["log_id", *ScoringKey.FIELDS]
    assert isinstance(sa.inspect(tables.scores).c.score.type, sa.types.TypeDecorator)


def test_delta_concurrency_conflicts_are_write_conflicts_and_other_errors_are_not(family):
    from sqlalchemy.exc import DBAPIError

    lost = DBAPIError("MERGE", {}, Exception("[DELTA_CONCURRENT_APPEND] ConcurrentAppendException: Files were added"))
    assert family.write_conflict(lost)
    assert family.write_conflict(Exception("io.delta.exceptions.ConcurrentDeleteReadException: ..."))
    assert not family.write_conflict(DBAPIError("MERGE", {}, Exception("[TABLE_OR_VIEW_NOT_FOUND] ctxprec_scores")))
