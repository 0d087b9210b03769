"""``ctxprec_label_figures``: the per-case ranking figures of the label metric besides its score.

One row per ``ctxprec_scores`` row of ``label_contextual_precision``, with the same key
(``log_id``, ``metric``, ``judge_model``, ``prompt_version``), written in the same transaction:
``k`` (retrieved ids), ``relevant_retrieved``, ``relevant_total``, ``recall``,
``reciprocal_rank`` (MRR is its mean) and ``ndcg`` (NDCG@k); ``recall``/``ndcg`` are NULL when
no chunk is labelled relevant. Created when first written.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from typing import Any

from sqlalchemy import Column, Integer, MetaData, PrimaryKeyConstraint, Table, func, select
from sqlalchemy.engine import Connection

from .ddl import CreatedTables
from .identifiers import validate_identifier
from .migrate import migrate_table
from .scoring_key import ScoringKey
from .types import Double, KeyCode, KeyText, ModelName
from .upsert import upsert

__all__ = ["LABEL_FIGURES", "label_figures_table", "figure_row", "write_figures", "partition_figures"]

LABEL_FIGURES = "ctxprec_label_figures"
_DOUBLE = Double()
_tables: dict[str | None, Table] = {}
_created = CreatedTables(migrate=migrate_table)
_lock = threading.Lock()


def label_figures_table(schema: str | None = None) -> Table:
    if schema is not None:
        validate_identifier(schema, "output schema name")
    with _lock:
        t = _tables.get(schema)
        if t is None:
            t = _tables[schema] = Table(
                LABEL_FIGURES,
                MetaData(schema=schema),
                Column("log_id", KeyText(), nullable=False),
                Column("metric", KeyText(64), nullable=False),
                Column("judge_model", ModelName(), nullable=False),
                Column("prompt_version", KeyText(64), nullable=False),
                Column("partition_key", KeyCode(10), nullable=False),
                Column("k", Integer, nullable=False),
                Column("relevant_retrieved", Integer, nullable=False),
                Column("relevant_total", Integer),
                Column("recall", _DOUBLE),
                Column("reciprocal_rank", _DOUBLE, nullable=False),
                Column("ndcg", _DOUBLE),
                Column("run_id", KeyText(), nullable=False),
                PrimaryKeyConstraint("log_id", "metric", "judge_model", "prompt_version", name=f"{LABEL_FIGURES}_pk"),
            )
        return t


def figure_row(
    figures: dict[str, Any], log_id: str, partition_key: str, key: ScoringKey, run_id: str
) -> dict[str, Any]:
    return {
        "log_id": log_id,
        "metric": key.metric,
        "judge_model": key.judge_model,
        "prompt_version": key.prompt_version,
        "partition_key": partition_key,
        "k": figures["k"],
        "relevant_retrieved": figures["relevant_retrieved"],
        "relevant_total": figures["relevant_total"],
        "recall": figures["recall"],
        "reciprocal_rank": figures["reciprocal_rank"],
        "ndcg": figures["ndcg"],
        "run_id": run_id,
    }


def write_figures(conn: Connection, schema: str | None, rows: Sequence[dict[str, Any]]) -> None:
    """Upsert ``rows`` (from ``figure_row``) inside the caller's transaction; creates the table once."""
    table = label_figures_table(schema)
    _created.ensure(conn, table)
    upsert(conn, table, rows)


def partition_figures(
    conn: Connection, key: ScoringKey, partition_key: str, schema: str | None = None
) -> dict[str, Any]:
    """Means over a partition: ``{"rows", "recall", "mrr", "ndcg"}`` (None when there are none)."""
    t = label_figures_table(schema)
    c = t.c
    stmt = select(func.count(), func.avg(c.recall), func.avg(c.reciprocal_rank), func.avg(c.ndcg)).where(
        key.where(t), c.partition_key == partition_key
    )
    n, recall, mrr, ndcg = conn.execute(stmt).one()
    return {
        "rows": int(n or 0),
        "recall": None if recall is None else float(recall),
        "mrr": None if mrr is None else float(mrr),
        "ndcg": None if ndcg is None else float(ndcg),
    }
