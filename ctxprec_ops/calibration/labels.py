"""Node labels for calibration: a CSV file with the columns ``log_id,node,relevant``.

``node`` is the 1-based rank of the node in the row's ``retrieval_context``; ``relevant`` is
1/0, true/false or yes/no (any case). Extra columns (a note, who labelled it) are ignored. A bad
line is a clear one-line error naming the file and line; a (log_id, node) labelled twice with
different answers is refused (twice the same answer is fine).
"""

from __future__ import annotations

import csv
import hashlib
from dataclasses import dataclass
from pathlib import Path

from ..errors import CtxPrecError

__all__ = ["LabelSet", "LabelFileError", "read_labels", "parse_labels"]

_TRUE = {"1", "true", "yes", "y", "t"}
_FALSE = {"0", "false", "no", "n", "f"}
REQUIRED = ("log_id", "node", "relevant")


class LabelFileError(CtxPrecError, ValueError):
    """The labels file cannot be read as ``log_id,node,relevant``."""

    error_type = "invalid_labels"
    retryable = False


@dataclass(frozen=True)
class LabelSet:
    """``labels[log_id][node] = relevant``; ``digest`` identifies the set (order-independent)."""

    name: str
    labels: dict[str, dict[int, bool]]
    digest: str

    @property
    def nodes(self) -> int:
        return sum(len(v) for v in self.labels.values())


def parse_labels(lines: list[str] | str, name: str = "labels") -> LabelSet:
    """Labels from CSV text (or lines) with a header row."""
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
    if not labels:
        raise LabelFileError(f"{name}: no labels (expected rows of log_id,node,relevant after the header)")
    canon = "\n".join(f"{k}\t{n}\t{int(v)}" for k in sorted(labels) for n, v in sorted(labels[k].items()))
    digest = hashlib.sha256(canon.encode()).hexdigest()[:16]
    return LabelSet(name, labels, digest)


def read_labels(path: str | Path) -> LabelSet:
    """Labels from the CSV file at ``path``."""
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8-sig")
    except FileNotFoundError:
        raise LabelFileError(f"labels file {str(p)!r} does not exist") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise LabelFileError(f"labels file {str(p)!r} cannot be read: {exc}") from None
    return parse_labels(text, p.name)
