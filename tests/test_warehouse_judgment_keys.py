"""``ctxprec_judgments.key`` is binary; a table written with the former 64-hex-digit text keys is
converted in place and keeps its verdicts (real SQLite files and the embedded PostgreSQL)."""

from __future__ import annotations

import threading
from datetime import UTC, datetime

import pytest
import sqlalchemy as sa

from ctxprec_ops.judge.cache import KEY_BYTES, judgment_keys
from ctxprec_ops.warehouse.engine import get_engine
from ctxprec_ops.warehouse.schema import ensure_output_tables, output_tables
from ctxprec_ops.warehouse.store import load_judgments

NOW = datetime(2026, 11, 29, 1, 2, 3, tzinfo=UTC)
# what the former key format gave for these nodes: 32 hex digits of the question, 32 of the node
FORMER = {
    "node one": "62ca404139ce3f65575fd1b83a38e1ba3e1984d2dbea5a2c80299a9d9c1076ab",
}
QUESTION = ("gpt-4o-mini", "v1", "How do I reset?", "Use the link.")


@pytest.fixture(params=["sqlite", "postgresql"])
def url(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'wh.db'}"
    return request.getfixturevalue("pg_url")


def _former_table(engine: sa.Engine) -> None:
    """``ctxprec_judgments`` as the previous version created it, with one current-format entry,
    one entry of an older format (not hex) and one from a different question."""
    with engine.begin() as conn:
        collate = ' COLLATE "C"' if engine.dialect.name == "postgresql" else ""
        without_rowid = " WITHOUT ROWID" if engine.dialect.name == "sqlite" else ""
        conn.exec_driver_sql(
            f"CREATE TABLE ctxprec_judgments (key VARCHAR(64){collate} NOT NULL, judge_model VARCHAR(255) NOT NULL, "
            "prompt_version VARCHAR(64) NOT NULL, relevant BOOLEAN NOT NULL, reason TEXT, "
            f"created_at TIMESTAMP WITH TIME ZONE NOT NULL, CONSTRAINT ctxprec_judgments_pk PRIMARY KEY (key))"
            + without_rowid
        )
        rows = [
            {"key": FORMER["node one"], "relevant": True, "reason": "paid for"},
            {"key": "not-a-hex-key", "relevant": False, "reason": "older format"},
            {"key": "ab" * 32, "relevant": False, "reason": "another question"},
        ]
        conn.execute(
            sa.text(
                "INSERT INTO ctxprec_judgments VALUES (:key, 'gpt-4o-mini', 'v1', :relevant, :reason, :created_at)"
            ),
            [dict(r, created_at=NOW) for r in rows],
        )


def _key_type(engine: sa.Engine) -> sa.types.TypeEngine:
    cols = {c["name"]: c["type"] for c in sa.inspect(engine).get_columns("ctxprec_judgments")}
    return cols["key"]


def test_new_tables_have_binary_keys(url):
    engine = get_engine(url)
    ensure_output_tables(engine)
    assert isinstance(_key_type(engine), sa.LargeBinary)


def test_former_text_keys_are_converted_and_keep_their_verdicts(url):
    engine = get_engine(url)
    _former_table(engine)
    t = ensure_output_tables(engine)
    assert isinstance(_key_type(engine), sa.LargeBinary)
    wanted = judgment_keys(*QUESTION, ["node one", "node two"])
    with engine.connect() as conn:
        got = load_judgments(conn, t, wanted)
        keys = [bytes(k) for k in conn.execute(sa.select(t.judgments.c.key)).scalars()]
    assert set(got) == {wanted[0]} and (got[wanted[0]].relevant, got[wanted[0]].reason) == (True, "paid for")
    # the non-hex entry of an older format is gone, the other question's entry is converted
    assert sorted(keys) == sorted([wanted[0], bytes.fromhex("ab" * 7 + "ab" * 16)])
    assert all(len(k) == KEY_BYTES for k in keys)
    # the converted table takes new entries and a second look changes nothing
    ensure_output_tables(get_engine(url))
    with engine.connect() as conn:
        assert conn.execute(sa.select(sa.func.count()).select_from(t.judgments)).scalar_one() == 2


def test_workers_converting_at_once_convert_once(pg_url):
    """Two processes' first ``ensure_output_tables`` on a former table: one converts, the other
    waits for its lock and finds the table converted (no error, no lost rows)."""
    _former_table(get_engine(pg_url))
    errors: list[BaseException] = []

    def ensure() -> None:
        try:
            ensure_output_tables(sa.create_engine(get_engine(pg_url).url))  # an engine of its own
        except BaseException as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=ensure) for _ in range(2)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert errors == []
    engine = get_engine(pg_url)
    with engine.connect() as conn:
        t = output_tables()
        assert conn.execute(sa.select(sa.func.count()).select_from(t.judgments)).scalar_one() == 2
