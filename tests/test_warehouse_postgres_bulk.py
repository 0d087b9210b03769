"""PostgreSQL at warehouse scale: COPY-based upserts, the scored-ids plan, the judgment-cache probe.

All against the real embedded PostgreSQL of tests/fixtures/postgres.py (and SQLite where the
behaviour must be the same on both).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ctxprec_ops.json_text import JSONText
from ctxprec_ops.judge.cache import judgment_keys, key_head, key_range
from ctxprec_ops.warehouse.dialects import dialect_of
from ctxprec_ops.warehouse.dialects.postgresql.conflicts import CONFLICT_SPELL
from ctxprec_ops.warehouse.dialects.postgresql.copy import binary_copyable, copy_upsert
from ctxprec_ops.warehouse.dialects.postgresql.lookups import heads_lookup
from ctxprec_ops.warehouse.engine import get_engine, write_transaction
from ctxprec_ops.warehouse.schema import ensure_output_tables
from ctxprec_ops.warehouse.scoring_key import ScoringKey
from ctxprec_ops.warehouse.store import (
    analyze_if_grown,
    load_judgments,
    scored_ids,
    write_chunk,
)
from ctxprec_ops.warehouse.upsert import insert_ignore, upsert

NOW = datetime(2026, 11, 29, 1, 2, 3, tzinfo=UTC)
COPIED = (
    "partition_key, metric, score, success, threshold, verdicts, reason, judge_model, prompt_version, "
    "prompt_tokens, completion_tokens, cost, run_id, scored_at, judge_calls, cached_nodes, chunk_index, "
    "source_table, mapping"
)
KEY = ScoringKey("contextual_precision", "judge-x", "v1", "retrieval_logs")
#: the key as the pipeline gives it, with the mapping (every column of the primary key but the id)
FULL_KEY = ScoringKey("contextual_precision", "judge-x", "v1", "retrieval_logs", "default")


def score_row(log_id: str, score: float = 0.5, run: str = "r1") -> dict:
    return {
        "log_id": log_id,
        "partition_key": "2026-11-28",
        "metric": KEY.metric,
        "source_table": KEY.source_table,
        "mapping": "default",
        "score": score,
        "success": score >= 0.5,
        "threshold": 0.5,
        "verdicts": [{"node": 1, "relevant": True, "reason": "ok"}],
        "reason": "r",
        "judge_model": KEY.judge_model,
        "prompt_version": KEY.prompt_version,
        "prompt_tokens": 10,
        "completion_tokens": 5,
        "cost": None,
        "run_id": run,
        "scored_at": NOW,
        "judge_calls": 1,
        "cached_nodes": 0,
        "chunk_index": 0,
    }


def judgment(key: bytes, relevant: bool = True, reason: str = "why") -> dict:
    return {
        "key": key,
        "judge_model": KEY.judge_model,
        "prompt_version": KEY.prompt_version,
        "relevant": relevant,
        "reason": reason,
        "created_at": NOW,
    }


@pytest.fixture
def pg(pg_url):
    return get_engine(pg_url)


def _count(engine, table) -> int:
    with engine.connect() as conn:
        return conn.execute(sa.select(sa.func.count()).select_from(table)).scalar_one()


def test_copy_upsert_twice_in_one_transaction_then_rollback_then_again(pg):
    t = ensure_output_tables(pg)
    with write_transaction(pg) as conn:  # the staging table is empty again after each call
        assert copy_upsert(conn, t.scores, [score_row("1"), score_row("2")], update=True) == 2
        assert copy_upsert(conn, t.scores, [score_row("2", 0.9, "r2"), score_row("3")], update=True) == 2
    with pytest.raises(RuntimeError):
        with write_transaction(pg) as conn:
            copy_upsert(conn, t.scores, [score_row("4"), score_row("5")], update=True)
            raise RuntimeError("killed mid-chunk")
    assert _count(pg, t.scores) == 3
    with write_transaction(pg) as conn:  # a fresh pooled session or the same one: both work
        copy_upsert(conn, t.scores, [score_row("4"), score_row("1", 0.1, "r3")], update=True)
    with pg.connect() as conn:
        got = {r.log_id: (r.score, r.run_id, r.cost, r.verdicts) for r in conn.execute(sa.select(t.scores))}
    assert got["1"][:2] == (0.1, "r3") and got["2"][:2] == (0.9, "r2") and sorted(got) == ["1", "2", "3", "4"]
    assert got["1"][2] is None and got["1"][3] == [{"node": 1, "relevant": True, "reason": "ok"}]


def _spells(conn) -> dict:
    return conn.info.get("ctxprec_conflict_spells", {})


def test_a_chunk_meeting_existing_rows_falls_back_to_on_conflict_then_skips_the_plain_try(pg):
    """The plain insert under a savepoint: new rows go in plainly; a chunk meeting rows already
    there is rolled back to the savepoint (nothing of the try left, the transaction usable) and
    written with ``ON CONFLICT`` — updated scores, cached judgments left as they are — and the
    next ``CONFLICT_SPELL`` chunks of that table skip the try."""

    t = ensure_output_tables(pg)
    keys = [bytes([i]) * 23 for i in range(4)]
    with write_transaction(pg) as conn:
        copy_upsert(conn, t.scores, [score_row("1"), score_row("2")], update=True)
        copy_upsert(conn, t.judgments, [judgment(keys[0], True, "first"), judgment(keys[1])], update=False)
        assert _spells(conn) == {}  # both plain
    with write_transaction(pg) as conn:
        assert copy_upsert(conn, t.scores, [score_row("2", 0.9, "r2"), score_row("3", 0.1, "r2")], update=True) == 2
        assert copy_upsert(conn, t.judgments, [judgment(keys[0], False, "again"), judgment(keys[2])], update=False) == 2
        assert _spells(conn) == {"ctxprec_scores": CONFLICT_SPELL, "ctxprec_judgments": CONFLICT_SPELL}
        copy_upsert(conn, t.scores, [score_row("4")], update=True)
        copy_upsert(conn, t.scores, [score_row("5"), score_row("6")], update=True)
        assert _spells(conn)["ctxprec_scores"] == CONFLICT_SPELL - 2
    with pg.connect() as conn:
        scores = {r.log_id: (r.score, r.run_id) for r in conn.execute(sa.select(t.scores))}
        cached = {bytes(r.key): (r.relevant, r.reason) for r in conn.execute(sa.select(t.judgments))}
    assert scores == {
        "1": (0.5, "r1"),
        "2": (0.9, "r2"),
        "3": (0.1, "r2"),
        "4": (0.5, "r1"),
        "5": (0.5, "r1"),
        "6": (0.5, "r1"),
    }
    assert cached == {keys[0]: (True, "first"), keys[1]: (True, "why"), keys[2]: (True, "why")}


def test_errors_other_than_an_existing_key_are_raised_not_retried(pg):
    t = ensure_output_tables(pg)
    bad = [score_row("1"), {**score_row("2"), "run_id": None}]  # run_id is NOT NULL
    with pg.connect() as conn:
        with pytest.raises(sa.exc.IntegrityError, match="run_id"):
            with conn.begin():
                copy_upsert(conn, t.scores, bad, update=True)
        assert _spells(conn) == {}  # not taken for a row already there
    assert _count(pg, t.scores) == 0


def test_concurrent_writers_of_the_same_keys_each_write_every_row_once(pg):
    """A plain insert that meets a key another open transaction inserted waits for it; once that
    one commits the insert fails on the key, rolls back to its savepoint and writes with
    ``ON CONFLICT``: every row once, the later writer's scores kept."""
    import threading

    t = ensure_output_tables(pg)
    first = [score_row(str(i), 0.25, "a") for i in range(0, 300)]
    second = [score_row(str(i), 0.75, "b") for i in range(200, 500)]
    started, done = threading.Event(), threading.Event()
    errors: list[BaseException] = []

    def later_writer() -> None:
        try:
            started.wait(10)
            with write_transaction(pg) as conn:
                copy_upsert(conn, t.scores, second, update=True)
        except BaseException as exc:  # reported by the main thread
            errors.append(exc)
        finally:
            done.set()

    thread = threading.Thread(target=later_writer)
    thread.start()
    with write_transaction(pg) as conn:
        copy_upsert(conn, t.scores, first, update=True)
        started.set()
        assert not done.wait(0.5)  # the later writer waits on this transaction's keys
    thread.join(20)
    assert not errors, errors
    with pg.connect() as conn:
        got = {r.log_id: (r.score, r.run_id) for r in conn.execute(sa.select(t.scores))}
    assert len(got) == 500
    assert all(got[str(i)] == (0.25, "a") for i in range(200))
    assert all(got[str(i)] == (0.75, "b") for i in range(200, 500))


