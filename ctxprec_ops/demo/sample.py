"""A realistic sample warehouse for ``ctxprec demo``: a support-bot's retrieval and chat logs.

``create_sample_warehouse(url)`` (re)creates ``retrieval_logs`` and ``conversation_logs`` with a
few hundred rows per UTC day over ``days`` days. Each row is a support question on one of a dozen
topics; the retriever returns 3-8 passages mixing on-topic passages (which share vocabulary with
the expected answer) and distractors from other topics. Most days rank the useful passages first;
two or three "dip" days push them down and add distractors, so the trend shows a regression. A
few malformed rows per sample (null / non-JSON / empty context, a non-string node, an empty
expected answer) exercise the failure path. The same seed always gives the same rows.

Every retrieval also carries gold labels (``retrieved_ids``, ``relevant_ids``: stable chunk ids,
see ``passage_ids``), so the demo scores ``label_contextual_precision`` too and ``ctxprec
calibrate`` can measure the lexical judge against them.
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass, field
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..secrets import redact_url
from .topics import FOLLOW_UPS, NOISE, PREFIXES, SUFFIXES, TOPICS, Topic

__all__ = ["SampleInfo", "create_sample_warehouse", "MALFORMED_KINDS", "passage_ids"]

#: the kinds of bad rows the sample contains (each at least once when days >= 1)
MALFORMED_KINDS = (
    "null_context",
    "non_json_context",
    "empty_context",
    "non_string_node",
    "empty_expected_output",
)
#: bad conversations: unparsable turns, no retrieval at all, no expected outcome
MALFORMED_CONVERSATION_KINDS = ("non_json_turns", "no_retrieval", "empty_expected_outcome")


@dataclass
class SampleInfo:
    """What ``create_sample_warehouse`` wrote (for the demo's printout and the tests)."""

    url: str  # redacted
    source_table: str
    conversation_table: str
    partitions: list[str]
    retrieval_rows: dict[str, int]
    conversation_rows: dict[str, int]
    dip_days: list[str]
    malformed: dict[str, list[Any]] = field(default_factory=dict)  # kind -> retrieval ids
    malformed_conversations: dict[str, list[Any]] = field(default_factory=dict)
    seed: int = 0

    @property
    def total_retrievals(self) -> int:
        return sum(self.retrieval_rows.values())

    @property
    def total_conversations(self) -> int:
        return sum(self.conversation_rows.values())


def _dip_indices(days: int) -> list[int]:
    """Two or three consecutive days after a baseline week (so a regression rule can see them)."""
    if days < 4:
        return [days - 1] if days >= 2 else []
    width = 3 if days >= 10 else 2
    start = min(max(days // 2, min(7, days - width - 1)), days - width - 1)  # >= 1 recovery day
    return list(range(start, start + width))


def _event_times(rng: random.Random, day: date, n: int) -> list[datetime]:
    """``n`` naive-UTC instants within ``day``: a daytime-heavy spread plus a few at the edges."""
    base = datetime.combine(day, time(0, 0))
    out: list[datetime] = []
    edges = min(n, rng.randint(2, 4))
    for i in range(edges):  # a few right after midnight and right before the next one
        if i % 2 == 0:
            out.append(base + timedelta(seconds=rng.uniform(0, 45)))
        else:
            out.append(base + timedelta(days=1) - timedelta(seconds=rng.uniform(0.001, 45)))
    for _ in range(n - edges):
        hour = min(23.999, max(0.0, rng.gauss(14, 5)))  # busier in the afternoon (UTC)
        out.append(base + timedelta(seconds=hour * 3600 + rng.uniform(0, 1)))
    out.sort()
    return out


def _other_topics_passages(rng: random.Random, topic: Topic, k: int) -> list[str]:
    others = [t for t in TOPICS if t.name != topic.name]
    out: dict[str, None] = {}  # ordered set: no exact duplicate node in one list
    while len(out) < k:
        t = rng.choice(others)
        if rng.random() < 0.25:
            out[rng.choice(NOISE)] = None
        elif rng.random() < 0.5:
            out[rng.choice(t.background)] = None
        else:
            out[rng.choice(rng.choice(t.qas).support)] = None
    return list(out)


_PASSAGE_IDS: dict[str, str] = {}


def passage_ids() -> dict[str, str]:
    """Passage text -> its stable chunk id (``billing-q1-s2``: topic, question set, support
    passage; ``billing-bg1``: background; ``noise-3``), the ids of the gold labels."""
    if not _PASSAGE_IDS:
        for topic in TOPICS:
            for qi, qa in enumerate(topic.qas, start=1):
                for si, text in enumerate(qa.support, start=1):
                    _PASSAGE_IDS.setdefault(text, f"{topic.name}-q{qi}-s{si}")
            for bi, text in enumerate(topic.background, start=1):
                _PASSAGE_IDS.setdefault(text, f"{topic.name}-bg{bi}")
        for ni, text in enumerate(NOISE, start=1):
            _PASSAGE_IDS.setdefault(text, f"noise-{ni}")
    return _PASSAGE_IDS


def _rank(rng: random.Random, relevant: list[str], distractors: list[str], quality: str) -> list[str]:
    rel, dis = relevant[:], distractors[:]
    rng.shuffle(rel)
    rng.shuffle(dis)
    if quality == "good":  # useful nodes first, maybe one distractor slipped in at rank 2
        nodes = rel + dis
        if len(rel) > 1 and dis and rng.random() < 0.3:
            nodes.insert(1, nodes.pop(len(rel)))
        return nodes
    if quality == "bad":  # useful nodes buried at the bottom
        return dis + rel
    nodes = rel + dis
    rng.shuffle(nodes)
    return nodes


#: (good, mixed, bad, none) ranking mix and extra distractors, per kind of day
_NORMAL = ((0.66, 0.24, 0.06, 0.04), 0)
_DIP = ((0.22, 0.33, 0.33, 0.12), 2)


def _retrieval(rng: random.Random, dip: bool) -> dict[str, Any]:
    topic = rng.choice(TOPICS)
    qa = rng.choice(topic.qas)
    question = rng.choice(PREFIXES) + rng.choice(qa.questions) + rng.choice(SUFFIXES)
    mix, extra = _DIP if dip else _NORMAL
    drift = rng.uniform(-0.03, 0.03)
    quality = rng.choices(("good", "mixed", "bad", "none"), weights=(mix[0] + drift, mix[1], mix[2], mix[3]))[0]
    n = rng.randint(3, 8)
    if quality == "none":
        relevant: list[str] = []
    else:
        relevant = rng.sample(qa.support, k=min(len(qa.support), rng.randint(1, 3), n - 1))
    distractors = _other_topics_passages(rng, topic, n - len(relevant) + extra)
    if rng.random() < 0.3:
        distractors[-1] = rng.choice(topic.background)  # on-topic, yet not answer-bearing
    nodes = _rank(rng, relevant, distractors, quality)
    ids = passage_ids()
    good_answer = quality == "good" or rng.random() < 0.4
    actual: str | None = qa.answer if good_answer else "I'm not sure; please check the help center or contact support."
    if rng.random() < 0.05:
        actual = None
    return {
        "input": question,
        "actual_output": actual,
        "expected_output": qa.answer,
        "retrieval_context": json.dumps(nodes),
        # gold labels: the chunk ids retrieved, and every chunk that supports the answer
        "retrieved_ids": json.dumps([ids[n] for n in nodes]),
        "relevant_ids": json.dumps([ids[n] for n in qa.support]),
        "_topic": topic,
        "_qa": qa,
    }


def _malform(rng: random.Random, row: dict[str, Any], kind: str) -> None:
    if kind == "null_context":
        row["retrieval_context"] = None
    elif kind == "non_json_context":
        row["retrieval_context"] = "['Passwords must be at least 12 characters', 'Billing runs monthly'"
    elif kind == "empty_context":
        row["retrieval_context"] = "[]"
    elif kind == "non_string_node":
        nodes = json.loads(row["retrieval_context"])
        nodes.insert(rng.randint(0, len(nodes)), {"text": nodes[0], "score": 0.87})
        nodes.insert(rng.randint(0, len(nodes)), 42)
        row["retrieval_context"] = json.dumps(nodes)
    elif kind == "empty_expected_output":
        row["expected_output"] = ""
    else:  # pragma: no cover
        raise ValueError(kind)


def _conversation(rng: random.Random, dip: bool) -> tuple[list[dict[str, Any]], str]:
    """A chat about one issue: the first question, follow-ups on it, sometimes a side question on
    the same topic. The expected outcome is the answer to the main issue, so the side question's
    passages are (rightly) not useful for it."""
    topic = rng.choice(TOPICS)
    main = rng.choice(topic.qas)
    units = rng.randint(2, 4)
    mix, extra = _DIP if dip else _NORMAL
    turns: list[dict[str, Any]] = []
    for i in range(units):
        side = i > 0 and len(topic.qas) > 1 and rng.random() < 0.25
        qa = rng.choice([q for q in topic.qas if q is not main]) if side else main
        if i == 0:
            user = rng.choice(PREFIXES) + rng.choice(qa.questions)
        elif side or rng.random() < 0.5:
            user = rng.choice(qa.questions)
        else:
            user = rng.choice(FOLLOW_UPS)
        turns.append({"role": "user", "content": user, "retrieval_context": None})
        if i > 0 and rng.random() < 0.15:  # a chit-chat answer with no retrieval
            turns.append({"role": "assistant", "content": "Happy to help with that.", "retrieval_context": []})
            continue
        quality = rng.choices(("good", "mixed", "bad", "none"), weights=mix)[0]
        n = rng.randint(2, 5)
        k = min(len(qa.support), rng.randint(1, 2), n - 1)
        relevant = [] if quality == "none" else rng.sample(qa.support, k=k)
        distractors = _other_topics_passages(rng, topic, max(1, n - len(relevant) + extra))
        turns.append(
            {"role": "assistant", "content": qa.answer, "retrieval_context": _rank(rng, relevant, distractors, quality)}
        )
    return turns, main.answer


def _engine(url_or_engine: str | Engine) -> Engine:
    from ..warehouse.engine import get_engine  # WAL + busy timeout on SQLite, psycopg 3 for PG

    return get_engine(url_or_engine)


def _tables(metadata: sa.MetaData, source_table: str, conversation_table: str) -> tuple[sa.Table, sa.Table]:
    logs = sa.Table(
        source_table,
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("event_time", sa.DateTime(timezone=False), nullable=False, index=True),
        sa.Column("input", sa.Text, nullable=False),
        sa.Column("actual_output", sa.Text, nullable=True),
        sa.Column("expected_output", sa.Text, nullable=True),
        sa.Column("retrieval_context", sa.Text, nullable=True),  # JSON text
        sa.Column("retrieved_ids", sa.Text, nullable=True),  # JSON text: chunk ids, ranked
        sa.Column("relevant_ids", sa.Text, nullable=True),  # JSON text: ids of the chunks that answer
    )
    convs = sa.Table(
        conversation_table,
        metadata,
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("event_time", sa.DateTime(timezone=False), nullable=False, index=True),
        sa.Column("turns", sa.Text, nullable=True),  # JSON text
        sa.Column("expected_outcome", sa.Text, nullable=True),
    )
    return logs, convs


def create_sample_warehouse(
    url_or_engine: str | Engine,
    *,
    days: int = 14,
    rows_per_day: tuple[int, int] = (250, 400),
    conversations_per_day: tuple[int, int] = (20, 40),
    seed: int = 20261128,
    end_date: date | str | None = None,
    source_table: str = "retrieval_logs",
    conversation_table: str = "conversation_logs",
) -> SampleInfo:
    """(Re)create the two sample tables and fill them; returns what was written.

    ``end_date`` is the last partition (default: yesterday, UTC); partitions are the ``days``
    UTC days ending there. Existing tables of those names are dropped first. ``event_time`` is
    stored as naive UTC. Deterministic for a given ``seed`` and ``end_date``.
    """
    if days < 1:
        raise ValueError(f"days must be at least 1, got {days}")
    lo, hi = rows_per_day
    clo, chi = conversations_per_day
    if not (1 <= lo <= hi) or not (0 <= clo <= chi):
        raise ValueError("rows_per_day / conversations_per_day must be (low, high) with 1 <= low <= high")
    if end_date is None:
        end = datetime.now(UTC).date() - timedelta(days=1)
    elif isinstance(end_date, str):
        end = date.fromisoformat(end_date)
    else:
        end = end_date
    day_list = [end - timedelta(days=days - 1 - i) for i in range(days)]
    dips = set(_dip_indices(days))
    rng = random.Random(seed)

    info = SampleInfo(
        url="",
        source_table=source_table,
        conversation_table=conversation_table,
        partitions=[d.isoformat() for d in day_list],
        retrieval_rows={},
        conversation_rows={},
        dip_days=[day_list[i].isoformat() for i in sorted(dips)],
        malformed={k: [] for k in MALFORMED_KINDS},
        malformed_conversations={k: [] for k in MALFORMED_CONVERSATION_KINDS},
        seed=seed,
    )

    log_rows: list[dict[str, Any]] = []
    conv_rows: list[dict[str, Any]] = []
    next_id = 1
    next_conv = 1
    for di, day in enumerate(day_list):
        dip = di in dips
        n = rng.randint(lo, hi)
        times = _event_times(rng, day, n)
        # each malformed kind shows up at least once: kind i lands on day i (mod days)
        forced = [k for i, k in enumerate(MALFORMED_KINDS) if i % days == di]
        bad_slots = {rng.randrange(n): k for k in forced}
        for j, t in enumerate(times):
            row = _retrieval(rng, dip)
            kind = bad_slots.get(j)
            if kind is None and rng.random() < 0.006:
                kind = rng.choice(MALFORMED_KINDS)
            if kind is not None:
                _malform(rng, row, kind)
                info.malformed[kind].append(next_id)
            row.pop("_topic")
            row.pop("_qa")
            log_rows.append({"id": next_id, "event_time": t, **row})
            next_id += 1
        info.retrieval_rows[day.isoformat()] = n

        m = rng.randint(clo, chi)
        ctimes = _event_times(rng, day, m) if m else []
        forced_c = [k for i, k in enumerate(MALFORMED_CONVERSATION_KINDS) if i % days == di]
        bad_c = {rng.randrange(m): k for k in forced_c} if m else {}
        for j, t in enumerate(ctimes):
            turns, outcome = _conversation(rng, dip)
            turns_text = json.dumps(turns)
            kind = bad_c.get(j)
            if kind == "non_json_turns":
                turns_text = turns_text[: len(turns_text) // 2]
            elif kind == "no_retrieval":
                for turn in turns:
                    turn["retrieval_context"] = None
                turns_text = json.dumps(turns)
            elif kind == "empty_expected_outcome":
                outcome = ""
            if kind is not None:
                info.malformed_conversations[kind].append(next_conv)
            conv_rows.append({"id": next_conv, "event_time": t, "turns": turns_text, "expected_outcome": outcome})
            next_conv += 1
        info.conversation_rows[day.isoformat()] = m

    engine = _engine(url_or_engine)
    info.url = redact_url(engine.url.render_as_string(hide_password=True))
    metadata = sa.MetaData()
    logs, convs = _tables(metadata, source_table, conversation_table)
    with engine.begin() as conn:
        metadata.drop_all(conn, checkfirst=True)
        metadata.create_all(conn)
        for start in range(0, len(log_rows), 5000):
            conn.execute(logs.insert(), log_rows[start : start + 5000])
        for start in range(0, len(conv_rows), 5000):
            conn.execute(convs.insert(), conv_rows[start : start + 5000])
    return info
