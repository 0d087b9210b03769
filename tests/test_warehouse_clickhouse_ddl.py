"""The tables the ClickHouse family creates (its write model is in the DDL): the output tables
are ``ReplacingMergeTree(ctxprec_version)`` ordered by their primary key, scores ``Float64``;
the lease claims table keeps every claimer's row (a plain ``MergeTree``); a ``LIKE … ESCAPE``
runs with ClickHouse's backslash escapes. chDB runs the statements."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

pytest.importorskip("clickhouse_connect")
pytest.importorskip("chdb")

from ctxprec_ops.warehouse.lease_claims import claims_table  # noqa: E402
from ctxprec_ops.warehouse.schema import output_tables  # noqa: E402


@pytest.fixture
def engine(tmp_path):
    from ctxprec_ops.warehouse.dialects import dialect_of

    engine = sa.create_engine(f"clickhousedb:///?interface=chdb&path={tmp_path}")
    with engine.begin() as conn:
        dialect_of(conn).create_tables(conn, output_tables().metadata)
        dialect_of(conn).create_table(conn, claims_table())
    yield engine
    engine.dispose()


def _engine_of(conn: sa.Connection, table: str) -> tuple[str, str]:
    return conn.exec_driver_sql(
        f"SELECT engine_full, sorting_key FROM system.tables WHERE database = currentDatabase() AND name = '{table}'"
    ).one()


def test_output_tables_replace_by_key_and_scores_are_float64(engine):
    scores = output_tables().scores
    with engine.connect() as conn:
        full, sorting = _engine_of(conn, "ctxprec_scores")
        assert full.startswith("ReplacingMergeTree(ctxprec_version)")
        assert sorting == ", ".join(c.name for c in scores.primary_key.columns)
        (score_type,) = conn.exec_driver_sql(
            "SELECT type FROM system.columns WHERE table = 'ctxprec_scores' AND name = 'score'"
        ).one()
        assert score_type.removeprefix("Nullable(").removesuffix(")") == "Float64"


def test_the_claims_table_keeps_two_claimers_rows_of_one_name(engine):
    with engine.connect() as conn:
        full, _ = _engine_of(conn, "ctxprec_claims")
        assert full.startswith("MergeTree")
        for holder in ("a", "b"):
            conn.exec_driver_sql(
                f"INSERT INTO ctxprec_claims (name, holder, expires_at) VALUES ('n', '{holder}', now64())"
            )
        conn.exec_driver_sql("SET final = 1")  # as every session of a run reads
        rows = conn.exec_driver_sql("SELECT holder FROM ctxprec_claims WHERE name = 'n' ORDER BY holder")
        assert [r[0] for r in rows] == ["a", "b"]


def test_like_with_an_escape_character_matches_literally(engine):
    t = sa.table("ctxprec_claims", sa.column("name", sa.String), sa.column("holder", sa.String))
    with engine.connect() as conn:
        conn.exec_driver_sql(
            "INSERT INTO ctxprec_claims (name, holder, expires_at) VALUES ('a_b%', 'x', now64()), ('axbc', 'y', now64())"
        )
        found = conn.execute(sa.select(t.c.holder).where(t.c.name.like("a/_b/%", escape="/"))).scalars().all()
        assert found == ["x"]
