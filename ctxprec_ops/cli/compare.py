"""``ctxprec compare``: candidate vs baseline value of a segment column (paired or Welch), overall
and per segment; plus the rich tables of per-segment checks (``check --by`` / ``trend --by``)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from rich.text import Text

from ..monitoring.table_fit import Col, FitTable
from ._args import RAW, UsageError, check_warehouse, guarded, settings
from ._args import check_partition as check_partition_key
from ._common import EXIT_ALERT, EXIT_OK
from ._render import print_prose, stdout_console
from .commands import COMMANDS

if TYPE_CHECKING:  # pandas/scipy stay out of --help
    from ..monitoring.compare import Comparison

EPILOG = """\
examples:
  ctxprec compare --partition 2026-11-28 --by retriever_version --baseline v1 --candidate v2
  ctxprec compare --partition 2026-11-22 --until 2026-11-28 --by retriever_version \\
      --baseline v1 --candidate v2 --pair-on query_id --within tenant --fail-if-worse
  ctxprec compare --partition 2026-11-28 --by retriever_version --baseline v1 --candidate v2 --json

--by, --pair-on and --within name segment columns recorded at scoring time
(ctxprec score --segment COL, or CTXPREC_SEGMENTS) or, after the fact, columns of the input
table (e.g. --pair-on input, the query text), read by the scores' log_id from the table the
scores name as their source (today's values; a spans table's attributes need --segment).
'(null)' selects the NULL value.
Paired (--pair-on): the paired t-test of the per-pair differences (a side's repeated rows of
one pair value are averaged first; rows without a partner are counted and left out);
unpaired: Welch's t-test. Intervals: 95% t-intervals. Per --within segment, `significant` is
Holm-corrected across the segments. Both run as SQL aggregates: no row is loaded.
baseline_rows / candidate_rows are the rows compared on each side (paired: the rows behind
the pairs, repeats included, plus the unpaired ones).

Whose scores: one population (judge model, prompt version, input table, column mapping),
chosen over the whole --partition..--until range. A range scored under several populations
(say the judge changed mid-range) is refused with one line naming each, its rows and days:
name one with --judge-model / --prompt-version / --source-table / --column. The rows of the
range under other populations are then listed as not compared.

exit codes:
  0  done    1  error (warehouse, tables)    2  bad arguments
  3  --fail-if-worse and the candidate is significantly worse overall or in a segment

privileges: read access only (SELECT on the ctxprec_* tables, and on the input table for a
column read from it); a SQLite file is opened read-only and never written
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    from .monitor import add_population_flags

    p = subparsers.add_parser(
        "compare",
        help=COMMANDS["compare"].help,
        description="Compare the scores of --candidate with those of --baseline (two values of the segment "
        "column --by) over one partition or a range: delta, 95%% CI, p-value, per --within segment.",
        epilog=EPILOG,
        formatter_class=RAW,
    )
    add_population_flags(p)
    p.add_argument("--partition", required=True, metavar="YYYY-MM-DD", help="the (first) partition")
    p.add_argument("--until", metavar="YYYY-MM-DD", help="last partition of the range (default: --partition)")
    p.add_argument("--by", required=True, metavar="COL", help="segment (or input table) column holding the versions")
    p.add_argument("--baseline", required=True, metavar="A", help="the baseline value of --by")
    p.add_argument("--candidate", required=True, metavar="B", help="the candidate value of --by")
    p.add_argument("--pair-on", metavar="COL", help="pair rows of A and B that share this column's value (e.g. input)")
    p.add_argument("--within", metavar="COL", help="repeat the comparison per value of this column")
    p.add_argument("--alpha", type=float, default=0.05, metavar="P", help="significance level (default: %(default)s)")
    p.add_argument(
        "--label-set",
        metavar="NAME",
        help="labels (ctxprec_labels) that correct each side's mean where enough compared rows are fully "
        "labelled; the corrected delta is shown next to the judge's (default: CTXPREC_LABEL_SET or default)",
    )
    p.add_argument("--json", action="store_true", help="print one JSON object on stdout")
    p.add_argument(
        "--fail-if-worse", action="store_true", help="exit 3 when the candidate is significantly worse anywhere"
    )
    p.set_defaults(func=guarded("compare", run_compare))


def _f(v: float | None, spec: str = ".3f") -> str:
    return "—" if v is None else format(v, spec)


def comparison_table(c: Comparison) -> FitTable:
    """Overall first, then the segments worst first. In a narrow terminal the two sides' means
    (together), the per-segment p (with --within: Holm's p decides) and the sizes give way, in
    that order.
    A difference without variance (every pair, or every row of each side, alike) reads "no
    variance" instead of a p of 0 or 1 and a zero-width interval."""
    from ..monitoring.segment_data import label

    title = f"{c.metric}: {c.by} {label(c.candidate_value)} vs {label(c.baseline_value)} ({c.method})"
    t = FitTable(
        Col(c.within or "", justify="left"),
        Col("pairs" if c.paired else "rows A/B", drop=3 if c.within else 2),
        Col(label(c.baseline_value), drop=1),
        Col(label(c.candidate_value), drop=1),
        Col("delta"),
        Col("95% CI"),
        Col("p", drop=2 if c.within else 0),
        *([Col("Holm p")] if c.within else []),
        Col("", justify="left"),
        title=title,
    )
    for name, s in [("overall", c.overall)] + [(x.label, x) for x in c.segments]:
        tt = s.test
        size = str(s.pairs) if c.paired else f"{s.baseline.n}/{s.candidate.n}"
        if tt.no_variance:
            ci, p = "no variance", "—"
        else:
            ci = "—" if tt.ci_low is None else f"{tt.ci_low:+.3f} … {tt.ci_high:+.3f}"
            p = _f(tt.p_value, ".2g")
        sig = ("worse" if (tt.delta or 0) < 0 else "better") if s.significant else ""
        row: list[str | Text] = [
            Text(name),
            size,
            _f(s.baseline.mean),
            _f(s.candidate.mean),
            _f(tt.delta, "+.3f"),
            ci,
            p,
        ]
        if c.within:
            row.append("" if s is c.overall else ("—" if tt.no_variance else _f(s.p_adjusted, ".2g")))
        row.append(sig)
        t.add_row(*row, style="red" if sig == "worse" else ("green" if sig else None))
    return t


def run_compare(args: argparse.Namespace) -> int:
    from ..monitoring.compare import compare
    from ..monitoring.segment_data import parse_value
    from .monitor import id_column_of, population_args

    url = settings(args).warehouse_url
    check_warehouse(url)
    check_partition_key(args.partition)
    if args.until:
        check_partition_key(args.until)
    if not 0.0 < args.alpha < 1.0:
        raise UsageError(f"--alpha must be between 0 and 1, got {args.alpha}")
    try:
        result = compare(
            url, args.partition, until=args.until, by=args.by, baseline=parse_value(args.baseline),
            candidate=parse_value(args.candidate), pair_on=args.pair_on, within=args.within,
            alpha=args.alpha, id_column=id_column_of(args), label_set=args.label_set or settings(args).label_set,
            **population_args(args),
        )  # fmt: skip
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, allow_nan=False, ensure_ascii=False))
    else:
        console = stdout_console()
        console.print(comparison_table(result))
        print_prose(console, result.summary())
    return EXIT_ALERT if args.fail_if_worse and result.worse else EXIT_OK