#: texts an array's text form must carry exactly (quotes, backslashes, braces, commas, blanks,
#: the word NULL, control characters, non-ASCII)
AWKWARD_TEXTS = ['a"b', "c\\d", "{x}", "NULL", "", " sp ", "é ☃", "a,b", '\\"', "tab\there 'q'", "\r\n", "x" * 3000]


def test_rows_given_column_by_column_store_what_the_same_rows_given_one_by_one_store(pg):
    """``ColumnRows`` (a chunk's judgments: columns, and values every row shares) go as array
    parameters of one ``INSERT ... FROM unnest`` (dicts: through ``COPY``) and store the same
    values: every byte value in keys, awkward texts, NULL reasons, agreements of every float
    kind; a key column left out is refused, naming it."""
    from ctxprec_ops.warehouse.write_rows import ColumnRows

    t = ensure_output_tables(pg)
    reasons = [*AWKWARD_TEXTS, None]
    n = len(reasons)
    keys = [bytes([i]) + bytes(range(256))[i * 7 : i * 7 + 22] for i in range(2 * n)]
    relevant = [i % 3 == 0 for i in range(n)]
    agreement = [None, 0.0, 1.0, 2 / 3, 1e-300, 0.1 + 0.2, *([0.5] * (n - 6))]
    shared = {"judge_model": KEY.judge_model, "prompt_version": KEY.prompt_version, "created_at": NOW}
    columns = ColumnRows({"key": keys[:n], "relevant": relevant, "reason": reasons, "agreement": agreement}, shared)
    dicts = [
        dict(judgment(k), relevant=r, reason=w, agreement=a)
        for k, r, w, a in zip(keys[n:], relevant, reasons, agreement)
    ]
    with write_transaction(pg) as conn:
        assert copy_upsert(conn, t.judgments, columns, update=False) == n
        assert copy_upsert(conn, t.judgments, dicts, update=False) == n
        with pytest.raises(ValueError, match="key"):
            copy_upsert(conn, t.judgments, ColumnRows({"relevant": [True, False]}), update=False)
    cols = ("relevant", "reason", "agreement", "judge_model", "prompt_version", "created_at")
    with pg.connect() as conn:
        got = {bytes(r.key): tuple(getattr(r, c) for c in cols) for r in conn.execute(sa.select(t.judgments))}
    assert len(got) == 2 * n
    assert [got[k] for k in keys[:n]] == [got[k] for k in keys[n:]]
    assert [got[k][1] for k in keys[:n]] == reasons and [got[k][2] for k in keys[:n]] == agreement


