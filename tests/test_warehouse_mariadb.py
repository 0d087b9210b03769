"""MariaDB as users' tables and servers really are (tests/fixtures/mariadb.py): ids that differ
only by case or accent in a binary-collated column, DOUBLE ids, a server whose time zone is not
UTC, ``--segment`` runs, and output tables an older version created with the server's
case-insensitive collation. Every source row of the partition ends in exactly one output row
under its own exact id."""

from __future__ import annotations

import re
from datetime import datetime

import pytest
import sqlalchemy as sa
from sqlalchemy.dialects.mysql import DOUBLE, TIMESTAMP
from sqlalchemy.schema import CreateTable

from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.warehouse.engine import get_engine
from ctxprec_ops.warehouse.schema import output_tables
from tests.fixtures.mariadb import NON_UTC_TIME_ZONE, binary_id
from tests.fixtures.warehouse_data import NODES, CountingJudge, create_logs, log_row, query

DAY = "2026-11-28"
VARIANTS = ["abc", "ABC", "Abc", "resume", "résumé", "Résumé"]


def _rows(ids: list, at: datetime = datetime(2026, 11, 28, 12), salt: str = "") -> list[dict]:
    """One row per id, each with nodes of its own (no two rows share a judgment)."""
    return [log_row(i, at, context=[f"{n} (row {k}{salt})" for n in NODES], as_text=True) for k, i in enumerate(ids)]


def _scored(url: str, table: str = "ctxprec_scores") -> list[tuple]:
    return query(url, f"SELECT log_id, source_table FROM {table} ORDER BY log_id, source_table")


def test_ids_differing_by_case_or_accent_each_get_their_own_score(mariadb_url):
    create_logs(get_engine(mariadb_url), _rows(VARIANTS), id_type=binary_id(), context_type=sa.Text)
    judge = CountingJudge()
    summary = score_partition(PipelineConfig(warehouse=mariadb_url, judge=judge, chunk_size=4), DAY)
    assert summary.rows_scored == len(VARIANTS) and summary.rows_failed == 0 and judge.calls == len(VARIANTS)
    got = [r[0] for r in _scored(mariadb_url)]
    assert sorted(got) == sorted(VARIANTS) and len(set(got)) == len(VARIANTS)  # byte for byte, none merged
    again = CountingJudge()
    rerun = score_partition(PipelineConfig(warehouse=mariadb_url, judge=again, chunk_size=4), DAY)
    assert again.calls == 0 and rerun.rows_cached == len(VARIANTS)


def test_tables_whose_names_differ_by_case_keep_their_own_scores(mariadb_url):
    """``source_table`` compares exactly too: two tables ``logs`` and ``LOGS`` (distinct on a
    case-sensitive file system, MariaDB's default on Linux) with the same ids are two sources."""
    engine = get_engine(mariadb_url)
    for name in ("logs", "LOGS"):
        create_logs(engine, _rows([1, 2, 3], salt=name), name=name, context_type=sa.Text)
    for name in ("logs", "LOGS"):
        judge = CountingJudge()
        summary = score_partition(PipelineConfig(warehouse=mariadb_url, judge=judge, source_table=name), DAY)
        assert summary.rows_scored == 3 and judge.calls == 3, name  # none taken for the other table's
    assert _scored(mariadb_url) == [(i, t) for i in ("1", "2", "3") for t in ("LOGS", "logs")]


DOUBLES = [1.0, 1.0000000000000002, 1e-300, 0.1, -2.5, 1e300, 123456789.12345678]


def test_double_ids_keep_their_exact_text(mariadb_url):
    """A DOUBLE id's ``log_id`` is its shortest round-trip text (``repr``): ``1.0`` and
    ``1.0000000000000002`` stay two ids, ``1e-300`` is not ``0E-10``; keyset chunks of two rows
    page through them without losing or repeating one."""
    create_logs(get_engine(mariadb_url), _rows(DOUBLES), id_type=DOUBLE(), context_type=sa.Text)
    summary = score_partition(PipelineConfig(warehouse=mariadb_url, judge=CountingJudge(), chunk_size=2), DAY)
    assert summary.rows_scored == len(DOUBLES) and summary.rows_failed == 0
    got = [r[0] for r in _scored(mariadb_url)]
    assert sorted(got) == sorted(repr(d) for d in DOUBLES)
    assert sorted(float(g) for g in got) == sorted(DOUBLES)  # the text reads back as the same double


