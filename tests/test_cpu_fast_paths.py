"""The judged pipeline's CPU shortcuts (bench/README.md, "CPU per row with the instant judge") give
exactly what the general code gives: the score rows' verdict JSON text, the answer-coverage check,
the values SQLite stores for binary keys, booleans and columns NULL in every row, and the
limiter's coroutine-free fast path."""

from __future__ import annotations

import asyncio
import json
import random
import string
from datetime import datetime

import pytest
import sqlalchemy as sa

from ctxprec_ops.json_text import JSONText
from ctxprec_ops.judge.limiter import AdaptiveLimiter
from ctxprec_ops.scoring.consistency import SampledVerdict, verdict_json, verdicts_json_text
from ctxprec_ops.scoring.template import escape_node_text
from ctxprec_ops.scoring.verdicts import AnswerProblem, JudgeAnswer, NodeVerdict, _check_coverage, check_coverage
from ctxprec_ops.warehouse.engine import get_engine
from ctxprec_ops.warehouse.upsert import insert_ignore, upsert

ALPHABET = string.printable + 'éü中\u2028\x00\x1f"\\/😀'


def _reason(rng: random.Random) -> str:
    return "".join(rng.choice(ALPHABET) for _ in range(rng.randint(0, 30)))


def test_the_verdicts_json_text_is_json_dumps_of_the_verdict_dicts():
    rng = random.Random(11)
    for _ in range(2000):
        verdicts: list[NodeVerdict] = []
        for k in range(rng.randint(0, 6)):
            if rng.random() < 0.2:
                verdicts.append(
                    SampledVerdict(node=k, relevant=rng.random() < 0.5, reason=_reason(rng), agreement=rng.random())
                )
            else:
                verdicts.append(
                    NodeVerdict(node=rng.choice([k, 0, 10**20]), relevant=rng.random() < 0.5, reason=_reason(rng))
                )
        text = verdicts_json_text(verdicts)
        assert type(text) is JSONText
        assert text == json.dumps([verdict_json(v) for v in verdicts])
    # values a validated verdict never holds take the general path, still json.dumps's text
    odd = [
        NodeVerdict.model_construct(node=True, relevant=1, reason="x"),
        NodeVerdict.model_construct(node=2.0, relevant=True, reason="y"),
    ]
    assert verdicts_json_text(odd) == json.dumps([verdict_json(v) for v in odd])


def _answer(nodes: list[int]) -> JudgeAnswer:
    return JudgeAnswer(verdicts=[NodeVerdict(node=k, relevant=k % 2 == 0, reason=f"r{k}") for k in nodes])


def _outcome(fn, answer: JudgeAnswer, expected: list[int]):
    try:
        got = fn(answer, expected)
    except AnswerProblem as problem:
        return "problem", str(problem)
    return "ok", list(got.items())


def test_the_coverage_shortcut_decides_as_the_general_check():
    rng = random.Random(5)
    cases = [([1, 2, 3], [1, 2, 3]), ([1, 2, 3], [3, 2, 1]), ([1, 1], [1, 1]), ([1, 2], [1]), ([], []), ([2], [1])]
    for _ in range(3000):
        expected = rng.sample(range(1, 9), rng.randint(0, 6))
        if rng.random() < 0.1:
            expected = expected + expected[:1]  # a repeated id asked for
        nodes = list(expected)
        roll = rng.random()
        if roll < 0.2:
            rng.shuffle(nodes)
        elif roll < 0.35 and nodes:
            nodes.pop(rng.randrange(len(nodes)))
        elif roll < 0.5:
            nodes.append(rng.randint(1, 12))
        cases.append((nodes, expected))
    for nodes, expected in cases:
        answer = _answer(nodes)
        assert _outcome(check_coverage, answer, expected) == _outcome(_check_coverage, answer, expected)
    assert _outcome(check_coverage, _answer([1, 2]), [1, 2])[0] == "ok"


def _table(meta: sa.MetaData) -> sa.Table:
    return sa.Table(
        "t",
        meta,
        sa.Column("key", sa.LargeBinary, primary_key=True),
        sa.Column("flag", sa.Boolean, nullable=True),
        sa.Column("n", sa.Integer),
        sa.Column("blob", sa.LargeBinary, nullable=True),
        sa.Column("at", sa.DateTime),
    )