def test_column_rows_meeting_cached_keys_keep_the_cached_verdicts(pg):
    """The array insert, plain first: a chunk whose judgments are partly cached already (a
    concurrent run judged them) rolls back to its savepoint and inserts the new ones only."""
    from ctxprec_ops.warehouse.write_rows import ColumnRows

    t = ensure_output_tables(pg)
    keys = [bytes([i]) * 23 for i in range(5)]
    shared = {"judge_model": KEY.judge_model, "prompt_version": KEY.prompt_version, "created_at": NOW}

    def rows(ks, reason):
        return ColumnRows({"key": ks, "relevant": [True] * len(ks), "reason": [reason] * len(ks)}, shared)

    with write_transaction(pg) as conn:
        copy_upsert(conn, t.judgments, rows(keys[1:3], "first"), update=False)
        assert _spells(conn) == {}
        copy_upsert(conn, t.judgments, rows(keys[::-1], "second"), update=False)  # any order given
        assert _spells(conn) == {"ctxprec_judgments": CONFLICT_SPELL}
        copy_upsert(conn, t.judgments, rows([bytes([9]) * 23], "third"), update=False)
        assert _spells(conn) == {"ctxprec_judgments": CONFLICT_SPELL - 1}
    with pg.connect() as conn:
        got = {bytes(r.key): r.reason for r in conn.execute(sa.select(t.judgments))}
    assert got == {
        keys[0]: "second",
        keys[1]: "first",
        keys[2]: "first",
        keys[3]: "second",
        keys[4]: "second",
        bytes([9]) * 23: "third",
    }


def test_column_rows_go_as_arrays_when_every_value_has_an_array_form(pg):
    """``unnest_insert`` writes a chunk's judgments itself, and leaves rows holding a value without
    an exact array form here (a naive datetime) to ``COPY``, sending nothing."""
    from ctxprec_ops.warehouse.dialects.postgresql.unnest import unnest_insert
    from ctxprec_ops.warehouse.write_rows import ColumnRows

    t = ensure_output_tables(pg)
    shared = {"judge_model": KEY.judge_model, "prompt_version": KEY.prompt_version}
    plain = ColumnRows({"key": [b"\x01" * 23], "relevant": [True], "reason": ["r"]}, {**shared, "created_at": NOW})
    naive = NOW.replace(tzinfo=None)
    dated = ColumnRows({"key": [b"\x02" * 23], "relevant": [True], "reason": ["r"], "created_at": [naive]}, shared)
    with write_transaction(pg) as conn:
        assert unnest_insert(conn, t.judgments, plain, "DO NOTHING") is True
        assert unnest_insert(conn, t.judgments, dated, "DO NOTHING") is False
    assert _count(pg, t.judgments) == 1
    with write_transaction(pg) as conn:
        assert copy_upsert(conn, t.judgments, dated, update=False) == 1  # through COPY
    assert _count(pg, t.judgments) == 2


@given(
    st.lists(
        st.one_of(
            st.none(), st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=40)
        ),
        max_size=30,
    )
)
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_array_text_carries_any_text_exactly(pg, values):
    from sqlalchemy.dialects.postgresql import ARRAY

    from ctxprec_ops.warehouse.dialects.postgresql.unnest import array_text

    with pg.connect() as conn:
        got = conn.execute(
            sa.select(sa.cast(sa.bindparam("t", array_text(values), type_=sa.Text()), ARRAY(sa.Text())))
        ).scalar_one()
    assert got == values


