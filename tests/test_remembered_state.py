"""What the process remembers about a database is true of that database.

A long-lived worker (Dagster, Airflow, a notebook) scores many warehouses and partitions in one
process; the tables it has created, its engines and its counts are remembered to save a
catalogue query per write. Each memory must be of the database it names: not of a transaction
that rolled back, not of another file with the same URL text, not of an object whose ``id()``
was reused.
"""

from __future__ import annotations

import os

import pytest
import sqlalchemy as sa
from sqlalchemy import Column, Integer, MetaData, PrimaryKeyConstraint, String, Table

from ctxprec_ops.judge.answer_watch import AnswerWatch
from ctxprec_ops.scoring.verdicts import AnswerProblem
from ctxprec_ops.warehouse.claims import RowClaims, claim_scope
from ctxprec_ops.warehouse.engine import get_engine, write_retrying, write_transaction
from ctxprec_ops.warehouse.label_figures import LABEL_FIGURES, write_figures
from ctxprec_ops.warehouse.upsert import upsert


def _figure(log_id: str, k: int | None = 3) -> dict:
    return {
        "log_id": log_id,
        "metric": "contextual_precision",
        "judge_model": "m",
        "prompt_version": "v1",
        "partition_key": "2026-11-28",
        "k": k,
        "relevant_retrieved": 1,
        "relevant_total": 2,
        "recall": 0.5,
        "reciprocal_rank": 1.0,
        "ndcg": 0.7,
        "run_id": "r1",
    }


def _has(engine: sa.Engine, name: str) -> bool:
    return sa.inspect(engine).has_table(name)


def test_a_table_whose_create_rolled_back_is_created_by_the_next_write(tmp_path):
    """The first write creates the label-figures table and then fails (a NOT NULL column left
    empty): its transaction, CREATE included, is undone. The next write must create it again;
    it used to take the table as created and fail with "no such table" for the process's life."""
    engine = get_engine(f"sqlite:///{tmp_path / 'wh.db'}")
    with pytest.raises(sa.exc.IntegrityError):
        with write_transaction(engine) as conn:
            write_figures(conn, None, [_figure("a", k=None)])
    assert not _has(engine, LABEL_FIGURES)  # the CREATE went with the transaction

    with write_transaction(engine) as conn:
        write_figures(conn, None, [_figure("b")])
    with engine.connect() as conn:
        assert conn.execute(sa.text(f"SELECT log_id FROM {LABEL_FIGURES}")).scalars().all() == ["b"]


def test_a_transaction_run_again_creates_the_table_again_on_duckdb(tmp_path):
    """DuckDB gives a transaction up on purpose when a plain insert meets an existing key
    (``RunAgain``) and ``write_retrying`` runs it again: the table created by the first attempt
    is gone with it, and the second attempt must create it (the pipeline's chunk write has this
    shape: label figures, then the scores' upsert)."""
    engine = get_engine(f"duckdb:///{tmp_path / 'wh.duckdb'}")
    other = Table("other_rows", MetaData(), Column("id", String(20)), Column("v", Integer), PrimaryKeyConstraint("id"))
    with write_transaction(engine) as conn:
        other.create(conn)
        upsert(conn, other, [{"id": "k1", "v": 1}])
    attempts = []

    def work(conn: sa.Connection) -> None:
        attempts.append(1)
        write_figures(conn, None, [_figure("c")])
        upsert(conn, other, [{"id": "k1", "v": 2}])  # the key exists: the plain insert gives up first

    write_retrying(engine, work)
    assert len(attempts) >= 2  # the case this test is about: the first attempt was given up
    with engine.connect() as conn:
        assert conn.execute(sa.text(f"SELECT log_id FROM {LABEL_FIGURES}")).scalars().all() == ["c"]
        assert conn.execute(sa.text("SELECT v FROM other_rows")).scalars().all() == [2]


