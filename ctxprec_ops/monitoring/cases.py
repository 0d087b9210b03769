"""The report's case-level reads: the worst-scored cases of a partition with their node verdicts
(and, from the source table, the texts the judge saw) and the per-case threshold used."""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..cases.contexts import display_nodes
from ..warehouse.identifiers import split_table_name
from ..warehouse.reflect import reflect_table, table_names
from ..warehouse.schema import existing_output_tables
from .population import Population

__all__ = ["load_worst_cases", "case_threshold", "json_list"]

log = logging.getLogger("ctxprec_ops.monitoring.history")


def json_list(value: Any) -> list[Any]:
    """A JSON array column's value as a list, whether the driver gave it parsed, as text or as
    bytes (anything else, or bad JSON: empty)."""
    if value is None:
        return []
    if isinstance(value, (bytes, bytearray)):
        value = value.decode("utf-8", "replace")
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except ValueError:
            return []
    return list(value) if isinstance(value, (list, tuple)) else []


def load_worst_cases(
    engine: Engine,
    metric: str,
    population: Population | None,
    partition_key: str,
    *,
    limit: int = 10,
    source_table: str | None = None,
    columns: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """The lowest-scoring cases of a partition with their node verdicts (best rank first).

    When the metric's source table exists (default: the metric kind's table, may be
    ``schema.table``; ``columns`` maps logical column names as for scoring) the query, the
    expected output and the node texts are attached; otherwise only the verdicts. A source table
    name that is not an identifier raises ``IdentifierError``.
    """
    from ..pipeline.kinds import metric_kind

    kind = metric_kind(metric)
    mapped = kind.columns.from_mapping(columns).as_dict()
    tables = existing_output_tables(engine)
    t = tables.scores
    where = [t.c.metric == metric, t.c.partition_key == partition_key, t.c.score.is_not(None)]
    if population is not None:
        where.append(population.where(t))
    q = sa.select(t.c.log_id, t.c.score, t.c.success, t.c.reason, t.c.verdicts).where(*where)
    q = q.order_by(t.c.score.asc(), t.c.log_id.asc()).limit(limit)
    with engine.connect() as conn:
        cases = []
        for log_id, score, success, reason, verdicts in conn.execute(q):
            nodes = []
            for i, v in enumerate(json_list(verdicts)):
                if isinstance(v, dict):
                    node = {
                        "node": int(v.get("node") or i + 1),
                        "relevant": bool(v.get("relevant")),
                        "reason": v.get("reason"),
                    }
                    if v.get("agreement") is not None:  # a majority of sampled answers
                        node["agreement"] = v["agreement"]
                    if v.get("decided_by") is not None:  # a cascade: which judge's verdict it is
                        node["decided_by"] = v["decided_by"]
                    nodes.append(node)
            groups = _split_windows(nodes)
            cases.append(
                {
                    "log_id": log_id,
                    "score": float(score),
                    "success": bool(success),
                    "reason": reason,
                    "verdicts": [n for g in groups for n in g],
                    "groups": groups,
                }
            )
        table = source_table or (population.source_table if population is not None else None)
        _attach_source(
            conn,
            table or kind.default_table,
            cases,
            {
                "id": mapped["id"],
                "query": mapped[kind.query_column],
                "expected": mapped[kind.expected_column],
                "nodes": mapped[kind.nodes_column],
            },
        )
    return cases


def _split_windows(nodes: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """Turn-metric verdicts are the windows' lists one after the other (ids restart at 1):
    split where an id repeats, and order each window by rank."""
    groups: list[list[dict[str, Any]]] = []
    seen: set[int] = set()
    for n in nodes:
        if not groups or n["node"] in seen:
            groups.append([])
            seen = set()
        groups[-1].append(n)
        seen.add(n["node"])
    return [sorted(g, key=lambda n: n["node"]) for g in groups]


def _attach_source(
    conn: sa.Connection, source_table: str, cases: list[dict[str, Any]], columns: Mapping[str, str]
) -> None:
    """Best effort: add ``input``, ``expected`` and node texts from the source table (never fails
    the caller). ``columns`` maps ``id``/``query``/``expected``/``nodes`` to the table's columns."""
    if not cases:
        return
    schema, name = split_table_name(source_table, None, "source table name")
    try:
        if name not in table_names(conn, schema):
            log.warning("report: source table %s not found: cases are shown without their texts", source_table)
            return
        src = reflect_table(conn, name, schema)
        have = {logical: src.c[col] for logical, col in columns.items() if col in src.c}
        if "id" not in have:
            log.warning("report: %s has no column %r: cases are shown without their texts", source_table, columns["id"])
            return
        ids: list[Any] = [c["log_id"] for c in cases]
        if isinstance(have["id"].type, sa.Integer):
            ids = [int(i) for i in ids if str(i).lstrip("-").isdigit()]
        else:
            ids = [str(i) for i in ids]
        wanted = [k for k in ("query", "expected", "nodes") if k in have]
        stmt = sa.select(have["id"], *(have[k] for k in wanted)).where(have["id"].in_(ids))
        found = {str(r[0]): dict(zip(wanted, r[1:])) for r in conn.execute(stmt)}
    except Exception as exc:  # the report still renders without texts
        log.warning("could not read %s for the report: %s", source_table, type(exc).__name__)
        return
    single_turn = columns.get("query") != columns.get("nodes")
    for case in cases:
        row = found.get(str(case["log_id"]))
        if row is None:
            continue
        if single_turn and row.get("query") is not None:
            case["input"] = row["query"]
        if row.get("expected") is not None:
            case["expected"] = row["expected"]
        # the judged nodes (items sharing a source are one node; images by name)
        texts = display_nodes(json_list(row.get("nodes"))) if single_turn and len(case["groups"]) == 1 else []
        for node in case["verdicts"]:
            k = node["node"] - 1
            if 0 <= k < len(texts):
                node["text"] = str(texts[k])


def case_threshold(engine: Engine, metric: str, population: Population | None, partition_key: str) -> float | None:
    """The per-case pass threshold the partition was scored with (the most common one)."""
    t = existing_output_tables(engine).scores
    where = [t.c.metric == metric, t.c.partition_key == partition_key]
    if population is not None:
        where.append(population.where(t))
    q = (
        sa.select(t.c.threshold, sa.func.count())
        .where(*where)
        .group_by(t.c.threshold)
        .order_by(sa.func.count().desc())
        .limit(1)
    )
    with engine.connect() as conn:
        row = conn.execute(q).first()
    return float(row[0]) if row is not None and row[0] is not None else None