def test_bulk_and_row_by_row_store_the_same_values(pg):
    """The COPY path (2+ rows) and the single-row statement store identical values, JSON and
    text with tabs, newlines, backslashes and quotes included."""
    t = ensure_output_tables(pg)
    odd = 'tab\there\nnewline \\N backslash "quoted" ünïcode \\'
    rows = [
        dict(score_row("a"), reason=odd, verdicts=[{"node": 1, "relevant": False, "reason": odd}]),
        dict(score_row("b"), reason=None, verdicts=None),
    ]
    with write_transaction(pg) as conn:
        upsert(conn, t.scores, rows)  # bulk
    with write_transaction(pg) as conn:
        for r in rows:
            upsert(conn, t.scores, [dict(r, log_id=r["log_id"] + "1")])  # one row: plain INSERT
    with pg.connect() as conn:
        got = {
            r.log_id: r
            for r in conn.execute(
                sa.select(t.scores.c.log_id, t.scores.c.reason, sa.cast(t.scores.c.verdicts, sa.Text).label("v"))
            )
        }
    assert got["a"].reason == odd and got["a"] == got["a1"][:0] + ("a",) + got["a1"][1:]
    assert got["b"][1:] == got["b1"][1:]


def test_binary_and_text_copy_store_the_same_values(pg):
    """Rows whose values all have a binary COPY form go in binary; a value that needs
    converting (an integer id for a text column, a naive timestamp) sends the chunk through the
    text format with SQLAlchemy's bind processors. Both store the same values."""

    t = ensure_output_tables(pg)
    odd = 'tab\there\nnewline \\N backslash "quoted" ünïcode'
    rows = [dict(score_row("1"), reason=odd, verdicts=[{"node": 1, "relevant": False, "reason": odd}])]
    rows.append(dict(score_row("2"), verdicts=None, reason=None, cost=0.25))
    text_rows = [dict(r, log_id=int(r["log_id"]) + 10) for r in rows]  # ints for a text column
    # JSON serialized already (the label metric's JSONText) is stored as the object would be
    rows.append(dict(rows[0], log_id="3", verdicts=JSONText(json.dumps(rows[0]["verdicts"]))))
    oids = [25, 1184]
    assert binary_copyable(oids, [["1"], [NOW]]) and not binary_copyable(oids, [[1], [NOW]])
    assert not binary_copyable(oids, [["1"], [NOW.replace(tzinfo=None)]])
    with write_transaction(pg) as conn:
        copy_upsert(conn, t.scores, rows, update=True)
        copy_upsert(conn, t.scores, text_rows, update=True)
    cols = [c for c in t.scores.c if c.name != "log_id"]
    with pg.connect() as conn:
        got = {r[0]: tuple(r[1:]) for r in conn.execute(sa.select(t.scores.c.log_id, *cols))}
    assert got["1"] == got["11"] == got["3"] and got["2"] == got["12"]
    assert got["1"][cols.index(t.scores.c.reason)] == odd


def test_score_rows_as_arrays_store_what_copy_stores(pg):
    """A chunk's scores (dicts; JSON serialized already as ``JSONText``) go as arrays of one
    ``INSERT ... FROM unnest``, the columns every row shares as single parameters; the same rows
    with their JSON as objects go through ``COPY``. Both store the same values: awkward texts,
    JSON text and JSON NULL, per-row instants to the microsecond, integers, floats and NULLs; an
    update of existing rows takes the new values either way."""
    from datetime import timedelta

    t = ensure_output_tables(pg)

    def rows(prefix: str, as_text: bool, score: float) -> list[dict]:
        out = []
        for i, text in enumerate(AWKWARD_TEXTS):
            verdicts = [{"node": 1, "relevant": i % 2 == 0, "reason": text}]
            out.append(
                dict(
                    score_row(f"{prefix}{i}", score, "r"),
                    reason=text if i % 3 else None,
                    verdicts=JSONText(json.dumps(verdicts)) if as_text else verdicts,
                    documents=None
                    if i % 2
                    else (JSONText('[{"node": 1, "id": "d"}]') if as_text else [{"node": 1, "id": "d"}]),
                    scored_at=NOW + timedelta(microseconds=i),
                    prompt_tokens=i * 100_000_007,
                    cost=None if i % 4 else 0.1 + 0.2 * i,
                )
            )
        return out

    from ctxprec_ops.warehouse.dialects.postgresql.unnest import unnest_insert
    from ctxprec_ops.warehouse.write_rows import ColumnRows

    as_text, as_objects = rows("u", True, 0.25), rows("c", False, 0.25)
    with write_transaction(pg) as conn:  # the array path takes the first, leaves the second to COPY
        assert unnest_insert(conn, t.scores, ColumnRows.from_dicts(as_text, list(as_text[0])), "DO NOTHING") is True
        assert (
            unnest_insert(conn, t.scores, ColumnRows.from_dicts(as_objects, list(as_objects[0])), "DO NOTHING") is False
        )
        assert copy_upsert(conn, t.scores, as_objects, update=True) == len(AWKWARD_TEXTS)
    with write_transaction(pg) as conn:  # existing rows: both paths update them
        copy_upsert(conn, t.scores, rows("u", True, 0.75), update=True)
        copy_upsert(conn, t.scores, rows("c", False, 0.75), update=True)
    cols = [c for c in t.scores.c if c.name != "log_id"]
    with pg.connect() as conn:
        got = {r[0]: tuple(r[1:]) for r in conn.execute(sa.select(t.scores.c.log_id, *cols))}
    assert len(got) == 2 * len(AWKWARD_TEXTS)
    for i, text in enumerate(AWKWARD_TEXTS):
        assert got[f"u{i}"] == got[f"c{i}"], (i, text)
        row = dict(zip([c.name for c in cols], got[f"u{i}"]))
        assert row["score"] == 0.75 and row["verdicts"][0]["reason"] == text
        assert row["scored_at"] == NOW + timedelta(microseconds=i) and row["prompt_tokens"] == i * 100_000_007