def test_sqlite_stores_binary_keys_and_booleans_as_the_general_write_path(tmp_path):
    rows = [
        {
            "key": bytes([i, 255 - i]) * 5,
            "flag": [True, False, None][i % 3],
            "n": i,
            "blob": [b"\x00x", None, bytearray(b"ab"), memoryview(b"\x01cd")][i % 4],  # not all bytes
            "at": datetime(2026, 11, 28, 1, i),
        }
        for i in range(30)
    ]
    rows.append({"key": b"\x00ab", "flag": 1, "n": 99, "blob": b"", "at": datetime(2026, 11, 28)})  # an int flag
    stored = []
    for name, native in (("fast.db", None), ("general.db", False)):
        engine = get_engine(f"sqlite:///{tmp_path / name}")
        meta = sa.MetaData()
        table = _table(meta)
        meta.create_all(engine)
        with engine.begin() as conn:
            upsert(conn, table, rows[:20], native=native)
            insert_ignore(conn, table, rows[10:], native=native)
            # columns NULL in every row of a batch: new rows, and existing rows updated to NULL
            nulls = [{"key": r["key"], "flag": None, "n": None, "blob": None, "at": None} for r in rows[:3]]
            upsert(
                conn, table, [*nulls, {"key": b"new", "flag": None, "n": None, "blob": None, "at": None}], native=native
            )
            stored.append(
                conn.exec_driver_sql(
                    "SELECT key, typeof(key), flag, typeof(flag), n, blob, typeof(blob), at FROM t ORDER BY key"
                ).all()
            )
    assert len(stored[0]) == 32 and stored[0].count((b"new", "blob", None, "null", None, None, "null", None)) == 1
    assert stored[0] == stored[1]
    assert {r[1] for r in stored[0]} == {"blob"} and {r[3] for r in stored[0]} == {"integer", "null"}


def test_the_limiter_fast_path_keeps_the_limit_and_the_waiters_order():
    async def scenario() -> list[str]:
        lim = AdaptiveLimiter(2)
        assert lim.try_acquire() and lim.try_acquire()
        assert not lim.try_acquire() and lim.in_flight == 2  # full: nothing taken
        order: list[str] = []

        async def waiter(name: str) -> None:
            await lim.acquire()
            order.append(name)

        tasks = [asyncio.create_task(waiter(n)) for n in ("a", "b")]
        await asyncio.sleep(0)
        assert lim._waiting == 2
        assert not lim.try_release() and lim.in_flight == 2  # waiters: the slow path wakes them
        await lim.release()
        await asyncio.sleep(0)
        assert not lim.try_acquire()  # someone still waits: no overtaking
        await lim.release()
        await asyncio.gather(*tasks)
        assert lim.in_flight == 2 and lim.max_in_flight == 2
        assert lim.try_release() and lim.try_release() and lim.in_flight == 0
        return order

    assert asyncio.run(scenario()) == ["a", "b"]


@pytest.mark.parametrize("limit", [1, 3])
def test_the_request_path_never_exceeds_the_concurrency_limit(limit):
    from ctxprec_ops.judge.calls import JudgeRun, Usage, _send
    from ctxprec_ops.judge.limiter import RequestQuota
    from ctxprec_ops.judge.models.base import JudgeModel

    class Slow(JudgeModel):
        def __init__(self) -> None:
            self.now = self.peak = 0

        def get_model_name(self) -> str:
            return "slow"

        def generate(self, prompt, schema=None):
            raise AssertionError("the request path awaits a_generate")

        async def a_generate(self, prompt, schema=None):
            self.now += 1
            self.peak = max(self.peak, self.now)
            await asyncio.sleep(0.001)
            self.now -= 1
            return "{}"

    async def scenario() -> tuple[int, int]:
        judge = Slow()
        run = JudgeRun(limiter=AdaptiveLimiter(limit), quota=RequestQuota())
        await asyncio.gather(*(_send(judge, "p", 1, run, Usage(), JudgeAnswer) for _ in range(20)))
        return judge.peak, run.limiter.in_flight

    peak, in_flight = asyncio.run(scenario())
    assert peak == limit and in_flight == 0


