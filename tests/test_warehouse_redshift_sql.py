"""The SQL the Redshift family writes, checked against Redshift's documented grammar (no Redshift
runs here; the conformance suite runs the same statements on a PostgreSQL stand-in): a ``MERGE``
whose target takes no alias, whose source is a table, with both ``WHEN`` clauses; an
insert-if-absent a Redshift ``MERGE`` cannot say, as ``INSERT … SELECT … WHERE NOT EXISTS``."""

from __future__ import annotations

import re

import pytest

pytest.importorskip("sqlalchemy_redshift")

from sqlalchemy.dialects import registry  # noqa: E402

from ctxprec_ops.warehouse.dialects.redshift import insert_absent_sql, merge_sql  # noqa: E402
from ctxprec_ops.warehouse.schema import output_tables  # noqa: E402

PREP = registry.load("redshift")().identifier_preparer


def _scores_sql() -> tuple[str, list[str], list[str]]:
    scores = output_tables().scores
    keys = [c.name for c in scores.primary_key.columns]
    columns = [c.name for c in scores.columns]
    others = [c for c in columns if c not in keys]
    return merge_sql(PREP, scores, "ctxprec_stage_x", keys, columns, others), keys, others


def test_the_merge_has_an_unaliased_target_a_table_source_and_both_when_clauses():
    sql, keys, others = _scores_sql()
    head = re.match(r"MERGE INTO (\S+) USING (\S+) AS s ON ", sql)
    assert head, sql
    assert head.group(1) == "ctxprec_scores" and head.group(2) == "ctxprec_stage_x"  # no target alias, a table
    on = sql[head.end() : sql.index(" WHEN MATCHED")]
    assert on == " AND ".join(f"ctxprec_scores.{PREP.quote(k)} = s.{PREP.quote(k)}" for k in keys)
    assert sql.count("WHEN MATCHED THEN UPDATE SET ") == 1 and sql.count("WHEN NOT MATCHED THEN INSERT (") == 1
    updated = sql[sql.index("UPDATE SET ") + len("UPDATE SET ") : sql.index(" WHEN NOT MATCHED")]
    # target columns unqualified in SET (Redshift rejects a table name there); the key is not updated
    assert [part.split(" = ")[0] for part in updated.split(", ")] == [PREP.quote(c) for c in others]


def test_insert_if_absent_is_an_insert_select_not_a_merge():
    scores = output_tables().scores
    keys = [c.name for c in scores.primary_key.columns]
    sql = insert_absent_sql(PREP, scores, "ctxprec_stage_x", keys, [c.name for c in scores.columns])
    assert sql.startswith("INSERT INTO ctxprec_scores (") and "MERGE" not in sql
    assert "FROM ctxprec_stage_x AS s WHERE NOT EXISTS (SELECT 1 FROM ctxprec_scores AS t WHERE " in sql
