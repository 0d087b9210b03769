"""What a newcomer reads on a first run: unscored days vs an empty warehouse, never-scored days
vs empty ones, no exception class names, URL errors with the right exit code and the package to
install, and a SQLite file left whole (no WAL mode, no -wal/-shm) after the command exits."""

from __future__ import annotations

import sqlite3

import numpy as np
import pytest
import sqlalchemy as sa

from ctxprec_ops.cli import main
from ctxprec_ops.monitoring import check_partition
from ctxprec_ops.warehouse.engine import MissingDriverError, UnknownDialectError, check_dialect
from tests.synthetic_history import JUDGE, PROMPT, Day, beta_scores, day_keys, write_history

DAYS = day_keys("2026-11-20", 7)  # 11-20 .. 11-26


@pytest.fixture
def url(tmp_path):
    path = tmp_path / "wh.db"
    eng = sa.create_engine(f"sqlite:///{path}")
    rng = np.random.default_rng(1)
    write_history(eng, [Day(k, beta_scores(rng, 50, 0.7)) for k in DAYS])
    eng.dispose()
    return f"sqlite:///{path}"


def test_a_day_before_any_score_is_not_called_an_empty_warehouse(url, capsys):
    assert main(["check", "--warehouse", url, "--partition", "2026-11-01"]) == 0
    out = capsys.readouterr().out
    assert "no scores at all" not in out
    assert "2026-11-01 has no contextual_precision scores, nor does any day before it" in out
    assert "2026-11-20..2026-11-26" in out


def test_a_never_scored_day_is_not_called_an_empty_source(url, capsys):
    assert main(["check", "--warehouse", url, "--partition", "2026-11-27"]) == 3  # the volume alert still fires
    out = " ".join(capsys.readouterr().out.split())  # notes wrap at the terminal's width
    assert "no rows at all" not in out and "not scored yet" in out
    assert "score it first (ctxprec score --partition 2026-11-27)" in out


def test_a_scored_empty_day_is_called_empty(url):
    eng = sa.create_engine(url)
    with eng.begin() as conn:  # the run happened and found nothing in the source
        conn.execute(
            sa.text(
                "INSERT INTO ctxprec_runs (run_id, partition_key, metric, source_table, mapping, status, rows_total,"
                " rows_scored, rows_cached, rows_failed, judge_model, prompt_version) VALUES ('r-empty', '2026-11-27',"
                " 'contextual_precision', 'retrieval_logs', 'default', 'succeeded', 0, 0, 0, 0, :judge, :prompt)"
            ),
            {"judge": JUDGE, "prompt": PROMPT},
        )
    r = check_partition(eng, "2026-11-27")
    eng.dispose()
    assert "no rows at all (the run found none in the source)" in r.alerts[0].message
    assert not any("not been scored" in n for n in r.notes)


@pytest.mark.parametrize("command", [["check", "--partition", "2026-11-01"], ["trend"], ["report", "--out", "REPORT"]])
def test_empty_warehouse_message_has_no_class_name(tmp_path, capsys, command):
    empty = tmp_path / "empty.db"
    sqlite3.connect(empty).close()
    argv = [a.replace("REPORT", str(tmp_path / "r.html")) for a in command]
    assert main(argv + ["--warehouse", f"sqlite:///{empty}"]) == 1
    err = capsys.readouterr().err.strip()
    assert "Error" not in err and "MissingScoresTable" not in err
    assert err.endswith(
        "nothing has been scored in this warehouse yet (no ctxprec_scores table): "
        "score a partition first (ctxprec score --partition YYYY-MM-DD)"
    )


@pytest.mark.parametrize(
    "command",
    [
        ["score", "--partition", "2026-11-20"],
        ["check", "--partition", "2026-11-20"],
        ["trend"],
        ["estimate", "--partition", "2026-11-20"],
    ],
)
def test_unknown_dialect_is_a_usage_error(capsys, command):
    assert main(command + ["--warehouse", "notadialect://x"]) == 2  # like every other malformed URL
    err = capsys.readouterr().err
    assert "unknown database 'notadialect'" in err and len(err.strip().splitlines()) == 1
    assert main(command + ["--warehouse", "not a url"]) == 2
    capsys.readouterr()


def test_missing_driver_names_the_package(capsys):
    pytest.importorskip("sqlalchemy.dialects.mysql")
    try:
        import MySQLdb  # noqa: F401

        pytest.skip("mysqlclient is installed here")
    except ImportError:
        pass
    assert main(["check", "--warehouse", "mysql://u:s3cret@db.example/x", "--partition", "2026-11-20"]) == 1
    err = capsys.readouterr().err
    assert "pip install mysqlclient" in err and "ModuleNotFoundError" not in err and "s3cret" not in err
    with pytest.raises(MissingDriverError, match="pip install mysqlclient"):
        check_dialect("mysql://u@db.example/x")  # the library path (Airflow, Dagster) says the same
    with pytest.raises(UnknownDialectError):
        check_dialect("notadialect://x")


def _journal_mode(path) -> str:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA journal_mode").fetchone()[0]
    finally:
        conn.close()


def test_score_leaves_the_sqlite_file_whole(tmp_path, capsys, monkeypatch):
    from ctxprec_ops.demo.sample import create_sample_warehouse

    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    db = tmp_path / "wh.db"
    eng = sa.create_engine(f"sqlite:///{db}")
    info = create_sample_warehouse(
        eng, days=2, rows_per_day=(30, 40), conversations_per_day=(2, 3), end_date="2026-11-28"
    )
    eng.dispose()
    assert (
        main(["score", "--warehouse", f"sqlite:///{db}", "--partition", info.partitions[-1], "--judge", "lexical"]) == 0
    )
    capsys.readouterr()
    assert not (tmp_path / "wh.db-wal").exists() and not (tmp_path / "wh.db-shm").exists()
    assert _journal_mode(db) == "delete"
    # a copy of the .db file alone has every scored row
    copy = tmp_path / "copy.db"
    copy.write_bytes(db.read_bytes())
    conn = sqlite3.connect(copy)
    assert conn.execute("SELECT count(*) FROM ctxprec_scores").fetchone()[0] > 0
    conn.close()


def test_release_keeps_wal_while_another_process_has_the_file_open(tmp_path):
    from ctxprec_ops.warehouse.engine import get_engine, release_sqlite_files

    db = tmp_path / "busy.db"
    engine = get_engine(f"sqlite:///{db}")
    with engine.begin() as conn:
        conn.execute(sa.text("CREATE TABLE t (x)"))
    other = sqlite3.connect(db)  # someone else reading: the switch must neither wait nor fail
    other.execute("BEGIN")
    other.execute("SELECT * FROM t").fetchall()
    release_sqlite_files()
    other.rollback()
    other.close()
    assert _journal_mode(db) == "wal"
