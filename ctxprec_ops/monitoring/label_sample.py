"""``sample_labels``: draw scored rows of a partition at random and write a labelling sheet.

The rows are drawn by ``draw.draw_scored_rows`` (seeded, uniform: see there); each drawn row's
question, expected output and nodes are read from its input table through the column mapping,
as the judge saw them, and written by ``calibration.label_sheet`` as a CSV file or an HTML page.
A row whose input no longer has as many nodes as its score row was judged on (the row changed
since it was scored) is left out and reported. Read-only on the warehouse.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from sqlalchemy.engine import Engine

from ..calibration.label_sheet import SheetRow, sheet_id, write_sheet
from ..calibration.label_table import verdict_count
from ..calibration.run import read_cases
from ..metrics.contextual_precision import ContextualPrecisionMetric
from ..pipeline.columns import SourceColumns
from .draw import draw_scored_rows
from .population import Population, engine_scope

__all__ = ["LabelSample", "sample_labels"]


@dataclass
class LabelSample:
    path: Path
    partition_key: str
    population: Population
    seed: int
    frame: int  # scored rows of the partition the draw was made from
    rows: int  # rows on the sheet
    nodes: int
    skipped: dict[str, str] = field(default_factory=dict)  # log_id -> why it is not on the sheet
    sheet: str = ""  # the sheet's id: an HTML sheet exports labels-<partition>-<sheet>.csv

    @property
    def export_name(self) -> str:
        """The file the CSV sheet is, or the HTML sheet's export is saved as."""
        if self.path.suffix.lower() == ".csv":
            return str(self.path)
        return f"labels-{self.partition_key}-{self.sheet}.csv"

    def to_dict(self) -> dict[str, object]:
        return {
            "path": str(self.path),
            "partition_key": self.partition_key,
            "judge_model": self.population.judge_model,
            "prompt_version": self.population.prompt_version,
            "source_table": self.population.source_table,
            "seed": self.seed,
            "frame": self.frame,
            "rows": self.rows,
            "nodes": self.nodes,
            "skipped": dict(self.skipped),
            "sheet": self.sheet,
        }


def sample_labels(
    warehouse: str | Engine,
    partition_key: str,
    n: int,
    out: str | os.PathLike[str],
    *,
    seed: int = 0,
    judge_model: str | None = None,
    prompt_version: str | None = None,
    source_table: str | None = None,
    mapping: str | None = None,
    columns: SourceColumns | dict[str, str] | None = None,
) -> LabelSample:
    """Draw ``n`` scored ``contextual_precision`` rows of ``partition_key`` (seeded) and write the
    sheet ``out`` (``.csv``: one line per node; ``.html``: the labelling page)."""
    suffix = Path(out).suffix.lower()
    if suffix not in (".csv", ".html", ".htm"):
        raise ValueError(f"--out must end in .csv or .html, got {Path(out).name!r}")
    with engine_scope(warehouse) as engine:
        draw = draw_scored_rows(
            engine, partition_key, n, seed=seed, judge_model=judge_model, prompt_version=prompt_version,
            source_table=source_table, mapping=mapping,
        )  # fmt: skip
        table = draw.population.source_table or source_table or "retrieval_logs"
        cases = read_cases(engine, [r.log_id for r in draw.rows], source_table=table, columns=columns)
    rows: list[SheetRow] = []
    skipped: dict[str, str] = {}
    for r in draw.rows:
        case = cases[r.log_id]
        if isinstance(case, str):
            skipped[r.log_id] = case
            continue
        question, expected, nodes = ContextualPrecisionMetric.judged(case)
        if len(nodes) != verdict_count(r.verdicts):
            scored = verdict_count(r.verdicts)
            skipped[r.log_id] = f"the row has {len(nodes)} nodes now, its score {scored}: changed since it was scored"
            continue
        rows.append(SheetRow(r.log_id, question, expected, tuple(nodes)))
    pop = draw.population
    about = f"judge {pop.judge_model} · {table} · seed {seed}"
    path = write_sheet(rows, out, partition_key=partition_key, about=about)
    total = sum(len(r.nodes) for r in rows)
    return LabelSample(
        path, partition_key, pop, seed, draw.frame, len(rows), total, skipped, sheet_id(rows, partition_key)
    )
