"""Retrieval logs whose correct scores are known: a node is relevant iff its text holds the word
RELEVANT (what the local judge server's default oracle decides)."""

from __future__ import annotations

import json
import random
from datetime import datetime, timedelta
from typing import Any

from tests.fixtures.warehouse_data import log_row

DAY = "2026-11-28"


def expected_score(relevance: list[bool]) -> float:
    """Contextual precision, written out independently of ``ctxprec_ops.scoring.formula``."""
    hits, total = 0, 0.0
    for k, rel in enumerate(relevance, start=1):
        if rel:
            hits += 1
            total += hits / k
    return total / hits if hits else 0.0


def planted_rows(
    n: int, seed: int = 42, *, day: str = DAY, start_id: int = 1, as_text: bool = False
) -> tuple[list[dict[str, Any]], dict[str, list[bool]]]:
    """``n`` rows of 3-6 nodes each (unique texts) and ``{log_id: relevance}``."""
    rng = random.Random(seed)
    rows, truth = [], {}
    start = datetime.fromisoformat(day)
    for i in range(start_id, start_id + n):
        rel = [rng.random() < 0.45 for _ in range(rng.randint(3, 6))]
        nodes = [
            f"row {i} passage {k}: " + ("a RELEVANT fact about the answer" if r else "IRRELEVANT filler text")
            for k, r in enumerate(rel, start=1)
        ]
        rows.append(
            log_row(
                i,
                start + timedelta(seconds=i * 157 % 86_400),
                input=f"question {i}?",
                expected=f"answer {i}",
                context=nodes,
                as_text=as_text,
            )
        )
        truth[str(i)] = rel
    return rows, truth


def verdict_list(value: Any) -> list[dict[str, Any]]:
    """A ``verdicts`` cell as a list (JSON type on PostgreSQL, JSON text on SQLite)."""
    return value if isinstance(value, list) else json.loads(value)
