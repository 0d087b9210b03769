"""``ctxprec audit position``: does the judge's verdict on a node change with where it is shown?"""

from __future__ import annotations

import argparse
import json

from rich.table import Table

from ._args import RAW, UsageError, add_warehouse, check_judge, check_warehouse, guarded, settings
from ._args import check_partition as check_partition_key
from ._args import mapping_of_args as _mapping
from ._common import EXIT_ERROR, EXIT_OK
from ._render import stdout_console
from .commands import COMMANDS
from .labels import add_draw_flags, columns_arg, source_table_of

EPILOG = """\
examples:
  ctxprec audit position --warehouse sqlite:///ctxprec.db --partition 2026-11-28 --n 50 --dry-run
  ctxprec audit position --partition 2026-11-28 --n 50 --judge gpt-4o-mini --max-cost 0.50
  ctxprec audit position --partition 2026-11-28 --n 50 --json

Draws N scored rows of the partition at random (--seed) from the audited judge's own scores
(its current prompt version), judges each again with its nodes in reversed order, numbered 1..n
in the order shown, maps each verdict back to the node's original rank, and compares with the
stored verdicts: flip_rate = share of node verdicts that changed; score_shift = mean of
(reversed - original) score per case with its paired 95% t-interval (ci_low, ci_high). The
judgment cache is neither read nor written (a cached verdict would hide an order effect), so
every node is paid for: --dry-run shows the calls, tokens and cost first; --max-cost caps the
spend (cases it refuses are left out and counted). The audit is stored in ctxprec_audits and
shown by ctxprec report.

exit codes:
  0  done (or --dry-run)    1  error, or no case could be audited    2  bad arguments
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "audit",
        help=COMMANDS["audit"].help,
        description="Audit the judge against its own stored verdicts.",
        formatter_class=RAW,
    )
    sub = p.add_subparsers(dest="audit_command", metavar="KIND", required=True)
    a = sub.add_parser(
        "position",
        help="re-judge rows with their nodes in reversed order; report the verdicts that flip",
        description="Position-bias audit: re-judge N scored rows with their nodes shown in reversed order and "
        "compare the verdicts, mapped back to the original ranks, with the stored ones.",
        epilog=EPILOG,
        formatter_class=RAW,
    )
    add_warehouse(a)
    a.add_argument("--partition", required=True, metavar="YYYY-MM-DD", help="the partition (UTC day) to audit")
    a.add_argument("--n", required=True, type=int, metavar="N", help="scored rows to audit (drawn at random)")
    a.add_argument("--seed", type=int, default=0, metavar="S", help="random seed of the draw (default: %(default)s)")
    a.add_argument("--judge", metavar="MODEL", help="the judge to audit (default: CTXPREC_JUDGE)")
    a.add_argument(
        "--concurrency", type=int, metavar="N", help="judge requests in flight (default: CTXPREC_CONCURRENCY)"
    )
    a.add_argument("--max-cost", type=float, metavar="USD", help="cap the audit's judge spend")
    a.add_argument("--dry-run", action="store_true", help="count the judge calls, tokens and cost; call nothing")
    a.add_argument("--json", action="store_true", help="print the result as JSON")
    add_draw_flags(a, whose=False)
    a.set_defaults(func=guarded("audit position", run_position))


def _f(v: float | None, spec: str) -> str:
    return "—" if v is None else format(v, spec)


def run_position(args: argparse.Namespace) -> int:
    from ..monitoring.position_audit import audit_position, estimate_position_audit

    s = settings()
    url = args.warehouse or s.warehouse_url
    check_warehouse(url)
    check_partition_key(args.partition)
    if args.n < 1:
        raise UsageError(f"--n must be at least 1, got {args.n}")
    if args.max_cost is not None and args.max_cost < 0:
        raise UsageError(f"--max-cost must be >= 0, got {args.max_cost}")
    judge = args.judge or s.judge
    check_judge(judge)
    common = dict(
        seed=args.seed, judge=judge, source_table=source_table_of(args), mapping=_mapping(args),
        columns=columns_arg(args),
    )  # fmt: skip
    console = stdout_console()
    if args.dry_run:
        est = estimate_position_audit(url, args.partition, args.n, **common)
        if args.json:
            print(json.dumps(est.to_dict(), indent=2))
            return EXIT_OK
        cost = "unknown (no price for this model)" if est.cost is None else f"${est.cost:.4f}"
        console.print(
            f"audit of {est.cases} cases ({est.nodes} nodes) of {args.partition} with {est.judge_model}: "
            f"{est.judge_calls} judge calls, ~{est.prompt_tokens:,} prompt + ~{est.completion_tokens:,} completion "
            f"tokens ({est.tokenizer}), {cost}; nothing called (no judgment cache: every node is paid for)",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        return EXIT_OK
    audit = audit_position(
        url, args.partition, args.n, max_cost=args.max_cost, concurrency=args.concurrency or s.concurrency, **common
    )
    if args.json:
        print(json.dumps(audit.to_dict(), indent=2))
    else:
        console.print(audit.headline(), markup=False, highlight=False, soft_wrap=True)
        if audit.by_rank:
            t = Table(title="verdicts flipped by original rank", header_style="bold")
            t.add_column("rank", justify="right")
            t.add_column("nodes", justify="right")
            t.add_column("flipped", justify="right")
            t.add_column("share", justify="right")
            for r in audit.by_rank:
                t.add_row(str(r["rank"]), str(r["nodes"]), str(r["flipped"]), f"{r['flipped'] / r['nodes']:.0%}")
            console.print(t)
        cost = "unknown" if audit.cost is None else f"${audit.cost:.4f}"
        console.print(
            f"{audit.judge_calls} judge calls, {cost}"
            + (
                f"; {len(audit.failed)} cases not audited (e.g. {next(iter(audit.failed.values()))})"
                if audit.failed
                else ""
            )
            + (f"; {len(audit.skipped)} rows skipped" if audit.skipped else "")
            + ("; stored in ctxprec_audits" if audit.cases else ""),
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    if not audit.cases:
        why = next(iter({**audit.failed, **audit.skipped}.values()), "no rows")
        from ._common import err_console

        err_console.print(f"ctxprec audit position: error: no case could be audited ({why})", markup=False)
        return EXIT_ERROR
    return EXIT_OK