# (id, the instant in UTC): the server's local day (-05:00) of 2026-11-28 would be ids 2 and 3
INSTANTS = [
    (0, "2026-11-27 23:00:00"),  # 18:00 on the 27th locally
    (1, "2026-11-28 00:30:00"),  # 19:30 on the 27th locally
    (2, "2026-11-28 23:30:00"),  # 18:30 on the 28th locally
    (3, "2026-11-29 03:00:00"),  # 22:00 on the 28th locally
]


@pytest.mark.parametrize("column", ["TIMESTAMP", "DATETIME"])
def test_a_server_not_in_utc_partitions_by_the_utc_day(mariadb_non_utc_server, mariadb_non_utc_url, column):
    """A ``TIMESTAMP`` holds instants, shown in the session's time zone; a ``DATETIME`` holds what
    was written, a naive value the product reads as UTC. Either way the partition is the UTC day,
    whatever the server's ``default_time_zone``."""
    assert mariadb_non_utc_server.admin("SELECT @@global.time_zone") == [(NON_UTC_TIME_ZONE,)]
    time_type = TIMESTAMP() if column == "TIMESTAMP" else sa.DateTime()
    create_logs(get_engine(mariadb_non_utc_url), [], time_type=time_type, context_type=sa.Text)
    db = sa.engine.make_url(mariadb_non_utc_url).database
    rows = _rows([i for i, _ in INSTANTS])
    values = [(i, at, r["input"], r["expected_output"], r["retrieval_context"]) for (i, at), r in zip(INSTANTS, rows)]
    # an application that writes its instants in UTC, as the product expects
    import pymysql

    writer = pymysql.connect(
        unix_socket=mariadb_non_utc_server.socket_path, user="root", database=db, autocommit=True,
        init_command="SET time_zone = '+00:00'",
    )  # fmt: skip
    try:
        with writer.cursor() as cur:
            cur.executemany(
                "INSERT INTO retrieval_logs (id, event_time, input, expected_output, retrieval_context) "
                "VALUES (%s, %s, %s, %s, %s)",
                values,
            )
    finally:
        writer.close()
    for day, want in (("2026-11-27", ["0"]), (DAY, ["1", "2"]), ("2026-11-29", ["3"])):
        summary = score_partition(PipelineConfig(warehouse=mariadb_non_utc_url, judge=CountingJudge()), day)
        assert summary.rows_total == len(want), (day, column)
        got = query(mariadb_non_utc_url, "SELECT log_id FROM ctxprec_scores WHERE partition_key = :d", d=day)
        assert sorted(r[0] for r in got) == want, (day, column)


def test_segment_runs_work_and_keep_variant_ids_apart(mariadb_url):
    """``ctxprec_segments``' key (the score's key and the partition) fits InnoDB's 3,072 bytes."""
    engine = get_engine(mariadb_url)
    create_logs(engine, _rows(VARIANTS), id_type=binary_id(), context_type=sa.Text)
    with engine.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE retrieval_logs ADD COLUMN tenant VARCHAR(32)")
        conn.exec_driver_sql("UPDATE retrieval_logs SET tenant = IF(id LIKE BINARY '%%e%%', 'acme', 'globex')")
    cfg = PipelineConfig(warehouse=mariadb_url, judge=CountingJudge(), segments=["tenant"], chunk_size=4)
    summary = score_partition(cfg, DAY)
    assert summary.rows_scored == len(VARIANTS)
    got = query(mariadb_url, "SELECT log_id, seg_tenant FROM ctxprec_segments ORDER BY log_id")
    assert sorted(got) == sorted((i, "acme" if "e" in i else "globex") for i in VARIANTS)


def _old_ddl(table: sa.Table, dialect: sa.engine.Dialect) -> str:
    """``table`` as an older version created it: every text column in the server's default
    character set and collation (utf8mb4_general_ci: case- and accent-insensitive)."""
    ddl = str(CreateTable(table).compile(dialect=dialect))
    return re.sub(r" CHARACTER SET \w+ COLLATE \w+", "", ddl)