def test_escaping_node_text_skips_only_text_with_nothing_to_escape():
    rng = random.Random(3)
    alphabet = "ab <>&;" + ALPHABET[:20]
    texts = [
        "",
        "plain text",
        "<node>",
        "a & b",
        "&amp;",
        ">",
        *("".join(rng.choice(alphabet) for _ in range(rng.randint(0, 12))) for _ in range(3000)),
    ]
    for text in texts:
        assert escape_node_text(text) == text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


@pytest.mark.parametrize("per_statement", [1, 7, 500])
def test_sqlite_multi_row_writes_store_what_row_by_row_writes_store(tmp_path, monkeypatch, per_statement):
    """``_sqlite_upsert``'s multi-row statements (a shared value bound once, a NULL column as
    a literal, boolean and binary columns converted column-wise) leave the table as the generic path's one row at a time: a key given twice in
    one call ends with its last row (upsert) or keeps its first (insert_ignore), across and
    within statements."""
    import ctxprec_ops.warehouse.dialects.sqlite.write as sqlite_write

    monkeypatch.setattr(sqlite_write, "ROWS_PER_STATEMENT", per_statement)
    at = datetime(2026, 11, 28, 3)
    same_text = "shared"
    rng = random.Random(per_statement)

    def batch(n: int, shift: int) -> list[dict]:
        return [
            {
                "key": bytes([(i * 7 + shift) % 40]),
                "flag": rng.choice([True, False, None]),
                "n": rng.choice([i, 0, None, 2**40]),
                "blob": rng.choice([b"x", None]),
                "at": at,  # one object in every row: bound once
                "label": same_text if i % 5 else rng.choice([same_text, "ü'\"", "", "a\x00b"]),
            }
            for i in range(n)
        ]

    calls = [batch(60, 0), batch(33, 3), batch(25, 1)]
    for r in calls[2]:  # a column of booleans only and one of bytes only: converted column-wise
        r["flag"], r["blob"] = r["n"] is None, b"b%d" % r["key"][0]
    nulls = [{"key": bytes([k]), "flag": None, "n": None, "blob": None, "at": None, "label": None} for k in range(5)]
    stored = []
    for name, native in (("fast.db", None), ("general.db", False)):
        engine = get_engine(f"sqlite:///{tmp_path / name}")
        meta = sa.MetaData()
        table = _table(meta)
        table.append_column(sa.Column("label", sa.Text, nullable=True))
        meta.create_all(engine)
        with engine.begin() as conn:
            upsert(conn, table, calls[0], native=native)
            insert_ignore(conn, table, calls[1], native=native)
            upsert(conn, table, calls[2], native=native)
            upsert(conn, table, nulls, native=native)
            stored.append(
                conn.exec_driver_sql(
                    "SELECT key, flag, typeof(flag), n, typeof(n), blob, at, typeof(at), label, typeof(label) "
                    "FROM t ORDER BY key"
                ).all()
            )
    assert len(stored[0]) == 40
    assert stored[0] == stored[1]


