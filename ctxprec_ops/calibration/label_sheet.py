"""The labelling sheet of ``ctxprec labels sample``: a CSV file or a self-contained HTML page.

CSV: one line per node of each drawn row, ``CSV_COLUMNS``: ``log_id``, ``node`` (1-based rank),
``relevant`` (empty: for the person labelling), ``input``, ``expected_output``, ``node_text``,
``labeller``, ``labelled_at``. A context cell that a spreadsheet would run as a formula (starting
with ``=``, ``+``, ``-`` or ``@``) is written with a leading ``'``; ``labels import`` ignores the
context columns.

HTML: one file, no network (inline CSS and script, the rows as JSON in the page): each row's
question, expected answer and ranked nodes, a relevant / not relevant choice per node, progress
kept in the browser's ``localStorage`` (per sheet: reloading the file resumes it), and an export
of the same CSV (a download, and the text to copy where downloads are awkward, e.g. on a phone).
Node texts are untrusted: the page writes them with ``textContent`` only, and the JSON is
escaped so no text can close its ``<script>`` element.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

__all__ = ["SheetRow", "CSV_COLUMNS", "RELEVANCE", "sheet_csv", "sheet_html", "write_sheet", "sheet_id"]

CSV_COLUMNS = ("log_id", "node", "relevant", "input", "expected_output", "node_text", "labeller", "labelled_at")
#: what "relevant" means: the default judge prompt's own definition (a test keeps them equal)
RELEVANCE = (
    "A node is useful (relevant: true) when it states facts that the expected answer relies on or "
    "that directly support it. It is not useful (relevant: false) when it is off-topic, only "
    "loosely related, or would not help anyone write the expected answer."
)
_FORMULA = ("=", "+", "-", "@")


@dataclass(frozen=True)
class SheetRow:
    """One drawn row: its id, question, expected answer and nodes (best-ranked first)."""

    log_id: str
    input: str
    expected_output: str
    nodes: tuple[str, ...]


def _cell(text: str) -> str:
    return "'" + text if text.startswith(_FORMULA) else text


def sheet_id(rows: Sequence[SheetRow], partition_key: str) -> str:
    """12 hex digits naming the sheet (its rows and texts): the page's progress is kept under it."""
    h = hashlib.sha256(partition_key.encode())
    for r in rows:
        h.update(json.dumps([r.log_id, r.input, r.expected_output, list(r.nodes)]).encode())
    return h.hexdigest()[:12]


def sheet_csv(rows: Sequence[SheetRow]) -> str:
    out = io.StringIO()
    w = csv.writer(out, lineterminator="\n")
    w.writerow(CSV_COLUMNS)
    for r in rows:
        for k, text in enumerate(r.nodes, start=1):
            w.writerow([r.log_id, k, "", _cell(r.input), _cell(r.expected_output), _cell(text), "", ""])
    return out.getvalue()


def _json_for_script(value: Any) -> str:
    """JSON safe inside ``<script type="application/json">``: no ``<``, ``>``, ``&`` as such."""
    text = json.dumps(value, ensure_ascii=False)
    return text.replace("&", "\\u0026").replace("<", "\\u003c").replace(">", "\\u003e")


def sheet_html(rows: Sequence[SheetRow], *, partition_key: str, about: str = "") -> str:
    from jinja2 import Environment, PackageLoader, StrictUndefined

    env = Environment(
        loader=PackageLoader("ctxprec_ops.calibration", "templates"), autoescape=True, undefined=StrictUndefined
    )
    sid = sheet_id(rows, partition_key)
    data = {
        "sheet": sid,
        "partition": partition_key,
        "columns": list(CSV_COLUMNS),
        "rows": [
            {"log_id": r.log_id, "input": r.input, "expected": r.expected_output, "nodes": list(r.nodes)} for r in rows
        ],
    }
    from markupsafe import Markup

    return env.get_template("label_sheet.html.j2").render(
        sheet=sid,
        partition=partition_key,
        about=about,
        rows=len(rows),
        nodes=sum(len(r.nodes) for r in rows),
        relevance=RELEVANCE,
        created=datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        data=Markup(_json_for_script(data)),
    )


def write_sheet(rows: Sequence[SheetRow], out: str | os.PathLike[str], *, partition_key: str, about: str = "") -> Path:
    """Write the sheet to ``out`` (``.csv`` or ``.html``), atomically; return its path."""
    path = Path(out)
    suffix = path.suffix.lower()
    if suffix not in (".csv", ".html", ".htm"):
        raise ValueError(f"--out must end in .csv or .html, got {path.name!r}")
    if not path.parent.exists():
        raise ValueError(f"the directory of {str(path)!r} does not exist")
    text = sheet_csv(rows) if suffix == ".csv" else sheet_html(rows, partition_key=partition_key, about=about)
    fd, tmp = tempfile.mkstemp(prefix=".sheet-", suffix=suffix, dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as fh:
            fh.write(text)
        os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