def test_output_tables_of_an_older_version_get_binary_keys_and_keep_their_rows(mariadb_url):
    engine = get_engine(mariadb_url)
    t = output_tables()
    old_score = {
        "log_id": "abc",
        "partition_key": DAY,
        "metric": "contextual_precision",
        "source_table": "retrieval_logs",
        "mapping": "default",
        "score": 0.5,
        "success": True,
        "threshold": 0.5,
        "verdicts": [],
        "judge_model": "old-judge",
        "prompt_version": "v0",
        "run_id": "old-run",
        "scored_at": datetime(2026, 1, 1),
    }
    with engine.begin() as conn:  # before this process ensures the tables: as an older version left them
        for table in (t.scores, t.failures, t.runs, t.judgments):
            conn.exec_driver_sql(_old_ddl(table, conn.dialect))
        conn.execute(sa.insert(t.scores), [old_score])
    collations = "SELECT collation_name FROM information_schema.columns WHERE table_schema = DATABASE() "
    collations += "AND table_name = 'ctxprec_scores' AND column_name = 'log_id'"
    assert query(mariadb_url, collations) == [("utf8mb4_general_ci",)]
    create_logs(engine, _rows(VARIANTS), id_type=binary_id(), context_type=sa.Text)
    summary = score_partition(PipelineConfig(warehouse=mariadb_url, judge=CountingJudge()), DAY)
    assert summary.rows_scored == len(VARIANTS)
    assert query(mariadb_url, collations) == [("utf8mb4_bin",)]
    got = query(mariadb_url, "SELECT log_id, judge_model FROM ctxprec_scores ORDER BY log_id, judge_model")
    assert ("abc", "old-judge") in got  # the old row is still there
    assert sorted(r[0] for r in got if r[1] != "old-judge") == sorted(VARIANTS)


def test_a_judge_name_longer_than_the_key_allows_is_refused_before_judging(mariadb_url):
    """``judge_model`` holds 112 characters there (the key's size): a longer custom judge name is
    refused before any judge call, not after judging at the first write."""
    from ctxprec_ops.errors import JudgeConfigurationError

    create_logs(get_engine(mariadb_url), _rows([1, 2]), context_type=sa.Text)
    judge = CountingJudge(name="custom-" + "x" * 143)
    with pytest.raises(JudgeConfigurationError, match=r"judge_model .* holds 1 to 112 characters, got 150"):
        score_partition(PipelineConfig(warehouse=mariadb_url, judge=judge), DAY)
    assert judge.calls == 0


ODD_TEXTS = [
    'it\'s "quoted"',
    "back\\slash \\' \\\\ and \\n as text",
    "new\nline, carriage\rreturn, tab\t, ctrl-Z \x1a, NUL \x00 inside",
    "100% _like_ %s %(name)s {braces}",
    "Ünïcode ☃ 漢字 🙂 and '' doubled",
    "",
    "escapes next to each other: \\0 \x00\\ '\\' \\\x00' \\\\'",
    '{"reason": "the node\'s text \\"quoted\\" in JSON", "path": "C:\\\\temp"}',
]
DOUBLE_VALUES = [0.1, -2.5, 1e300, 5e-324, 123456789.12345678, 1.0, 0.0]


