"""The SQLite hot path's shortcuts give exactly what the general code gives: the partition
filter's reading of ``event_time`` and the judge-answer parser (the verdicts' JSON text:
``tests/test_cpu_fast_paths.py``)."""

from __future__ import annotations

import pytest
import sqlalchemy as sa

from ctxprec_ops.scoring.verdicts import AnswerProblem, JudgeAnswer, parse_answer
from ctxprec_ops.warehouse.dialects.sqlite.time import sqlite_instant, sqlite_instant_general

EVENT_TIMES = [
    "2026-11-28 12:34:56",
    "2026-11-28 25:00:00",
    "2026-11-28 24:00:00",
    "2026-02-30 10:00:00",
    "2026-11-28 12:34:60",
    "2026-11-28 12:34:56 UTC",
    "2026-11-28T12:34:56Z",
    " 2026-11-28 12:34:56",
    "2026-11-28 12:34:56+0100",
    "0000-00-00 00:00:00",
    "2026-13-01 00:00:00",
    "2026-11-28 99:99:99",
    "1764331200",
    1764331200,
    1764331200.5,
    None,
    "",
    "2026-11-28",
    "2026-11-28 12:34:56.123",
    b"2026-11-28 12:34:56",
    "2026-11-28 12:34:5x",
]


def test_the_canonical_shortcut_reads_event_time_as_sqlite_instant_does():
    engine = sa.create_engine("sqlite://")
    md = sa.MetaData()
    t = sa.Table("t", md, sa.Column("id", sa.Integer, primary_key=True), sa.Column("v", sa.Text))
    md.create_all(engine)
    with engine.begin() as conn:
        for i, v in enumerate(EVENT_TIMES):
            conn.exec_driver_sql("INSERT INTO t VALUES (?, ?)", (i, v))
        rows = conn.execute(
            sa.select(t.c.v, sqlite_instant_general(t.c.v), sqlite_instant(t.c.v)).order_by(t.c.id)
        ).all()
    assert [r[1] for r in rows] == [r[2] for r in rows]
    assert rows[0][2] == "2026-11-28 12:34:56" and rows[1][2] is None  # an hour of 25 is no instant


def test_the_partition_filter_has_nothing_to_render_at_each_execution():
    """Nothing "expanding" that SQLAlchemy would render into the statement again for every chunk
    read, and each step of the general reading written once: nested into one expression, its
    steps were repeated ~300 times (30 KB of SQL, 2,000 parameters, ~0.1 s to compile per
    statement and ~110 us per row for SQLite to compute)."""
    t = sa.Table("t", sa.MetaData(), sa.Column("v", sa.Text))
    compiled = sa.select(sqlite_instant(t.c.v)).compile(dialect=sa.create_engine("sqlite://").dialect)
    assert not compiled.post_compile_params and not compiled.literal_execute_params
    sql = str(compiled)
    assert sql.count(" trim(") == 1 and sql.count("unixepoch") == 1, sql
    assert len(sql) < 4_000 and len(compiled.params) < 60, (len(sql), len(compiled.params))


ANSWERS = [
    '{"verdicts":[{"node":1,"node":2,"relevant":true}]}',
    '{"verdicts":[{"node":1,"relevant":true,"reason":"a\\ud800b"}]}',
    '{"verdicts":[{"node":true,"relevant":true}]}',
    '{"verdicts":[{"node":1.0,"relevant":1}]}',
    '{"verdicts":[{"node":"1","relevant":"yes"}]}',
    '{"verdicts":[{"node":1.5,"relevant":true}]}',
    '{"verdicts":[{"node":1,"relevant":true,"reason":null}]}',
    '{"verdicts":[],"verdicts":[{"node":1,"relevant":true}]}',
    '  {"verdicts":[{"node":1,"relevant":true}]} ',
    '{"verdicts":[{"node":NaN,"relevant":false}]}',
    '\ufeff{"verdicts":[]}',
    '[{"node":1,"relevant":true}]',
    '```json\n{"verdicts":[{"node":2,"relevant":false,"reason":"r"}]}\n```',
    '{"verdicts":[{"node":1,"relevant":true}]} trailing',
    "not json",
]


@pytest.mark.parametrize("text", ANSWERS)
def test_parsing_an_answer_in_one_pass_changes_nothing(text):
    def tolerant(raw: str):  # the parser without its one-pass fast path
        from ctxprec_ops.scoring.verdicts import _loads_tolerant

        data = _loads_tolerant(raw)
        return JudgeAnswer.model_validate({"verdicts": data} if isinstance(data, list) else data)

    try:
        expected = ("ok", tolerant(text).model_dump())
    except (AnswerProblem, ValueError):
        expected = ("problem", None)

    class Text(str):
        pass

    for given in (text, text.encode(), bytearray(text.encode()), Text(text)):  # any form of text: the same
        try:
            got = ("ok", parse_answer(given).model_dump())
        except AnswerProblem:
            got = ("problem", None)
        assert got == expected, type(given)
