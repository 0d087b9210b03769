"""``ctxprec_labels``: node labels people gave, the judge-independent truth about a node.

One row per (``label_set``, ``source_table``, ``log_id``, ``node``): ``relevant`` (bool),
``labeller`` and ``labelled_at`` when the file said (else NULL), ``imported_at``. A label
belongs to a retrieval of an input table, not to a judge: every judge's scores of that row
are corrected with it. ``label_set`` names a set of labels (default ``default``): two teams,
or two definitions of relevance, keep theirs apart.

``import_labels`` validates a file against the scored rows (a node the row does not have is
refused, naming the file's line), then upserts only the labels that are new or changed, so
importing the same file twice changes nothing. A row is *fully labelled* when each of its
nodes 1..n (n = the nodes of its score row's verdicts) has a label; only such rows feed the
corrected estimates (``correction``).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from sqlalchemy import Boolean, Column, DateTime, Integer, MetaData, PrimaryKeyConstraint, String, Table
from sqlalchemy.engine import Connection, Engine

from ..warehouse.ddl import CreatedTables
from ..warehouse.engine import get_engine, read_connection, write_transaction
from ..warehouse.identifiers import validate_identifier
from ..warehouse.reflect import table_names
from ..warehouse.schema import SCORES, existing_output_tables
from ..warehouse.types import KeyText
from ..warehouse.upsert import upsert
from .labels import LabelFileError, LabelSet, labels_digest

__all__ = [
    "LABELS",
    "DEFAULT_LABEL_SET",
    "ImportReport",
    "labels_table",
    "import_labels",
    "read_label_set",
    "node_counts",
    "verdict_count",
]

LABELS = "ctxprec_labels"
DEFAULT_LABEL_SET = "default"
#: the metric whose verdicts give a row's node count (labels are node judgments of a retrieval)
NODE_METRIC = "contextual_precision"
_tables: dict[str | None, Table] = {}
_created = CreatedTables()
_lock = threading.Lock()
_IN = 500  # ids per IN list


def labels_table(schema: str | None = None) -> Table:
    if schema is not None:
        validate_identifier(schema, "output schema name")
    with _lock:
        t = _tables.get(schema)
        if t is None:
            t = _tables[schema] = Table(
                LABELS,
                MetaData(schema=schema),
                Column("label_set", String(64), nullable=False),
                Column("source_table", KeyText(), nullable=False),
                Column("log_id", KeyText(), nullable=False),
                Column("node", Integer, nullable=False),
                Column("relevant", Boolean, nullable=False),
                Column("labeller", String(255)),
                Column("labelled_at", DateTime(timezone=True)),
                Column("imported_at", DateTime(timezone=True), nullable=False),
                PrimaryKeyConstraint("label_set", "source_table", "log_id", "node", name=f"{LABELS}_pk"),
            )
        return t


def _check_name(label_set: str) -> str:
    name = (label_set or "").strip()
    if not name or len(name) > 64:
        raise ValueError(f"a label set name is 1 to 64 characters, got {label_set!r}")
    return name


def verdict_count(verdicts: Any) -> int:
    """The nodes of a score row: the length of its ``verdicts`` (JSON list, or its text)."""
    import json

    if isinstance(verdicts, (str, bytes)):
        try:
            verdicts = json.loads(verdicts)
        except ValueError:
            return 0
    return len(verdicts) if isinstance(verdicts, list) else 0


def node_counts(engine: Engine, source_table: str, log_ids: Iterable[str], schema: str | None = None) -> dict[str, int]:
    """``log_id -> nodes`` of the rows of ``source_table`` scored for ``contextual_precision``
    (by any judge; the most recent score row when there are several)."""
    ids = sorted(set(log_ids))
    if not ids or SCORES not in table_names(engine, schema):
        return {}
    tables = existing_output_tables(engine, schema)
    t = tables.scores
    where = [t.c.metric == NODE_METRIC]
    if tables.source_keyed:
        where.append(t.c.source_table == source_table)
    out: dict[str, tuple[Any, int]] = {}
    with read_connection(engine) as conn:
        for start in range(0, len(ids), _IN):
            q = sa.select(t.c.log_id, t.c.verdicts, t.c.scored_at).where(
                *where, t.c.log_id.in_(ids[start : start + _IN])
            )
            for log_id, verdicts, at in conn.execute(q):
                key, stamp = str(log_id), str(at or "")
                if key not in out or stamp >= str(out[key][0]):
                    out[key] = (stamp, verdict_count(verdicts))
    return {k: n for k, (_, n) in out.items() if n > 0}


def _stored(conn: Connection, table: Table, label_set: str, source_table: str, ids: Sequence[str]) -> dict:
    out: dict[tuple[str, int], tuple[bool, str | None, Any]] = {}
    for start in range(0, len(ids), _IN):
        q = sa.select(table.c.log_id, table.c.node, table.c.relevant, table.c.labeller, table.c.labelled_at).where(
            table.c.label_set == label_set,
            table.c.source_table == source_table,
            table.c.log_id.in_(list(ids[start : start + _IN])),
        )
        for log_id, node, rel, who, at in conn.execute(q):
            out[(str(log_id), int(node))] = (bool(rel), who, at)
    return out


def _same_time(a: Any, b: datetime | None) -> bool:
    if a is None or b is None:
        return a is None and b is None
    if isinstance(a, str):
        a = datetime.fromisoformat(a)
    a = a.replace(tzinfo=UTC) if a.tzinfo is None else a
    return abs((a - b).total_seconds()) < 1e-3


@dataclass
class ImportReport:
    """What ``import_labels`` stored and what the rows still need."""

    label_set: str
    source_table: str
    file: str
    nodes: int  # labels in the file
    new: int = 0
    changed: int = 0
    unchanged: int = 0
    blank: int = 0  # nodes listed with an empty ``relevant`` (not labelled yet)
    rows: int = 0  # log ids in the file
    fully_labelled: int = 0  # of those rows, every node labelled (stored and new labels together)
    #: log_id -> the nodes still unlabelled, for the rows not fully labelled
    partial: dict[str, list[int]] = field(default_factory=dict)
    #: log ids with no contextual_precision score row in ``source_table`` (their labels are stored;
    #: they correct nothing until the row is scored)
    unscored: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "label_set": self.label_set,
            "source_table": self.source_table,
            "file": self.file,
            "nodes": self.nodes,
            "new": self.new,
            "changed": self.changed,
            "unchanged": self.unchanged,
            "blank": self.blank,
            "rows": self.rows,
            "fully_labelled": self.fully_labelled,
            "not_fully_labelled": {k: v for k, v in self.partial.items()},
            "unscored": list(self.unscored),
        }

    def lines(self) -> list[str]:
        out = [
            f"{self.nodes} node labels of {self.rows} rows from {self.file} into label set {self.label_set!r} "
            f"({self.source_table}): {self.new} new, {self.changed} changed, {self.unchanged} unchanged"
            + (f"; {self.blank} nodes not labelled yet (empty relevant)" if self.blank else "")
        ]
        out.append(
            f"{self.fully_labelled} of {self.rows} rows fully labelled (every node): only those correct the scores"
        )
        if self.partial:
            shown = list(self.partial.items())[:5]
            more = f" and {len(self.partial) - 5} more" if len(self.partial) > 5 else ""
            out.append(
                f"{len(self.partial)} rows not fully labelled: "
                + "; ".join(
                    f"{k} (node{'s' if len(v) > 1 else ''} {', '.join(map(str, v))} unlabelled)" for k, v in shown
                )
                + more
            )
        if self.unscored:
            more = f" and {len(self.unscored) - 5} more" if len(self.unscored) > 5 else ""
            out.append(
                f"{len(self.unscored)} log ids have no score row in {self.source_table} yet (stored; they correct "
                f"nothing until scored): {', '.join(self.unscored[:5])}{more}"
            )
        return out


def import_labels(
    warehouse: str | Engine,
    labels: LabelSet,
    *,
    label_set: str = DEFAULT_LABEL_SET,
    source_table: str = "retrieval_logs",
    schema: str | None = None,
) -> ImportReport:
    """Store ``labels`` (``read_labels(path, allow_empty=True)``) in ``ctxprec_labels``.

    Refused (``LabelFileError`` naming the file and line, nothing stored): a label of a node the
    scored row does not have. Labels already stored with the same answer, labeller and time are
    left as they are; a different answer replaces the stored one (a correction)."""
    name = _check_name(label_set)
    engine = get_engine(warehouse)
    ids = sorted(labels.labels)
    counts = node_counts(engine, source_table, ids, schema)
    for log_id in ids:
        n = counts.get(log_id)
        if n is None:
            continue
        for node in sorted(labels.labels[log_id]):
            if node > n:
                meta = labels.meta.get((log_id, node))
                where = f"{labels.name} line {meta.line}" if meta else labels.name
                raise LabelFileError(
                    f"{where}: log_id {log_id!r} has {n} nodes (as scored); node {node} does not exist"
                )
    report = ImportReport(name, source_table, labels.name, labels.nodes, blank=labels.blank, rows=len(ids))
    table = labels_table(schema)
    now = datetime.now(UTC)
    with write_transaction(engine) as conn:
        _created.ensure(conn, table)
        stored = _stored(conn, table, name, source_table, ids)
        rows = []
        for log_id in ids:
            for node, relevant in sorted(labels.labels[log_id].items()):
                meta = labels.meta.get((log_id, node))
                who, at = (meta.labeller, meta.labelled_at) if meta else (None, None)
                old = stored.get((log_id, node))
                if old is not None and old[0] == relevant and old[1] == who and _same_time(old[2], at):
                    report.unchanged += 1
                    continue
                if old is None:
                    report.new += 1
                else:
                    report.changed += 1
                stored[(log_id, node)] = (relevant, who, at)
                rows.append(
                    {
                        "label_set": name,
                        "source_table": source_table,
                        "log_id": log_id,
                        "node": node,
                        "relevant": relevant,
                        "labeller": who,
                        "labelled_at": at,
                        "imported_at": now,
                    }
                )
        if rows:
            upsert(conn, table, rows)
    for log_id in ids:
        n = counts.get(log_id)
        if n is None:
            report.unscored.append(log_id)
            continue
        missing = [k for k in range(1, n + 1) if (log_id, k) not in stored]
        if missing:
            report.partial[log_id] = missing
        else:
            report.fully_labelled += 1
    return report


def read_label_set(
    warehouse: str | Engine,
    label_set: str = DEFAULT_LABEL_SET,
    *,
    source_table: str = "retrieval_logs",
    schema: str | None = None,
) -> LabelSet:
    """The stored labels of ``label_set`` for ``source_table`` as a ``LabelSet`` (named
    ``ctxprec_labels:<label set>``), e.g. for ``calibrate``. ``LabelFileError`` when there are none."""
    name = _check_name(label_set)
    engine = get_engine(warehouse)
    labels: dict[str, dict[int, bool]] = {}
    if LABELS in table_names(engine, schema):
        t = labels_table(schema)
        with read_connection(engine) as conn:
            q = sa.select(t.c.log_id, t.c.node, t.c.relevant).where(
                t.c.label_set == name, t.c.source_table == source_table
            )
            for log_id, node, rel in conn.execute(q):
                labels.setdefault(str(log_id), {})[int(node)] = bool(rel)
    if not labels:
        raise LabelFileError(
            f"no labels in label set {name!r} for {source_table} (ctxprec labels import --label-set {name} ...)"
        )
    return LabelSet(f"{LABELS}:{name}", labels, labels_digest(labels))