def test_a_single_row_or_rows_sharing_a_key_go_through_the_arrays(pg):
    """One row (every value shared by "all" rows) or rows repeating one key (one left after
    de-duplication, the last): the key still goes as an array, the write as any other."""
    from ctxprec_ops.warehouse.dialects.postgresql.unnest import unnest_insert
    from ctxprec_ops.warehouse.write_rows import ColumnRows

    t = ensure_output_tables(pg)
    verdicts = JSONText('[{"node": 1, "relevant": true, "reason": "r"}]')
    keys = [c.name for c in t.scores.primary_key.columns]
    with write_transaction(pg) as conn:
        row = dict(score_row("0"), verdicts=verdicts)
        assert unnest_insert(conn, t.scores, ColumnRows.from_dicts([row], list(row), keep=keys), "DO NOTHING") is True
        assert (
            unnest_insert(conn, t.scores, ColumnRows.from_dicts([row], list(row)), "DO NOTHING") is False
        )  # all shared
        assert copy_upsert(conn, t.scores, [dict(score_row("1"), verdicts=verdicts)], update=True) == 1
        twice = [dict(score_row("2", 0.25), verdicts=verdicts), dict(score_row("2", 0.75), verdicts=verdicts)]
        assert copy_upsert(conn, t.scores, twice, update=True) == 1
        one = ColumnRows(
            {"key": [b"\x07" * 23], "relevant": [True]},
            {"reason": "r", "judge_model": "m", "prompt_version": "v", "created_at": NOW},
        )
        assert copy_upsert(conn, t.judgments, one, update=False) == 1
    with pg.connect() as conn:
        assert dict(conn.execute(sa.select(t.scores.c.log_id, t.scores.c.score)).all()) == {
            "0": 0.5,
            "1": 0.5,
            "2": 0.75,
        }
    assert _count(pg, t.judgments) == 1


def test_a_boolean_for_an_integer_column_leaves_the_rows_to_copy(pg):
    """``True`` in an integer column (``judge_calls``): ``COPY`` stores 1, as the single-row path
    does; its array form would be ``t``, which no integer array parses, so the arrays decline."""
    from ctxprec_ops.warehouse.dialects.postgresql.unnest import unnest_insert
    from ctxprec_ops.warehouse.write_rows import ColumnRows

    t = ensure_output_tables(pg)
    verdicts = JSONText('[{"node": 1, "relevant": true, "reason": "r"}]')
    rows = [
        dict(score_row("1"), verdicts=verdicts, judge_calls=True),
        dict(score_row("2"), verdicts=verdicts, judge_calls=2),
    ]
    with write_transaction(pg) as conn:
        assert unnest_insert(conn, t.scores, ColumnRows.from_dicts(rows, list(rows[0])), "DO NOTHING") is False
        assert copy_upsert(conn, t.scores, rows, update=True) == 2
    with pg.connect() as conn:
        got = dict(conn.execute(sa.select(t.scores.c.log_id, t.scores.c.judge_calls)).all())
    assert got == {"1": 1, "2": 2}


@pytest.mark.parametrize("json_as_text", [True, False], ids=["arrays", "copy"])
def test_an_integer_past_its_column_is_refused_not_wrapped(pg, json_as_text):
    """``prompt_tokens`` is a 32-bit column: 2^31 must fail the write. psycopg's binary ``COPY``
    dumper wrote it wrapped (-2147483648) without a word; such a chunk now goes through the text
    format, which the server refuses, as the array path is refused."""
    t = ensure_output_tables(pg)
    verdicts = [{"node": 1, "relevant": True, "reason": "r"}]
    if json_as_text:
        verdicts = JSONText(json.dumps(verdicts))
    rows = [dict(score_row("1"), verdicts=verdicts), dict(score_row("2"), verdicts=verdicts, prompt_tokens=1 << 31)]
    assert not binary_copyable([23], [[1, None, 1 << 31]]) and binary_copyable([23], [[1, None, (1 << 31) - 1]])
    with pytest.raises(sa.exc.DataError, match="out of range"):
        with write_transaction(pg) as conn:
            copy_upsert(conn, t.scores, rows, update=True)
    assert _count(pg, t.scores) == 0