@pytest.mark.parametrize("mode", ["default", "NO_BACKSLASH_ESCAPES"])
def test_multi_row_literals_round_trip_exactly(mariadb_url, mode):
    """The write path renders values into the statement itself (``mysql_values``): every text
    (quotes, backslashes, control characters, NUL, ``%``, non-ASCII), every byte value and
    every double comes back exactly, whether or not the session reads backslashes as escapes."""
    from sqlalchemy.dialects.mysql import LONGBLOB, LONGTEXT, VARCHAR

    from ctxprec_ops.warehouse.dialects.mysql import MySQLDialect
    from ctxprec_ops.warehouse.dialects.mysql_values import literal_insert

    meta = sa.MetaData()
    t = sa.Table(
        "odd_values",
        meta,
        sa.Column("k", VARCHAR(64, charset="utf8mb4", collation="utf8mb4_bin"), primary_key=True),
        sa.Column("txt", LONGTEXT(charset="utf8mb4", collation="utf8mb4_bin")),
        sa.Column("raw", LONGBLOB),
        sa.Column("num", DOUBLE(asdecimal=False)),
        sa.Column("flag", sa.Boolean),
    )
    engine = get_engine(mariadb_url)
    meta.create_all(engine)
    rows = [
        {"k": f"k{i}", "txt": text, "raw": bytes(range(256))[i:] + b"'\\", "num": num, "flag": i % 2 == 0}
        for i, (text, num) in enumerate(zip(ODD_TEXTS * 2, DOUBLE_VALUES * 2))
    ]
    dialect = MySQLDialect()
    with engine.begin() as conn:
        if mode != "default":
            conn.exec_driver_sql(f"SET SESSION sql_mode = CONCAT(@@sql_mode, ',{mode}')")
        others = [c for c in rows[0] if c != "k"]
        assert literal_insert(conn, dialect.native_insert(t, ["k"], others), t, rows)  # not the fallback
        got = {r.k: r for r in conn.execute(sa.select(t))}
        if mode != "default":
            conn.exec_driver_sql("SET SESSION sql_mode = REPLACE(@@sql_mode, ',NO_BACKSLASH_ESCAPES', '')")
    assert len(got) == len(rows)
    for row in rows:
        back = got[row["k"]]
        assert (back.txt, bytes(back.raw), back.num, bool(back.flag)) == (
            row["txt"],
            row["raw"],
            row["num"],
            row["flag"],
        ), row["k"]


@pytest.mark.parametrize("mode", ["default", "NO_BACKSLASH_ESCAPES"])
def test_look_ups_and_clean_up_with_literal_lists_touch_exactly_their_rows(mariadb_url, mode):
    """``IN`` lists written out as literals (``mysql_lookups``): ids with quotes, backslashes,
    NUL, ``%`` and letters differing only by case find (and delete) exactly their own rows, and
    byte keys exactly theirs, whether or not the session reads backslashes as escapes."""
    from sqlalchemy.dialects.mysql import VARBINARY, VARCHAR

    from ctxprec_ops.warehouse.dialects.mysql import MySQLDialect

    text = VARCHAR(255, charset="utf8mb4", collation="utf8mb4_bin")
    meta = sa.MetaData()
    scores = sa.Table(
        "lk_scores", meta, sa.Column("log_id", text, primary_key=True), sa.Column("metric", text, primary_key=True)
    )
    failures = sa.Table(
        "lk_failures", meta, sa.Column("log_id", text, primary_key=True), sa.Column("metric", text, primary_key=True)
    )
    keyed = sa.Table("lk_keys", meta, sa.Column("k", VARBINARY(32), primary_key=True), sa.Column("v", sa.Integer))
    engine = get_engine(mariadb_url)
    meta.create_all(engine)
    ids = [t for t in ODD_TEXTS if t] + ["abc", "ABC", "a\\'b", "a''b"]
    keys = [bytes([i]) * 23 for i in (0, 39, 92, 37, 255)] + [b"\\'\x00%"]
    dialect = MySQLDialect()
    metric = "m'1\\"
    with engine.begin() as conn:
        if mode != "default":
            conn.exec_driver_sql(f"SET SESSION sql_mode = CONCAT(@@sql_mode, ',{mode}')")
        conn.execute(sa.insert(scores), [{"log_id": i, "metric": metric} for i in ids[::2]])
        conn.execute(sa.insert(failures), [{"log_id": i, "metric": metric} for i in ids])
        conn.execute(sa.insert(keyed), [{"k": k, "v": n} for n, k in enumerate(keys)])
        wanted = ids[1:5] + ["absent", "Abc"]
        found = dialect.select_in(conn, scores, ["log_id"], "log_id", wanted, [("metric", metric)])
        assert sorted(r[0] for r in found) == sorted(set(wanted) & set(ids[::2]))
        got = dialect.select_in(conn, keyed, ["k", "v", None], "k", keys[1:] + [b"\x01" * 23], [])
        assert sorted((bytes(k), v, none) for k, v, none in got) == sorted(
            (k, n, None) for n, k in enumerate(keys) if n
        )
        dialect.delete_scored_failures(conn, failures, scores, [("metric", metric)], ids[:6])
        left = {r[0] for r in conn.execute(sa.select(failures.c.log_id))}
        if mode != "default":
            conn.exec_driver_sql("SET SESSION sql_mode = REPLACE(@@sql_mode, ',NO_BACKSLASH_ESCAPES', '')")
    scored = set(ids[::2])
    assert left == {i for i in ids if i not in scored or i not in ids[:6]}