def test_a_table_is_created_once_per_engine_once_committed(tmp_path):
    """Once its transaction committed, the table is not looked for again on that engine (a write
    costs no catalogue query); another engine looks for it itself."""
    from ctxprec_ops.warehouse.ddl import CreatedTables

    created = CreatedTables()
    table = Table("things", MetaData(), Column("id", Integer, primary_key=True))
    first = get_engine(f"sqlite:///{tmp_path / 'a.db'}")
    with write_transaction(first) as conn:
        created.ensure(conn, table)
    assert _has(first, "things")
    with first.begin() as conn:  # dropped behind the process's back: it is not looked for again
        table.drop(conn)
    with write_transaction(first) as conn:
        created.ensure(conn, table)
    assert not _has(first, "things")

    second = get_engine(f"sqlite:///{tmp_path / 'b.db'}")
    with write_transaction(second) as conn:
        created.ensure(conn, table)
    assert _has(second, "things")


def test_a_table_created_outside_a_write_transaction_is_looked_for_again(tmp_path):
    """A caller's own transaction (not ``write_transaction``) never marks the table: the next
    write checks for it again, which is slower but never wrong."""
    from ctxprec_ops.warehouse.ddl import CreatedTables

    created = CreatedTables()
    table = Table("things", MetaData(), Column("id", Integer, primary_key=True))
    engine = get_engine(f"sqlite:///{tmp_path / 'wh.db'}")
    with engine.begin() as conn:
        created.ensure(conn, table)
    with engine.begin() as conn:
        table.drop(conn)
    with write_transaction(engine) as conn:
        created.ensure(conn, table)
    assert _has(engine, "things")


def _claim(engine: sa.Engine, run_id: str) -> list[str]:
    with RowClaims(engine, claim_scope("logs", run_id), run_id=run_id) as claims:
        return sorted(claims.claim(["id-1", "id-2"]).kept)


def test_a_recreated_database_file_gets_its_own_claims_table(tmp_path):
    """The claims table was remembered per URL text: a warehouse file deleted and made again (the
    demo does so), opened by a new engine, was taken to have it — "no such table: ctxprec_claims"."""
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    first = sa.create_engine(url)
    assert _claim(first, "run-1") == ["id-1", "id-2"]
    first.dispose()
    os.unlink(tmp_path / "wh.db")
    second = sa.create_engine(url)
    assert _claim(second, "run-2") == ["id-1", "id-2"]
    assert _has(second, "ctxprec_claims")


def test_a_relative_sqlite_url_names_the_file_of_the_working_directory_it_was_given_in(tmp_path, monkeypatch):
    """``get_engine`` caches engines per URL: ``sqlite:///wh.db`` given in another directory used
    to return the first directory's engine, so the run read and wrote the other project's file
    (while the missing-file check looked at this one's)."""
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    monkeypatch.chdir(a)
    in_a = get_engine("sqlite:///wh.db")
    with write_transaction(in_a) as conn:
        conn.execute(sa.text("CREATE TABLE marker (project TEXT)"))
        conn.execute(sa.text("INSERT INTO marker VALUES ('a')"))
    monkeypatch.chdir(b)
    in_b = get_engine("sqlite:///wh.db")
    assert in_b is not in_a
    assert in_b.url.database == str(b / "wh.db")
    assert not _has(in_b, "marker")
    with in_a.connect() as conn:  # the first engine still opens a's file
        assert conn.execute(sa.text("SELECT project FROM marker")).scalar_one() == "a"
    assert (b / "wh.db").exists()


def test_a_relative_duckdb_url_is_the_file_of_the_working_directory_it_was_given_in(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    monkeypatch.chdir(a)
    in_a = get_engine("duckdb:///wh.duckdb")
    monkeypatch.chdir(b)
    in_b = get_engine("duckdb:///wh.duckdb")
    assert in_b is not in_a
    assert (in_a.url.database, in_b.url.database) == (str(a / "wh.duckdb"), str(b / "wh.duckdb"))
    assert get_engine("duckdb:///:memory:").url.database == ":memory:"


def test_the_answer_watch_counts_every_unusable_case_even_when_ids_are_reused():
    """The watch counted cases by ``id()``: a case gone and collected leaves its id to the next
    one, which then did not count and the watch tripped later, after more paid calls."""
    watch = AnswerWatch(trip_after=10**9)
    problem = AnswerProblem("node ids start at 0", kind="zero_based", pattern="node ids start at 0")
    for _ in range(200):
        watch.unusable(object(), [problem, problem], failed=True)  # freed at once: the next reuses its id
    assert len(watch.cases) == 200