def test_copy_upsert_takes_columns_and_conflict_target_from_the_table(pg):
    """Nothing about the output tables is hard-coded: a table with another key (as a migration
    adding a key column would make it) is upserted by its own primary key."""
    md = sa.MetaData()
    other = sa.Table(
        "other_scores",
        md,
        sa.Column("log_id", sa.Text, primary_key=True),
        sa.Column("source_table", sa.Text, primary_key=True),
        sa.Column("score", sa.Float),
        sa.Column("verdicts", sa.JSON().with_variant(sa.dialects.postgresql.JSONB(), "postgresql")),
    )
    md.create_all(pg)
    rows = [
        {"log_id": "1", "source_table": "a", "score": 0.1, "verdicts": {"x": 1}},
        {"log_id": "1", "source_table": "b", "score": 0.2, "verdicts": [1, 2]},
    ]
    with write_transaction(pg) as conn:
        copy_upsert(conn, other, rows, update=True)
        copy_upsert(conn, other, [dict(rows[0], score=0.5), dict(rows[1], score=0.6)], update=True)
        insert_ignore(
            conn, other, [dict(rows[0], score=9.0), {**rows[0], "source_table": "c", "score": 0.7, "verdicts": None}]
        )
    with pg.connect() as conn:
        got = {(r.log_id, r.source_table): r.score for r in conn.execute(sa.select(other))}
    assert got == {("1", "a"): 0.5, ("1", "b"): 0.6, ("1", "c"): 0.7}


def test_write_chunk_is_idempotent_and_clears_failures_on_postgres(pg):
    t = ensure_output_tables(pg)
    ids = [str(i) for i in range(600)]
    failure = {
        "log_id": "7",
        "partition_key": "2026-11-28",
        "metric": KEY.metric,
        "source_table": KEY.source_table,
        "mapping": "default",
        "judge_model": KEY.judge_model,
        "prompt_version": KEY.prompt_version,
        "error_type": "judge_error",
        "error_message": "x",
        "attempts": 3,
        "run_id": "r0",
        "failed_at": NOW,
        "chunk_index": 0,
    }
    with write_transaction(pg) as conn:
        write_chunk(conn, t, KEY, log_ids=["7"], scores=[], failures=[failure, dict(failure, log_id="8")], judgments=[])
    for _ in range(2):
        with write_transaction(pg) as conn:
            write_chunk(
                conn,
                t,
                KEY,
                log_ids=ids,
                scores=[score_row(i) for i in ids if i != "8"],
                failures=[],
                judgments=[judgment(b"a" * 23), judgment(b"b" * 23)],
            )
    assert _count(pg, t.scores) == 599 and _count(pg, t.judgments) == 2
    with pg.connect() as conn:
        assert conn.execute(sa.select(t.failures.c.log_id)).scalars().all() == ["8"]
        assert scored_ids(conn, t, KEY, ["1", "8", "599", "600", "1"]) == {"1", "599"}


def _explain(conn, stmt) -> str:
    sql = stmt.compile(dialect=conn.dialect, compile_kwargs={"render_postcompile": True})
    return "\n".join(r[0] for r in conn.exec_driver_sql("EXPLAIN " + str(sql), sql.params))


def test_id_list_lookup_uses_the_primary_key_once_the_table_is_analyzed(pg):
    """The plan shown in docs/scaling.md for ``= ANY`` of an id list (``id_in``: the failure
    clean-up's shape): before any statistics the planner guesses that 0.5% of the rows match
    ``metric`` and scans the partition index (a cost that grows with the table);
    ``analyze_if_grown`` analyzes the table after its first chunk and the lookup goes through the
    primary key."""
    t = ensure_output_tables(pg)
    with pg.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE ctxprec_scores SET (autovacuum_enabled = off)")
    ids = [str(i) for i in range(500)]
    from sqlalchemy.dialects.postgresql import ARRAY

    # the planner's guess without statistics, shown with the ids as a text[] parameter; the
    # pipeline sends them as one text the server casts (``id_in``), a constant the planner sees
    as_parameter = t.scores.c.log_id == sa.any_(sa.bindparam("ids", ids, type_=ARRAY(sa.Text())))
    lookup = sa.select(t.scores.c.log_id).where(KEY.where(t.scores), as_parameter)
    with pg.connect() as conn:
        ids_bound = next(dialect_of(pg).id_in(conn, t.scores.c.log_id, ids))
    pipeline_lookup = sa.select(t.scores.c.log_id).where(KEY.where(t.scores), ids_bound)
    with write_transaction(pg) as conn:  # one chunk through the real write path, then 30,000 rows in SQL
        write_chunk(conn, t, KEY, log_ids=[], scores=[score_row(str(i)) for i in range(500)], failures=[], judgments=[])
        conn.exec_driver_sql(
            f"INSERT INTO ctxprec_scores (log_id, {COPIED}) "
            f"SELECT log_id || '-' || g, {COPIED} FROM ctxprec_scores CROSS JOIN generate_series(1, 60) AS g"
        )
    with pg.connect() as conn:
        before = _explain(conn, lookup)
    assert "ix_ctxprec_scores_partition" in before  # what the planner does without statistics
    assert analyze_if_grown(pg, t, {"ctxprec_scores": 30500}) == ["ctxprec_scores"]
    assert analyze_if_grown(pg, t, {"ctxprec_scores": 500}) == []  # fresh statistics: nothing to do
    with pg.connect() as conn:
        after = _explain(conn, lookup)
    # an index (only) scan or a bitmap scan of the primary key: which one depends on the visibility
    # map (VACUUM), the access path does not
    assert "on ctxprec_scores_pk" in after and "ix_ctxprec_scores_partition" not in after, after
    with pg.connect() as conn:
        pipeline = _explain(conn, pipeline_lookup)
    assert "on ctxprec_scores_pk" in pipeline and "ix_ctxprec_scores_partition" not in pipeline, pipeline


