"""A retrieval-log table with segment columns and a known answer, scored through the real
pipeline with the offline lexical judge (each row's score follows from where its relevant nodes
are ranked).

60 queries x 3 tenants x 2 retriever versions per day over ``DAYS``. v1 and v2 rank alike (a
random per-row jitter in either direction), except on ``BAD_DAY`` for tenant ``globex``, where v2
ranks the relevant nodes last. Extras on ``BAD_DAY``: two acme queries only v1 answered
(unpaired rows), one row of tenant ``solo`` (a one-row segment), rows with tenant NULL, and a
tenant whose name holds quotes and non-ASCII letters.
"""

from __future__ import annotations

import datetime as dt
import json
import random
from collections.abc import Sequence

import sqlalchemy as sa

from ctxprec_ops.pipeline import PipelineConfig, score_partition
from tests.synthetic_history import day_keys

DAYS = day_keys("2026-11-20", 9)
BAD_DAY = "2026-11-28"
TENANTS = ("acme", "globex", "initech")
ODD_TENANT = 'o\'brien "ü" 東京'
SEGMENTS = ("tenant", "retriever_version", "query_id")

EXPECTED = "Refunds are paid back within five business days to the original card."
RELEVANT = [
    "Refunds are paid back within five business days to the original card.",
    "Refunds reach the original card within five business days.",
]
NOISE = ["Shipping rates vary by region and parcel weight.", "Gift wrapping costs extra at checkout."]

#: relevant ranks of the patterns (4 nodes): precision 1.0, 0.833, 0.583; and the bad ranking (0.417)
PATTERNS = [(1, 2), (1, 3), (2, 3)]
BAD = (3, 4)


def _nodes(relevant_at: Sequence[int]) -> list[str]:
    rel, noise = iter(RELEVANT), iter(NOISE)
    return [next(rel) if k in relevant_at else next(noise) for k in range(1, 5)]


def source_rows() -> list[dict]:
    rnd = random.Random(34)
    rows: list[dict] = []

    def add(day: str, tenant: str | None, version: str, q: int, relevant_at: Sequence[int]) -> None:
        i = len(rows)
        rows.append(
            {
                "id": i + 1,
                "event_time": f"{day} {8 + i % 12:02d}:{i % 60:02d}:00",
                "input": f"How long do refunds take for order {q}?",
                "expected_output": EXPECTED,
                "retrieval_context": json.dumps(_nodes(relevant_at)),
                "tenant": tenant,
                "retriever_version": version,
                "query_id": f"q{q:03d}",
            }
        )

    for day in DAYS:
        for tenant in TENANTS:
            for q in range(60):
                base = q % 3
                add(day, tenant, "v1", q, PATTERNS[base])
                if day == BAD_DAY and tenant == "globex":
                    add(day, tenant, "v2", q, BAD)
                else:
                    add(day, tenant, "v2", q, PATTERNS[(base + rnd.choice((-1, 0, 1))) % 3])
        for q in range(25):  # NULL tenant and the odd name: normal, both versions
            add(day, None, "v1", q, PATTERNS[q % 3])
            add(day, None, "v2", q, PATTERNS[(q + rnd.choice((-1, 0, 1))) % 3])
            add(day, ODD_TENANT, "v1", q, PATTERNS[q % 3])
            add(day, ODD_TENANT, "v2", q, PATTERNS[(q + rnd.choice((-1, 0, 1))) % 3])
        if day == BAD_DAY:
            add(day, "acme", "v1", 60, PATTERNS[0])  # only v1 answered these two: unpaired
            add(day, "acme", "v1", 61, PATTERNS[1])
            add(day, "solo", "v1", 0, PATTERNS[0])  # a segment of one row
    return rows


def write_source(engine: sa.Engine) -> None:
    md = sa.MetaData()
    t = sa.Table(
        "retrieval_logs",
        md,
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("event_time", sa.DateTime),
        sa.Column("input", sa.Text),
        sa.Column("actual_output", sa.Text),
        sa.Column("expected_output", sa.Text),
        sa.Column("retrieval_context", sa.Text),
        sa.Column("tenant", sa.Text),
        sa.Column("retriever_version", sa.Text),
        sa.Column("query_id", sa.Text),
        sa.Index("ix_logs_time", "event_time"),
    )
    md.create_all(engine)
    rows = source_rows()
    for r in rows:
        r["event_time"] = dt.datetime.fromisoformat(r["event_time"])
    with engine.begin() as conn:
        conn.execute(t.insert(), rows)


def build(url: str, days: Sequence[str] = DAYS) -> str:
    engine = sa.create_engine(url)
    write_source(engine)
    engine.dispose()
    config = PipelineConfig(warehouse=url, judge="lexical", segments=list(SEGMENTS))
    for day in days:
        score_partition(config, day)
    return url


if __name__ == "__main__":  # python -m tests.segment_data sqlite:///segments_example.db
    import sys

    target = sys.argv[1] if len(sys.argv) > 1 else "sqlite:///segments_example.db"
    print(f"scored {len(DAYS)} partitions into {build(target)}")
