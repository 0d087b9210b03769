"""Node labels for calibration: a CSV file with the columns ``log_id,node,relevant``.

``node`` is the 1-based rank of the node in the row's ``retrieval_context``; ``relevant`` is
1/0, true/false or yes/no (any case). Optional columns ``labeller`` (who) and ``labelled_at``
(when: an ISO 8601 timestamp, UTC when it names no zone) are kept for ``ctxprec labels
import``; other columns (a note, the context columns of a sampled sheet) are ignored. A bad line
is a clear one-line error naming the file and line; a (log_id, node) labelled twice with
different answers is refused (twice the same answer is fine). With ``allow_empty`` (an exported
sheet not finished yet) an empty ``relevant`` cell is a node not labelled yet, skipped.
"""

from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from ..errors import CtxPrecError

__all__ = ["LabelSet", "LabelFileError", "LabelMeta", "read_labels", "parse_labels", "labels_digest"]

_TRUE = {"1", "true", "yes", "y", "t"}
_FALSE = {"0", "false", "no", "n", "f"}
REQUIRED = ("log_id", "node", "relevant")


class LabelFileError(CtxPrecError, ValueError):
    """The labels file cannot be read as ``log_id,node,relevant``."""

    error_type = "invalid_labels"
    retryable = False


@dataclass(frozen=True)
class LabelMeta:
    """Where a label came from: its line in the file, who gave it and when (None: not said)."""

    line: int
    labeller: str | None = None
    labelled_at: datetime | None = None


@dataclass(frozen=True)
class LabelSet:
    """``labels[log_id][node] = relevant``; ``digest`` identifies the set (order-independent).
    ``meta[(log_id, node)]``: the label's line, labeller and time (files only); ``blank``: the
    nodes listed with an empty ``relevant`` (``allow_empty``)."""

    name: str
    labels: dict[str, dict[int, bool]]
    digest: str
    meta: dict[tuple[str, int], LabelMeta] = field(default_factory=dict, compare=False, repr=False)
    blank: int = 0

    @property
    def nodes(self) -> int:
        return sum(len(v) for v in self.labels.values())


def labels_digest(labels: dict[str, dict[int, bool]]) -> str:
    """16 hex digits identifying a set of labels, whatever their order."""
    canon = "\n".join(f"{k}\t{n}\t{int(v)}" for k in sorted(labels) for n, v in sorted(labels[k].items()))
    return hashlib.sha256(canon.encode()).hexdigest()[:16]


def _timestamp(raw: str, where: str) -> datetime | None:
    if not raw:
        return None
    try:
        at = datetime.fromisoformat(raw.replace("Z", "+00:00") if raw.endswith("Z") else raw)
    except ValueError:
        raise LabelFileError(
            f"{where}: labelled_at must be an ISO 8601 timestamp (2026-11-28T10:00:00Z), got {raw!r}"
        ) from None
    return at.replace(tzinfo=UTC) if at.tzinfo is None else at.astimezone(UTC)


def parse_labels(lines: list[str] | str, name: str = "labels", *, allow_empty: bool = False) -> LabelSet:
    """Labels from CSV text (or lines) with a header row (``allow_empty``: an empty ``relevant``
    cell is a node not labelled yet, counted in ``blank``)."""
    text_lines = lines.splitlines() if isinstance(lines, str) else lines
    reader = csv.DictReader(text_lines)
    header = [h.strip() for h in (reader.fieldnames or [])]
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise LabelFileError(
            f"{name}: the header must have the columns log_id,node,relevant (missing: "
            f"{', '.join(missing)}; found: {', '.join(header) or 'nothing'})"
        )
    reader.fieldnames = header
    labels: dict[str, dict[int, bool]] = {}
    meta: dict[tuple[str, int], LabelMeta] = {}
    blank = 0
    for row in reader:
        line = reader.line_num
        log_id = (row.get("log_id") or "").strip()
        node_raw = (row.get("node") or "").strip()
        rel_raw = (row.get("relevant") or "").strip().lower()
        if not log_id and not node_raw and not rel_raw:
            continue  # a blank line
        if not log_id:
            raise LabelFileError(f"{name} line {line}: log_id is empty")
        try:
            node = int(node_raw)
        except ValueError:
            raise LabelFileError(
                f"{name} line {line}: node must be a 1-based rank (an integer), got {node_raw!r}"
            ) from None
        if node < 1:
            raise LabelFileError(f"{name} line {line}: node must be >= 1 (1 = the best-ranked node), got {node}")
        if not rel_raw and allow_empty:
            blank += 1
            continue
        if rel_raw in _TRUE:
            relevant = True
        elif rel_raw in _FALSE:
            relevant = False
        else:
            raise LabelFileError(f"{name} line {line}: relevant must be 1/0, true/false or yes/no, got {rel_raw!r}")
        seen = labels.setdefault(log_id, {})
        if node in seen and seen[node] != relevant:
            raise LabelFileError(
                f"{name} line {line}: log_id {log_id!r} node {node} is labelled both relevant and not relevant"
            )
        seen[node] = relevant
        who = (row.get("labeller") or "").strip() or None
        meta[(log_id, node)] = LabelMeta(
            line, who[:255] if who else None, _timestamp((row.get("labelled_at") or "").strip(), f"{name} line {line}")
        )
    if not labels:
        if blank:
            raise LabelFileError(f"{name}: no node is labelled yet ({blank} rows with an empty relevant cell)")
        raise LabelFileError(f"{name}: no labels (expected rows of log_id,node,relevant after the header)")
    return LabelSet(name, labels, labels_digest(labels), meta, blank)


def read_labels(path: str | Path, *, allow_empty: bool = False) -> LabelSet:
    """Labels from the CSV file at ``path`` (``allow_empty``: as ``parse_labels``)."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise LabelFileError(f"labels file {str(p)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LabelFileError(f"labels file {str(p)!r} cannot be read: {exc}") from None
    return parse_labels(text, p.name, allow_empty=allow_empty)
