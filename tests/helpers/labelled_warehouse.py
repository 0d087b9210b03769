"""A retrieval-log partition whose gold labels are known, and a real judge whose errors are known.

``build(url)`` writes ``rows`` retrievals of 3-6 ranked nodes on ``DAY`` (gold relevance drawn with a
probability falling with the rank, seeded); every node text is unique and says nothing about its
relevance to the judge. ``KnownErrorJudge`` (a real ``JudgeModel`` answering through the full
prompt path) looks each node up in the gold labels and gets it wrong at fixed rates — a relevant
node missed with probability ``fn``, an irrelevant one called relevant with ``fp`` — decided by a
hash of the node text, so the same node always gets the same verdict, whatever its rank.
``fill_sheet`` plays the person labelling: it fills a sampled CSV's ``relevant`` column from the gold.
"""

from __future__ import annotations

import csv
import hashlib
import json
import random
import re
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import sqlalchemy as sa

from ctxprec_ops.judge.models.base import JudgeModel
from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.scoring.formula import contextual_precision

DAY = "2026-11-28"
_BLOCK = re.compile(r'<node id="(\d+)">\n(.*?)\n</node>', re.DOTALL)


@dataclass
class Truth:
    gold: dict[str, list[bool]]  # log_id -> relevance by rank
    relevant_text: dict[str, bool]  # node text -> relevance

    def mean(self, ids: list[str] | None = None) -> float:
        keys = ids if ids is not None else list(self.gold)
        return sum(contextual_precision(self.gold[k]) for k in keys) / len(keys)


def _text(log_id: int, rank: int, relevant: bool) -> str:
    topic = "the refund window for order" if relevant else "gift wrapping options for order"
    return f"Passage {rank} about {topic} {log_id}."


def build(url: str, *, rows: int = 120, seed: int = 0, day: str = DAY, start_id: int = 1, segment: Any = None) -> Truth:
    """Create ``retrieval_logs`` (plus a ``version`` column when ``segment`` maps ids to values)."""
    rng = random.Random(seed)
    engine = sa.create_engine(url)
    md = sa.MetaData()
    cols = [
        sa.Column("id", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("event_time", sa.DateTime),
        sa.Column("input", sa.Text),
        sa.Column("actual_output", sa.Text),
        sa.Column("expected_output", sa.Text),
        sa.Column("retrieval_context", sa.Text),
        sa.Column("version", sa.Text),
    ]
    t = sa.Table("retrieval_logs", md, *cols)
    md.create_all(engine)
    gold: dict[str, list[bool]] = {}
    texts: dict[str, bool] = {}
    values = []
    for i in range(start_id, start_id + rows):
        n = rng.randint(3, 6)
        labels = [rng.random() < 0.7 * 0.75 ** (k - 1) for k in range(1, n + 1)]
        nodes = [_text(i, k, rel) for k, rel in enumerate(labels, start=1)]
        gold[str(i)] = labels
        texts.update(zip(nodes, labels))
        values.append(
            {
                "id": i,
                "event_time": datetime.fromisoformat(f"{day}T{i % 24:02d}:{i % 60:02d}:00"),
                "input": f"How long is the refund window for order {i}?",
                "actual_output": None,
                "expected_output": f"Order {i} can be refunded within 30 days.",
                "retrieval_context": json.dumps(nodes),
                "version": segment(i) if segment else None,
            }
        )
    with engine.begin() as conn:
        conn.execute(sa.insert(t), values)
    engine.dispose()
    return Truth(gold, texts)


def _flip(text: str, rate: float, salt: str) -> bool:
    h = int.from_bytes(hashlib.sha256(f"{salt}|{text}".encode()).digest()[:8], "big")
    return h / 2**64 < rate


class KnownErrorJudge(JudgeModel):
    """Gold verdicts, wrong at fixed rates independent of rank (see the module docstring)."""

    def __init__(self, truth: Truth, *, fp: float = 0.0, fn: float = 0.0, name: str = "known-error-judge") -> None:
        self.truth, self.fp, self.fn, self.name = truth, fp, fn, name

    def get_model_name(self) -> str:
        return self.name

    def relevant(self, text: str) -> bool:
        gold = self.truth.relevant_text[text]
        if gold:
            return not _flip(text, self.fn, "fn")
        return _flip(text, self.fp, "fp")

    def generate(self, prompt: str, schema: Any = None) -> str:
        verdicts = [
            {"node": int(k), "relevant": self.relevant(text), "reason": "known"} for k, text in _BLOCK.findall(prompt)
        ]
        return json.dumps({"verdicts": verdicts})

    async def a_generate(self, prompt: str, schema: Any = None) -> str:
        return self.generate(prompt, schema)


def score(url: str, judge: JudgeModel, day: str = DAY, **kw: Any) -> Any:
    return score_partition(PipelineConfig(warehouse=url, judge=judge, **kw), day)


def fill_sheet(sheet: str, out: str, truth: Truth, *, only: set[str] | None = None, labeller: str = "tester") -> None:
    """Fill ``sheet``'s ``relevant`` column from the gold (``only``: these log ids; the other lines
    stay empty)."""
    with open(sheet, newline="", encoding="utf-8") as fh:
        reader = csv.DictReader(fh)
        fields, lines = list(reader.fieldnames or []), list(reader)
    with open(out, "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fields, lineterminator="\n")
        w.writeheader()
        for line in lines:
            if only is None or line["log_id"] in only:
                line["relevant"] = "1" if truth.gold[line["log_id"]][int(line["node"]) - 1] else "0"
                line["labeller"] = labeller
            w.writerow(line)