def _reference_text_check(value: str, where: str) -> None:
    """``rows._check_text`` as it was before its ASCII shortcut: every check on every text."""
    from ctxprec_ops.pipeline.rows import MAX_TEXT_CHARS, _bad

    if len(value) > MAX_TEXT_CHARS:
        raise _bad(f"{where} is too long: {len(value):,} characters (limit {MAX_TEXT_CHARS:,})")
    if "\x00" in value:
        raise _bad(f"{where} contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _bad(f"{where} is not valid UTF-8") from None


def test_the_row_checks_ascii_shortcut_accepts_and_rejects_as_the_full_checks():
    from ctxprec_ops.errors import InvalidTestCaseError
    from ctxprec_ops.pipeline.rows import MAX_TEXT_CHARS, row_to_test_case

    rng = random.Random(8)
    pieces = ["plain", "ü", "\x00", "\ud800", "😀", " ", "\t\n", "\u3000", "", "a" * (MAX_TEXT_CHARS - 3), "\x7f"]

    def text() -> str:
        return "".join(rng.choice(pieces) for _ in range(rng.randint(0, 3)))

    def outcome(fn, *args):
        try:
            return "ok", fn(*args)
        except InvalidTestCaseError as exc:
            return "bad", str(exc)

    def reference(row: dict) -> object:
        for column in ("input", "expected_output"):
            value = row[column]
            _reference_text_check(value, column)
            if not value.strip():
                raise InvalidTestCaseError(f"column {column!r} is empty")
        nodes = json.loads(row["retrieval_context"])
        if not nodes:
            raise InvalidTestCaseError("retrieval_context is empty (no retrieved nodes to judge)")
        for i, node in enumerate(nodes):
            if not isinstance(node, str):
                raise InvalidTestCaseError(f"retrieval_context[{i}] must be a string, got a number")
            _reference_text_check(node, f"retrieval_context[{i}]")
        return nodes

    checked = 0
    for i in range(1500):
        nodes: list = [text() for _ in range(rng.randint(0, 4))]
        if rng.random() < 0.05:
            nodes.append(7)
        raw = json.dumps(nodes) if not any(isinstance(n, str) and "\ud800" in n for n in nodes) else None
        if raw is None:  # a lone surrogate in JSON text: escaped, decoded back by json.loads
            raw = json.dumps(nodes, ensure_ascii=True)
        row = {"id": i, "input": text() or "q", "expected_output": text() or "e", "retrieval_context": raw}
        got = outcome(row_to_test_case, row)
        want = outcome(reference, row)
        assert got[0] == want[0], (row, got, want)
        if got[0] == "ok":
            assert got[1].retrieval_context == want[1]
            checked += 1
        else:
            assert got[1] == want[1]
    assert 100 < checked < 1400  # both outcomes were exercised


def _reference_reason(score, verdicts, *, strict_mode=False, raw_score=None) -> str:
    """``compose_reason`` as it was before its one-pass form (three comprehensions)."""
    from ctxprec_ops.metrics.reasons import shorten

    n = len(verdicts)
    flags = [v.relevant for v in verdicts]
    relevant = [i for i, r in enumerate(flags, start=1) if r]
    head = f"The score is {score:.2f}"
    if strict_mode and raw_score is not None and raw_score < 1.0:
        head += f" (strict mode; {raw_score:.2f} before clamping)"
    if not relevant:
        return f"{head} because none of the {n} retrieved nodes was relevant to the expected output."
    last_relevant = relevant[-1]
    misplaced = [i for i, r in enumerate(flags[: last_relevant - 1], start=1) if not r]
    rel_txt = ", ".join(map(str, relevant))
    if not misplaced:
        return (
            f"{head} because all {len(relevant)} relevant node(s) of {n} (rank {rel_txt}) are ranked "
            "above every irrelevant one."
        )
    details = "; ".join([f"node {i}: {shorten(verdicts[i - 1].reason) or 'not relevant'}" for i in misplaced[:3]])
    more = f" and {len(misplaced) - 3} more" if len(misplaced) > 3 else ""
    return (
        f"{head} because irrelevant node(s) {', '.join(map(str, misplaced[:3]))}{more} are ranked "
        f"above relevant ones (relevant: rank {rel_txt} of {n}). Why they are irrelevant — {details}."
    )


def test_the_one_pass_reason_is_the_reason_of_the_three_comprehensions():
    from ctxprec_ops.metrics.reasons import compose_reason

    rng = random.Random(4)
    seen = set()
    for _ in range(3000):
        verdicts = [
            NodeVerdict(node=k, relevant=rng.random() < 0.5, reason=rng.choice(["", " a  b ", _reason(rng)]))
            for k in range(1, rng.randint(0, 9) + 1)
        ]
        score, raw = rng.random(), rng.choice([None, rng.random(), 1.0])
        strict = rng.random() < 0.3
        got = compose_reason(score, verdicts, strict_mode=strict, raw_score=raw)
        assert got == _reference_reason(score, verdicts, strict_mode=strict, raw_score=raw)
        seen.add(got.split(" because ")[1][:8])
    assert len(seen) >= 3  # none relevant, all ranked first, irrelevant ones above relevant ones


def test_judgment_keys_hash_the_fields_as_one_update_per_piece_did():
    import hashlib

    from ctxprec_ops.judge.cache import judgment_keys

    def reference(model: str, version: str, q: str, a: str, nodes: list[str]) -> list[bytes]:
        shared = hashlib.sha256()
        for part in (model, version, q, a):
            data = part.encode("utf-8", "surrogatepass")
            shared.update(len(data).to_bytes(8, "big"))
            shared.update(data)
        out = []
        for node in nodes:
            h = shared.copy()
            data = node.encode("utf-8", "surrogatepass")
            h.update(len(data).to_bytes(8, "big"))
            h.update(data)
            out.append(shared.digest()[:7] + h.digest()[:16])
        return out

    rng = random.Random(6)
    for _ in range(500):
        fields = [_reason(rng) + rng.choice(["", "\ud800", "é" * 70]) for _ in range(4)]
        nodes = [_reason(rng) * rng.randint(0, 9) for _ in range(rng.randint(0, 4))]
        assert judgment_keys(*fields, nodes) == reference(*fields, nodes)


def test_multi_row_statements_number_only_the_shared_parameters():
    """SQLite looks every numbered parameter (``?NNN``) up in a list while preparing: a 500-row
    statement with all its ~9,500 parameters numbered took ~0.4 s to prepare. Only the values a
    whole call shares are numbered (``?1``, ``?2``), each row's own are plain ``?``."""
    import re

    from ctxprec_ops.warehouse.dialects.sqlite.write import multi_row_sql

    engine = get_engine("sqlite://")
    table = _table(sa.MetaData())
    kinds = ("row", "same", "null", "row", "same")
    sql = multi_row_sql(
        table, ("key", "flag", "n", "blob", "at"), ("key",), ("flag", "n", "blob", "at"), kinds, 40, engine.dialect
    )
    assert sorted(set(re.findall(r"\?\d+", sql))) == ["?1", "?2"] and len(re.findall(r"\?\d+", sql)) == 2 * 40
    assert len(re.findall(r"\?(?!\d)", sql)) == 2 * 40 and sql.count("NULL") == 40
    assert (
        'INSERT INTO t (flag, at, "key", n, blob) VALUES (?1, ?2, ?, NULL, ?), (?1, ?2, ?, NULL, ?)' in sql
    )  # the shared columns first, so ?1, ?2 come before every plain ?


@pytest.mark.parametrize("warehouse", ["sqlite", "sqlite-general", "postgresql"])
def test_rows_given_column_by_column_are_stored_as_the_same_rows_given_as_dicts(tmp_path, request, warehouse):
    """``ColumnRows`` (the chunk's judgment-cache rows: SQLite binds the lists as they are, other
    paths take ``as_dicts()``) leaves the table exactly as the same rows given one dict each,
    shared values and all-NULL columns included, and existing keys are left alone."""
    from ctxprec_ops.warehouse.upsert import ColumnRows

    rng = random.Random(5)
    at = datetime(2026, 11, 28, 3)
    keys = [i.to_bytes(2, "big") for i in range(300)]
    columns = {
        "key": keys,
        "flag": [rng.choice([True, False]) for _ in keys],
        "blob": [None] * len(keys),  # NULL in every row
        "label": [_reason(rng).replace("\x00", "") for _ in keys],
    }
    given = ColumnRows(columns, shared={"n": 42, "at": at})
    assert len(given) == 300 and given.as_dicts()[1] == {
        "key": keys[1],
        "flag": columns["flag"][1],
        "blob": None,
        "label": columns["label"][1],
        "n": 42,
        "at": at,
    }
    earlier = [{"key": keys[3], "flag": None, "n": 1, "blob": b"old", "at": at, "label": "kept"}]
    url = request.getfixturevalue("pg_url") if warehouse == "postgresql" else None
    stored = []
    for name, rows in (("columns", given), ("dicts", given.as_dicts())):
        engine = get_engine(url or f"sqlite:///{tmp_path / (name + '.db')}")
        meta = sa.MetaData()
        table = _table(meta)
        table.append_column(sa.Column("label", sa.Text, nullable=True))
        meta.drop_all(engine)
        meta.create_all(engine)
        native = False if warehouse == "sqlite-general" else None
        with engine.begin() as conn:
            insert_ignore(conn, table, earlier, native=native)
            assert insert_ignore(conn, table, rows, native=native) == 300
            stored.append(conn.execute(sa.select(table).order_by(table.c.key)).all())
        engine.dispose()
    assert len(stored[0]) == 300 and stored[0] == stored[1]
    assert stored[0][3].label == "kept" and {r.n for r in stored[0]} == {1, 42}
    with pytest.raises(ValueError, match="lack key column"):
        insert_ignore(None, _table(sa.MetaData()), ColumnRows({"flag": [True]}))  # type: ignore[arg-type]


def test_insert_ignore_skips_only_rows_whose_primary_key_exists(tmp_path):
    """SQLite writes insert-ignore rows as ``INSERT OR IGNORE`` (no statement journal) only where
    that stores what ``ON CONFLICT (key) DO NOTHING`` stores: a NULL in a NOT NULL column, or a
    row that breaks another unique or check constraint, still fails the write."""
    from sqlalchemy.exc import IntegrityError

    from ctxprec_ops.warehouse.upsert import ColumnRows

    engine = get_engine(f"sqlite:///{tmp_path / 'wh.db'}")
    meta = sa.MetaData()
    plain = sa.Table(
        "plain", meta, sa.Column("k", sa.Integer, primary_key=True), sa.Column("v", sa.Text, nullable=False)
    )
    unique = sa.Table(
        "uniq",
        meta,
        sa.Column("k", sa.Integer, primary_key=True),
        sa.Column("v", sa.Text, nullable=False),
        sa.UniqueConstraint("v"),
    )
    checked = sa.Table(
        "checked",
        meta,
        sa.Column("k", sa.Integer, primary_key=True),
        sa.Column("n", sa.Integer, sa.CheckConstraint("n > 0")),
    )
    meta.create_all(engine)
    statements: list[str] = []
    sa.event.listen(engine, "before_cursor_execute", lambda _c, _cur, sql, *_a: statements.append(sql))

    def count(table: sa.Table) -> int:
        with engine.connect() as conn:
            return conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()

    with engine.begin() as conn:
        assert insert_ignore(conn, plain, ColumnRows({"k": [1, 2, 1], "v": ["a", "b", "dup"]})) == 3
        insert_ignore(conn, plain, [{"k": 2, "v": "again"}, {"k": 3, "v": "c"}])
    assert any(s.startswith("INSERT OR IGNORE INTO plain") for s in statements)
    with engine.connect() as conn:
        assert conn.execute(sa.select(plain.c.v).order_by(plain.c.k)).scalars().all() == ["a", "b", "c"]
    for rows in ([{"k": 9, "v": "x"}, {"k": 10, "v": None}], ColumnRows({"k": [9, 10], "v": [None, None]})):
        with pytest.raises(IntegrityError, match="NOT NULL"), engine.begin() as conn:
            insert_ignore(conn, plain, rows)
    with pytest.raises(IntegrityError, match="NOT NULL"), engine.begin() as conn:
        insert_ignore(conn, plain, [{"k": 11}])  # a NOT NULL column left out
    assert count(plain) == 3
    with engine.begin() as conn:
        insert_ignore(conn, unique, [{"k": 1, "v": "a"}])
        insert_ignore(conn, unique, [{"k": 1, "v": "a"}])  # the key exists: skipped
    with pytest.raises(IntegrityError, match="UNIQUE"), engine.begin() as conn:
        insert_ignore(conn, unique, [{"k": 2, "v": "a"}])  # another unique constraint: not skipped
    with pytest.raises(IntegrityError, match="CHECK"), engine.begin() as conn:
        insert_ignore(conn, checked, [{"k": 1, "n": 1}, {"k": 2, "n": 0}])
    assert (count(unique), count(checked)) == (1, 0)
    assert not any(s.startswith("INSERT OR IGNORE INTO") and ("uniq" in s or "checked" in s) for s in statements)