def test_rows_past_the_statement_size_go_in_several_statements_and_none_is_lost(mariadb_url, monkeypatch):
    """A chunk whose literals pass ``MAX_BYTES`` is split into statements under it, at row
    boundaries: every row arrives once, exactly."""
    from sqlalchemy.dialects.mysql import LONGTEXT, VARCHAR

    from ctxprec_ops.warehouse.dialects import mysql_values
    from ctxprec_ops.warehouse.dialects.mysql import MySQLDialect

    meta = sa.MetaData()
    t = sa.Table(
        "sized_rows",
        meta,
        sa.Column("k", VARCHAR(16, charset="utf8mb4", collation="utf8mb4_bin"), primary_key=True),
        sa.Column("txt", LONGTEXT(charset="utf8mb4", collation="utf8mb4_bin")),
    )
    engine = get_engine(mariadb_url)
    meta.create_all(engine)
    monkeypatch.setattr(mysql_values, "MAX_BYTES", 1_000)
    rows = [{"k": f"k{i:03d}", "txt": f"row {i} it's " + "x" * (i * 7 % 150)} for i in range(60)]
    sent: list[int] = []

    def count(conn, cursor, statement, *rest):
        if "sized_rows" in statement:
            sent.append(len(statement))

    sa.event.listen(engine, "before_cursor_execute", count)
    try:
        with engine.begin() as conn:
            assert mysql_values.literal_insert(conn, MySQLDialect().native_insert(t, ["k"], ["txt"]), t, rows)
    finally:
        sa.event.remove(engine, "before_cursor_execute", count)
    assert len(sent) > 5 and all(size <= 1_000 + 300 for size in sent)  # the values under the limit
    with engine.connect() as conn:
        got = dict(conn.execute(sa.select(t.c.k, t.c.txt)).all())
    assert got == {r["k"]: r["txt"] for r in rows}


def test_insert_if_absent_of_rows_given_column_by_column(mariadb_url):
    """A chunk's judgments as ``ColumnRows`` (columns, shared values, keys in any order) are
    written in key order as literals; rows already present are left as they are."""
    from sqlalchemy.dialects.mysql import VARBINARY

    from ctxprec_ops.warehouse.dialects.mysql import MySQLDialect
    from ctxprec_ops.warehouse.write_rows import ColumnRows

    meta = sa.MetaData()
    t = sa.Table(
        "cached_rows",
        meta,
        sa.Column("key", VARBINARY(23), primary_key=True),
        sa.Column("reason", sa.Text),
        sa.Column("model", sa.String(32)),
    )
    engine = get_engine(mariadb_url)
    meta.create_all(engine)
    keys = [bytes([b]) * 23 for b in (9, 3, 200, 0, 39, 92)]
    first = ColumnRows({"key": keys[:4], "reason": ["nine", "three", "it's", None]}, {"model": "m1"})
    again = ColumnRows({"key": keys[2:], "reason": ["changed", "changed", "q'", "b\\s"]}, {"model": "m2"})
    dialect = MySQLDialect()
    with engine.begin() as conn:
        assert dialect.insert_ignore(conn, t, first, ["key"]) == 4
        assert dialect.insert_ignore(conn, t, again, ["key"]) == 4
    with engine.connect() as conn:
        got = {bytes(k): (r, m) for k, r, m in conn.execute(sa.select(t.c.key, t.c.reason, t.c.model))}
    assert got == {
        keys[0]: ("nine", "m1"),
        keys[1]: ("three", "m1"),
        keys[2]: ("it's", "m1"),
        keys[3]: (None, "m1"),
        keys[4]: ("q'", "m2"),
        keys[5]: ("b\\s", "m2"),
    }
    assert first.sorted_by("key").columns == {"key": sorted(keys[:4]), "reason": [None, "three", "nine", "it's"]}