def _scores_past_their_statistics(pg):
    """``ctxprec_scores`` as a run's first chunks leave it: analyzed after its first 500 rows
    (``analyze_if_grown``), grown to 3,000 since (autovacuum off)."""
    t = ensure_output_tables(pg)
    with pg.begin() as conn:
        conn.exec_driver_sql("ALTER TABLE ctxprec_scores SET (autovacuum_enabled = off)")
    with write_transaction(pg) as conn:  # one chunk through the real write path
        scores = [score_row(str(i)) | {"mapping": FULL_KEY.mapping} for i in range(500)]
        write_chunk(conn, t, FULL_KEY, log_ids=[], scores=scores, failures=[], judgments=[])
    with write_transaction(pg) as conn:
        conn.exec_driver_sql("ANALYZE ctxprec_scores")
        conn.exec_driver_sql(
            f"INSERT INTO ctxprec_scores (log_id, {COPIED}) "
            f"SELECT log_id || '-' || g, {COPIED} FROM ctxprec_scores CROSS JOIN generate_series(1, 5) AS g"
        )
    return t


def test_scored_ids_probe_the_primary_key_whatever_the_statistics(pg):
    """A chunk's already-scored look-up is one primary-key probe per id whatever the statistics.
    ``log_id = ANY(CAST(:ids AS text[]))`` became a scan of the table once its statistics lagged
    behind it (here and early in every run), and under a generic plan (psycopg prepares a statement
    it has sent five times) the cast was evaluated again for every row filtered: 30 – 90 ms a
    look-up (bench/README.md)."""
    t = _scores_past_their_statistics(pg)
    ids = [str(i) for i in range(250, 750)]  # half scored
    sent: list[tuple[str, object]] = []
    with pg.connect() as conn:
        assert conn.exec_driver_sql("SELECT reltuples FROM pg_class WHERE relname = 'ctxprec_scores'").scalar() == 500
        sa.event.listen(conn, "before_cursor_execute", lambda *a: sent.append((a[2], a[3])))
        found = scored_ids(conn, t, FULL_KEY, ids)
        ((statement, params),) = sent  # the look-up as the pipeline sends it, explained
        plans = {}
        for mode in ("auto", "force_generic_plan"):
            conn.exec_driver_sql(f"SET plan_cache_mode = {mode}")
            plans[mode] = "\n".join(r[0] for r in conn.exec_driver_sql("EXPLAIN " + statement, params))
    for plan in plans.values():
        assert "Nested Loop" in plan and "using ctxprec_scores_pk" in plan, plan
        assert "Seq Scan on ctxprec_scores" not in plan and "ix_ctxprec_scores_partition" not in plan, plan
    assert found == {str(i) for i in range(250, 500)}


def test_scored_ids_find_exactly_the_scored_ids_of_the_key(pg):
    """The probe's answers: ids scored under this key only (not another judge's or mapping's),
    each once however often it is asked, texts with quotes, backslashes, braces and blanks; the
    same as the generic ``IN`` look-up's. A key without its mapping (a reader of older tables)
    fixes less than the primary key: the generic look-up answers it, any mapping counting."""
    from ctxprec_ops.warehouse.dialects.base import Dialect

    t = ensure_output_tables(pg)
    odd = ['a"b', "c\\d", "{x}", "NULL", " sp ", "é", "a,b"]
    other_judge = {**score_row("j1"), "judge_model": "judge-y"}
    other_mapping = {**score_row("m1"), "mapping": "alt"}
    with write_transaction(pg) as conn:
        upsert(conn, t.scores, [score_row(i) for i in ["1", "2", *odd]] + [other_judge, other_mapping])
    asked = ["1", "1", "3", "j1", "m1", *odd, *odd]
    fields = FULL_KEY.fields(t.scores)
    with pg.connect() as conn:
        found = scored_ids(conn, t, FULL_KEY, asked)
        generic = {r[0] for r in Dialect().select_in(conn, t.scores, ["log_id"], "log_id", asked, fields)}
        probed = list(dialect_of(conn).select_in(conn, t.scores, ["log_id", None], "log_id", asked, fields))
        any_mapping = scored_ids(conn, t, KEY, asked)
        assert scored_ids(conn, t, FULL_KEY, []) == set()
    assert found == generic == {"1", *odd}
    assert sorted(r[0] for r in probed) == sorted({"1", *odd}) and all(r[1] is None for r in probed)
    assert any_mapping == {"1", "m1", *odd}


