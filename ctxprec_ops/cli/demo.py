"""``ctxprec demo``: the main job end to end on a generated SQLite warehouse."""

from __future__ import annotations

import argparse
from functools import partial

from ..demo.defaults import DEFAULT_DEMO_URL, DEFAULT_REPORT, DEMO_JUDGE
from ..secrets import redact
from ._args import RAW, UsageError, add_flag, check_judge, guarded, settings
from ._common import EXIT_OK, err_console
from .commands import COMMANDS

EPILOG = f"""\
examples:
  ctxprec demo                                  # {DEFAULT_DEMO_URL}, 14 days, offline judge
  ctxprec demo --days 7 --out /tmp/report.html
  OPENAI_API_KEY=sk-... ctxprec demo --days 3 --rows-per-day 20 --judge gpt-4o-mini

The warehouse is recreated on every run (a SQLite file is deleted first; any other URL needs
--force and gets its sample and ctxprec_* tables dropped). The demo is offline: it uses the
lexical judge unless --judge names another, whatever OPENAI_API_KEY or CTXPREC_JUDGE say.
Files written: the warehouse, FILE.html and, next to it, FILE_conversations.html,
FILE_labels.html and FILE_node_labels.csv (`make clean` removes the default ones).
Exit code: 0 when every partition run completed, 1 when one did not (the reason is printed).
"""


def _range(text: str) -> tuple[int, int]:
    try:
        lo, _, hi = text.partition("-")
        low, high = int(lo), int(hi or lo)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected N or LOW-HIGH, got {text!r}") from None
    if not 1 <= low <= high:
        raise argparse.ArgumentTypeError(f"expected 1 <= LOW <= HIGH, got {text!r}")
    return low, high


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "demo",
        help=COMMANDS["demo"].help,
        description="Run the nightly job end to end on a generated sample warehouse: a support bot's "
        "retrieval and conversation logs over several days, with a quality dip and a few "
        "malformed rows.",
        epilog=EPILOG,
        formatter_class=RAW,
    )
    p.add_argument(
        "--warehouse",
        default=DEFAULT_DEMO_URL,
        metavar="URL",
        help=f"where to create the sample (default: {DEFAULT_DEMO_URL}, recreated)",
    )
    p.add_argument("--days", type=int, default=14, metavar="N", help="days of logs (default: 14)")
    p.add_argument(
        "--rows-per-day",
        type=_range,
        default=(250, 400),
        metavar="LOW-HIGH",
        help="retrieval logs per day (default: 250-400)",
    )
    p.add_argument(
        "--conversations-per-day",
        type=_range,
        default=(20, 40),
        metavar="LOW-HIGH",
        help="conversations per day (default: 20-40)",
    )
    p.add_argument(
        "--judge",
        metavar="MODEL",
        help=f"an OpenAI-compatible model name (with OPENAI_API_KEY / OPENAI_BASE_URL) to score with an LLM "
        f"judge (default: {DEMO_JUDGE}, the offline judge; CTXPREC_JUDGE is not read)",
    )
    p.add_argument(
        "--out", default=DEFAULT_REPORT, metavar="FILE.html", help=f"HTML report path (default: {DEFAULT_REPORT})"
    )
    p.add_argument("--seed", type=int, default=20261128, help="sample seed (same seed, same logs)")
    p.add_argument("--end-date", metavar="YYYY-MM-DD", help="last day of the sample (default: yesterday, UTC)")
    add_flag(p, "--concurrency")
    p.add_argument("--force", action="store_true", help="allow recreating the demo tables on a non-SQLite warehouse")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(func=guarded("demo", run))


def run(args: argparse.Namespace) -> int:
    from ..demo.job import METRICS, check_demo_warehouse, run_demo
    from ._out_path import check_out_path
    from ._render import runs_table, stdout_console
    from .progress import ProgressDisplay

    console = stdout_console()
    if args.days < 1 or args.days > 366:
        raise UsageError("--days must be between 1 and 366")
    if args.end_date:
        from ._args import check_partition

        check_partition(args.end_date)
    s = settings(args)
    judge = args.judge or DEMO_JUDGE
    check_judge(judge, s)
    check_demo_warehouse(args.warehouse, force=args.force)
    check_out_path(args.out)  # the report and the files next to it: a bad --out is a usage error
    if not args.judge and s.is_set("judge") and s.judge.lower() != DEMO_JUDGE:
        err_console.print(
            f"ctxprec demo: note: CTXPREC_JUDGE={redact(s.judge)} is not used by the demo, which is offline "
            "unless --judge names a judge",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
    runs = args.days * len(METRICS)
    with ProgressDisplay(
        enabled=not args.quiet, total_runs=runs, overall_label="partition runs", compact=True
    ) as display:
        display.log(f"ctxprec demo: judge {judge}")
        result = run_demo(
            args.warehouse,
            days=args.days,
            rows_per_day=args.rows_per_day,
            conversations_per_day=args.conversations_per_day,
            judge=judge,
            out=args.out,
            seed=args.seed,
            end_date=args.end_date,
            force=args.force,
            progress_for=display.callback,
            log=display.log,
            # the run settings of the environment (and --concurrency); the CLI's process is its own
            configure=partial(s.pipeline_config, quiet_gc=True),
        )

    info = result.info
    console.print(
        f"[bold]Sample warehouse[/] {info.url}: {info.total_retrievals} retrieval logs, "
        f"{info.total_conversations} conversations, {len(info.partitions)} daily partitions "
        f"({info.partitions[0]} .. {info.partitions[-1]}); "
        f"{sum(len(v) for v in info.malformed.values())} malformed retrieval rows; judge [bold]{result.judge}[/]",
        highlight=False,
    )
    for kind in METRICS:
        console.print(
            runs_table(
                result.by_metric(kind.name), title=f"{kind.default_table} · {kind.title} per day", show_metric=False
            )
        )

    from ..monitoring import format_trend_table

    for metric, df in result.trends.items():
        console.print(format_trend_table(df, title=f"trend and alerts · {metric}"))
    alerts = result.alerts
    if alerts:
        console.print(f"[bold red]{len(alerts)} alert(s)[/]:", highlight=False)
        for _metric, _key, message in alerts:
            console.print(f"  - {message}", markup=False, highlight=False)
    else:
        console.print("no alerts", style="green")
    if result.reports:
        for metric, path in result.reports.items():
            console.print(f"HTML report ({metric}): {path}", markup=False, highlight=False)
    if result.report_note:
        console.print(f"note: {result.report_note}", markup=False, highlight=False)
    console.print(
        f"done in {result.seconds_total:.1f}s (sample {result.seconds_data:.1f}s, scoring "
        f"{result.seconds_scoring:.1f}s)",
        markup=False,
        highlight=False,
    )
    incomplete = result.incomplete
    if incomplete:  # a demo whose partitions failed did not demonstrate the job: say so, exit non-zero
        summary, decision = incomplete[0]
        more = f" (and {len(incomplete) - 1} more)" if len(incomplete) > 1 else ""
        err_console.print(
            f"ctxprec demo: {len(incomplete)} of {len(result.summaries)} partition runs did not complete; "
            f"first: {summary.metric} {decision.reason}{more}",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        return max(d.exit_code for _s, d in incomplete)
    return EXIT_OK
