"""``ctxprec labels sample`` and ``ctxprec labels import``: the labelling loop behind the
label-corrected figures."""

from __future__ import annotations

import argparse
import json

from ..pipeline.columns import SourceColumns, merge_columns
from ._args import RAW, UsageError, add_columns, add_warehouse, check_warehouse, columns_of, guarded, settings
from ._args import check_partition as check_partition_key
from ._args import mapping_of_args as _mapping
from ._common import EXIT_OK
from ._render import stdout_console
from .commands import COMMANDS

SAMPLE_EPILOG = """\
examples:
  ctxprec labels sample --warehouse sqlite:///ctxprec.db --partition 2026-11-28 --n 40 --out labels.html
  ctxprec labels sample --partition 2026-11-28 --n 40 --seed 7 --out labels.csv

The rows are drawn uniformly at random from the partition's scored rows (the most recent judge's,
or --judge-model / --prompt-version): that is what lets the labels correct the partition's mean
without bias. The same --seed draws the same rows; a larger --n with the same seed keeps the rows
a smaller one drew. .csv: one line per node (log_id, node = 1-based rank, relevant to fill in with
1/0, plus the question, expected output and node text); .html: a labelling page that works
offline on a phone or a desktop, keeps its progress in the browser and exports the same CSV.
Then: ctxprec labels import --labels FILE.csv. Read-only on the warehouse.
"""

IMPORT_EPILOG = """\
examples:
  ctxprec labels import --warehouse sqlite:///ctxprec.db --labels labels.csv
  ctxprec labels import --labels labels-2026-11-28-3f2a9c01b7de.csv --label-set support-team

The file is CSV with a header and at least log_id,node,relevant (relevant = 1/0, true/false or
yes/no; an empty cell is a node not labelled yet; optional labeller and labelled_at columns are
kept). A bad line names the file and line; a node labelled both ways, or a node the scored row
does not have, refuses the whole file. Importing the same labels again changes nothing; a
different answer for a stored node replaces it. A row is used for the corrected figures only
when every one of its nodes is labelled: the rows that are not are listed.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "labels",
        help=COMMANDS["labels"].help,
        description="Draw rows to label (sample) and store the labels (import); the labels correct the judge's "
        "figures in check, trend, report and compare.",
        formatter_class=RAW,
    )
    sub = p.add_subparsers(dest="labels_command", metavar="ACTION", required=True)

    s = sub.add_parser(
        "sample",
        help="draw scored rows of a partition at random and write a labelling sheet (.csv or .html)",
        description="Draw N scored rows of a partition uniformly at random and write a labelling sheet.",
        epilog=SAMPLE_EPILOG,
        formatter_class=RAW,
    )
    add_warehouse(s)
    s.add_argument("--partition", required=True, metavar="YYYY-MM-DD", help="the partition (UTC day) to draw from")
    s.add_argument("--n", required=True, type=int, metavar="N", help="rows to draw (all of them when fewer)")
    s.add_argument("--seed", type=int, default=0, metavar="S", help="random seed of the draw (default: %(default)s)")
    s.add_argument("--out", required=True, metavar="FILE", help="the sheet: FILE.csv or FILE.html")
    add_draw_flags(s)
    s.set_defaults(func=guarded("labels sample", run_sample))

    i = sub.add_parser(
        "import",
        help="store node labels (log_id,node,relevant) in ctxprec_labels",
        description="Validate a labels CSV file against the scored rows and store its labels in ctxprec_labels.",
        epilog=IMPORT_EPILOG,
        formatter_class=RAW,
    )
    add_warehouse(i)
    i.add_argument("--labels", required=True, metavar="FILE.csv", help="CSV with columns log_id,node,relevant")
    i.add_argument(
        "--label-set", metavar="NAME", help="the set the labels belong to (default: CTXPREC_LABEL_SET or default)"
    )
    i.add_argument(
        "--source-table",
        metavar="NAME",
        help="the input table the log ids are rows of (default: CTXPREC_SOURCE_TABLE or retrieval_logs)",
    )
    i.add_argument("--json", action="store_true", help="print what was stored as JSON")
    i.set_defaults(func=guarded("labels import", run_import))


def add_draw_flags(p: argparse.ArgumentParser, *, whose: bool = True) -> None:
    """Whose scored rows are drawn (``whose``: --judge-model, --prompt-version) and where their
    texts are read (--source-table, --column)."""
    if whose:
        p.add_argument(
            "--judge-model", metavar="NAME", help="draw from this judge model's scores (default: the most recent)"
        )
        p.add_argument(
            "--prompt-version", metavar="V", help="draw from this prompt version's scores (default: the most recent)"
        )
    p.add_argument(
        "--source-table",
        metavar="NAME",
        help="the input table (default: CTXPREC_SOURCE_TABLE or retrieval_logs); the rows' texts are read there",
    )
    add_columns(p)


def source_table_of(args: argparse.Namespace) -> str:
    from ..errors import IdentifierError
    from ..pipeline.context import source_table_name

    try:
        return source_table_name(getattr(args, "source_table", None) or settings().source_table, None)
    except IdentifierError as exc:
        raise UsageError(str(exc)) from None


def columns_arg(args: argparse.Namespace) -> SourceColumns:
    try:
        return SourceColumns.from_mapping(
            merge_columns(settings().source_columns, columns_of(args)), source="column mapping"
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def run_sample(args: argparse.Namespace) -> int:
    from ..monitoring.label_sample import sample_labels
    from ..warehouse.engine import display_url

    url = args.warehouse or settings().warehouse_url
    check_warehouse(url)
    check_partition_key(args.partition)
    if args.n < 1:
        raise UsageError(f"--n must be at least 1, got {args.n}")
    try:
        result = sample_labels(
            url, args.partition, args.n, args.out, seed=args.seed, judge_model=args.judge_model,
            prompt_version=args.prompt_version, source_table=source_table_of(args), mapping=_mapping(args),
            columns=columns_arg(args),
        )  # fmt: skip
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    console = stdout_console()
    pop = result.population
    console.print(
        f"drew {result.rows} of {result.frame} scored rows of {result.partition_key} ({pop.label()}, seed "
        f"{result.seed}): {result.nodes} nodes to label -> {result.path}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    for log_id, why in list(result.skipped.items())[:5]:
        console.print(f"left out {log_id}: {why}", markup=False, highlight=False, soft_wrap=True)
    how = "label every node" if result.path.suffix.lower() == ".csv" else "open it, label every node, Export CSV"
    console.print(
        f"next: {how}, then ctxprec labels import --warehouse {display_url(url)} --labels {result.export_name}",
        markup=False,
        highlight=False,
        soft_wrap=True,
    )
    return EXIT_OK


def run_import(args: argparse.Namespace) -> int:
    from ..calibration.label_table import import_labels
    from ..calibration.labels import LabelFileError, read_labels

    s = settings()
    url = args.warehouse or s.warehouse_url
    check_warehouse(url)
    labels = read_labels(args.labels, allow_empty=True)
    try:
        report = import_labels(url, labels, label_set=args.label_set or s.label_set, source_table=source_table_of(args))
    except LabelFileError:
        raise
    except ValueError as exc:  # a bad --label-set
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(report.to_dict(), indent=2, ensure_ascii=False))
        return EXIT_OK
    console = stdout_console()
    for line in report.lines():
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    return EXIT_OK
