"""``ctxprec compare``: candidate vs baseline value of a segment column (paired or Welch), overall
and per segment; plus the rich tables of per-segment checks (``check --by`` / ``trend --by``)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from rich.table import Table

from ._args import RAW, UsageError, check_warehouse, guarded, settings
from ._args import check_partition as check_partition_key
from ._common import EXIT_ALERT, EXIT_OK
from ._render import stdout_console
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
(ctxprec score --segment COL, or CTXPREC_SEGMENTS). '(null)' selects the NULL value.
Paired (--pair-on): the paired t-test of the per-pair differences (a side's repeated rows of
one pair value are averaged first; rows without a partner are counted and left out);
unpaired: Welch's t-test. Intervals: 95% t-intervals. Per --within segment, `significant` is
Holm-corrected across the segments. Both run as SQL aggregates: no row is loaded.

exit codes:
  0  done    1  error (warehouse, tables)    2  bad arguments
  3  --fail-if-worse and the candidate is significantly worse overall or in a segment
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
    p.add_argument("--by", required=True, metavar="COL", help="segment column holding the versions")
    p.add_argument("--baseline", required=True, metavar="A", help="the baseline value of --by")
    p.add_argument("--candidate", required=True, metavar="B", help="the candidate value of --by")
    p.add_argument("--pair-on", metavar="COL", help="pair rows of A and B that share this segment column's value")
    p.add_argument("--within", metavar="COL", help="repeat the comparison per value of this segment column")
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


def comparison_table(c: Comparison) -> Table:
    """Overall first, then the segments worst first."""
    from ..monitoring.segment_data import label

    title = f"{c.metric}: {c.by} {label(c.candidate_value)} vs {label(c.baseline_value)} ({c.method})"
    t = Table(title=title, header_style="bold")
    t.add_column(c.within or "")
    t.add_column("pairs" if c.paired else "rows A/B", justify="right", no_wrap=True)
    t.add_column(f"{label(c.baseline_value)}", justify="right", no_wrap=True)
    t.add_column(f"{label(c.candidate_value)}", justify="right", no_wrap=True)
    t.add_column("delta", justify="right", no_wrap=True)
    t.add_column("95% CI", justify="right", no_wrap=True)
    t.add_column("p", justify="right", no_wrap=True)
    if c.within:
        t.add_column("Holm p", justify="right", no_wrap=True)
    t.add_column("", no_wrap=True)
    for name, s in [("overall", c.overall)] + [(x.label, x) for x in c.segments]:
        tt = s.test
        size = str(s.pairs) if c.paired else f"{s.baseline.n}/{s.candidate.n}"
        ci = "—" if tt.ci_low is None else f"{tt.ci_low:+.3f} … {tt.ci_high:+.3f}"
        sig = ("worse" if (tt.delta or 0) < 0 else "better") if s.significant else ""
        row = [name, size, _f(s.baseline.mean), _f(s.candidate.mean), _f(tt.delta, "+.3f"), ci, _f(tt.p_value, ".2g")]
        if c.within:
            row.append("" if s is c.overall else _f(s.p_adjusted, ".2g"))
        row.append(sig)
        t.add_row(*row, style="red" if sig == "worse" else ("green" if sig else None))
    return t


def run_compare(args: argparse.Namespace) -> int:
    from ..monitoring.compare import compare
    from ..monitoring.segment_data import parse_value
    from .monitor import population_args

    url = args.warehouse or settings().warehouse_url
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
            alpha=args.alpha, label_set=args.label_set or settings().label_set, **population_args(args),
        )  # fmt: skip
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    if args.json:
        print(json.dumps(result.to_dict(), indent=2, allow_nan=False, ensure_ascii=False))
    else:
        console = stdout_console()
        console.print(comparison_table(result))
        console.print(result.summary(), markup=False, highlight=False, soft_wrap=True)
    return EXIT_ALERT if args.fail_if_worse and result.worse else EXIT_OK