def test_judgment_lookup_is_one_index_range_per_question_without_statistics(pg):
    t = ensure_output_tables(pg)
    keys = [k for q in range(300) for k in judgment_keys("judge-x", "v1", f"q{q}", "a", [f"n{i}" for i in range(5)])]
    with write_transaction(pg) as conn:
        insert_ignore(conn, t.judgments, [judgment(k) for k in keys])
    with pg.connect() as conn:
        stmt = heads_lookup(t.judgments, agreement=True)
        sql = stmt.compile(dialect=conn.dialect)
        ranges = [key_range(key_head(k)) for k in keys[::5]]
        params = dict(sql.params, lo=[lo for lo, _ in ranges], hi=[hi for _, hi in ranges])
        plan = "\n".join(r[0] for r in conn.exec_driver_sql("EXPLAIN " + str(sql), params))
    assert "Nested Loop" in plan and "Index Scan using ctxprec_judgments_pk" in plan, plan


@pytest.mark.parametrize("backend", ["sqlite", "postgresql"])
def test_cache_probe_finds_hits_of_other_partitions_and_only_the_keys_asked(backend, request, tmp_path):
    engine = get_engine(
        request.getfixturevalue("pg_url") if backend == "postgresql" else f"sqlite:///{tmp_path / 'wh.db'}"
    )
    t = ensure_output_tables(engine)
    seen = judgment_keys("judge-x", "v1", "How do I reset?", "Use the link.", ["n1", "n2", "n3"])
    with write_transaction(engine) as conn:  # judged yesterday
        insert_ignore(
            conn,
            t.judgments,
            [judgment(seen[0], True, "one"), judgment(seen[1], False, "two"), judgment(seen[2], True, "three")],
        )
    today = judgment_keys("judge-x", "v1", "How do I reset?", "Use the link.", ["n1", "n3", "new node"])
    other_prompt = judgment_keys("judge-x", "v2", "How do I reset?", "Use the link.", ["n1"])
    never = judgment_keys("judge-x", "v1", "Something else", "x", ["n1"])
    with engine.connect() as conn:
        got = load_judgments(conn, t, today + other_prompt + never)
        assert load_judgments(conn, t, []) == {}
    assert set(got) == {seen[0], seen[2]}
    assert (got[seen[0]].relevant, got[seen[0]].reason) == (True, "one")
    assert got[seen[2]].reason == "three"


def test_id_and_key_arrays_sent_as_text_reach_the_server_exactly(pg):
    """Id lists and judgment-key bounds go to PostgreSQL as one text parameter the server casts
    (psycopg's per-element dumping was most of a chunk's client CPU for these statements): every
    byte value, and texts holding quotes, backslashes, braces, commas, blanks and the word NULL."""
    from sqlalchemy.dialects.postgresql import ARRAY

    from ctxprec_ops.warehouse.dialects.postgresql.arrays import bytea_array, text_array

    keys = [b"", bytes(range(256)), b'\x00\\"{},', *(key_range(bytes([i]) * 9)[0] for i in range(50))]
    texts = ['a"b', "c\\d", "{x}", "NULL", "", " sp ", "é", "a,b", '\\"', "x" * 300]
    with pg.connect() as conn:
        got_keys = conn.execute(
            sa.select(sa.cast(sa.bindparam("k", bytea_array(keys), type_=sa.Text()), ARRAY(sa.LargeBinary())))
        ).scalar_one()
        got_texts = conn.execute(
            sa.select(sa.cast(sa.bindparam("t", text_array(texts), type_=sa.Text()), ARRAY(sa.Text())))
        ).scalar_one()
        conn.exec_driver_sql("CREATE TEMP TABLE ids (log_id text)")
        conn.execute(sa.text("INSERT INTO ids VALUES (:v)"), [{"v": t} for t in texts])
        ids = sa.table("ids", sa.column("log_id", sa.Text()))
        (cond,) = dialect_of(conn).id_in(conn, ids.c.log_id, texts[:5])
        found = {r[0] for r in conn.execute(sa.select(ids.c.log_id).where(cond))}
    assert [bytes(k) for k in got_keys] == keys
    assert got_texts == texts
    assert found == set(texts[:5])
