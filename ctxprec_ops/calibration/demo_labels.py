"""The demo's labelled sample: node labels over the sample warehouse's topics.

The sample's passages are written per question: a question's support passages answer it, the
other passages (background of the same topic, passages of other topics, help-center noise) do
not. That authored relation is the sample's gold label (``relevant_ids``). ``demo_label_csv``
turns it into node labels (``log_id,node,relevant``) for a spread of well-formed retrievals —
about ``target`` labels, every node of each chosen retrieval — so ``ctxprec calibrate`` can show
how far the lexical judge (word overlap) is from the labels, offline.
"""

from __future__ import annotations

import io
import json

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..warehouse.reflect import reflect_table

__all__ = ["demo_label_csv"]


def demo_label_csv(engine: Engine, *, source_table: str = "retrieval_logs", target: int = 200, stride: int = 7) -> str:
    """CSV text of about ``target`` node labels from the sample warehouse (every ``stride``-th row
    with gold labels and a well-formed context, all nodes of each)."""
    t = reflect_table(engine, source_table)
    stmt = sa.select(t.c.id, t.c.retrieval_context, t.c.retrieved_ids, t.c.relevant_ids).order_by(t.c.id)
    out = io.StringIO()
    out.write("log_id,node,relevant\n")
    n = 0
    with engine.connect() as conn:
        for i, (log_id, context, retrieved, relevant) in enumerate(conn.execute(stmt)):
            if i % stride or retrieved is None or relevant is None:
                continue
            try:
                nodes = json.loads(context)
            except (TypeError, ValueError):
                continue
            ids = json.loads(retrieved)
            if (
                not nodes
                or not isinstance(nodes, list)
                or len(nodes) != len(ids)
                or not all(isinstance(x, str) for x in nodes)
            ):
                continue  # a malformed row of the sample: not a case to label
            gold = set(json.loads(relevant))
            for rank, chunk in enumerate(ids, start=1):
                out.write(f"{log_id},{rank},{int(chunk in gold)}\n")
                n += 1
            if n >= target:
                break
    return out.getvalue()
