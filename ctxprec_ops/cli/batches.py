"""``ctxprec batches``: list, collect or cancel the Batch API batches of a warehouse."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime

from ._args import RAW, UsageError, add_columns, add_flag, add_warehouse, config_from_args, guarded
from ._common import EXIT_OK
from ._render import run_table, stdout_console
from .commands import COMMANDS

EPILOG = """\
examples:
  ctxprec batches --warehouse sqlite:///ctxprec.db                 # the recent batches
  ctxprec batches --warehouse sqlite:///ctxprec.db list --open     # the ones no run has collected
  ctxprec batches --warehouse sqlite:///ctxprec.db collect batch_abc123
  ctxprec batches --warehouse sqlite:///ctxprec.db cancel batch_abc123

A batch belongs to one scoring configuration (partition, metric, judge model, prompt version):
a `score --batch` run of that configuration waits for it and writes its answers. After the judge
model or the prompt changed, `collect` runs the batch's own configuration for its partition
(source table and column mapping from the flags and CTXPREC_* settings, as `score` reads them);
`cancel` asks the provider to stop it (lines it answered stay reusable). Collect with the
settings the batch was asked with (source table, --column mapping, --max-nodes-per-call):
requests that come out differently are submitted again.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "batches",
        help=COMMANDS["batches"].help,
        description="List, collect or cancel the batches recorded in ctxprec_batches.",
        epilog=EPILOG,
        formatter_class=RAW,
    )
    add_warehouse(p)
    p.add_argument("action", nargs="?", choices=("list", "collect", "cancel"), default="list")
    p.add_argument("batch_id", nargs="?", metavar="ID", help="the batch (collect, cancel)")
    p.add_argument("--open", action="store_true", help="list: only batches no run has collected yet")
    p.add_argument("--source-table", metavar="NAME", help="collect: the input table of the batch's rows (as for score)")
    add_columns(p)
    add_flag(p, "--max-nodes-per-call", about="collect: nodes per judge call, as the batch was submitted with")
    p.add_argument("--json", action="store_true", help="print JSON on stdout instead of a table")
    p.set_defaults(func=guarded("batches", run))


def _age(submitted: datetime) -> str:
    hours = (datetime.now(UTC) - submitted).total_seconds() / 3600
    return f"{hours:.1f} h" if hours < 48 else f"{hours / 24:.0f} d"


def run(args: argparse.Namespace) -> int:
    from ..batch.manage import batch_records, cancel_batch, collect_batch
    from ..monitoring.table_fit import Col, FitTable

    console = stdout_console()
    if args.action != "list" and not args.batch_id:
        raise UsageError(f"`ctxprec batches {args.action}` needs the batch id")
    config = config_from_args(args)
    if args.action == "collect":
        summary = collect_batch(config, args.batch_id)
        if args.json:
            console.print_json(json.dumps(summary.to_dict(), default=str))
        else:
            console.print(run_table(summary, title=f"batch {args.batch_id} collected"))
        return EXIT_OK
    if args.action == "cancel":
        record = cancel_batch(config, args.batch_id)
        ended = record.finished_at is not None
        if args.json:
            console.print_json(json.dumps(record.__dict__, default=str))
        else:
            state = "ended" if ended else "is stopping (the provider has not ended it yet; run cancel again later)"
            console.print(f"batch {record.batch_id} {state}: {record.status}", markup=False, highlight=False)
        return EXIT_OK
    records = batch_records(config, open_only=args.open)
    if args.json:
        console.print_json(json.dumps([r.__dict__ for r in records], default=str))
        return EXIT_OK
    # in a narrow terminal: prompt, metric, answered, judge, collected, age give way, in that order
    table = FitTable(
        Col("batch", justify="left"),
        Col("partition", justify="left"),
        Col("metric", justify="left", drop=2),
        Col("judge", justify="left", drop=4),
        Col("prompt", justify="left", drop=1),
        Col("status", justify="left"),
        Col("requests"),
        Col("answered", drop=3),
        Col("age", drop=6),
        Col("collected", justify="left", drop=5),
        title="batches (newest first)",
    )
    for r in records:
        table.add_row(
            r.batch_id,
            r.partition_key,
            r.metric,
            r.judge_model,
            r.prompt_version,
            r.status,
            str(r.requests),
            "" if r.answered is None else str(r.answered),
            _age(r.submitted_at),
            "yes" if r.finished_at is not None else "no",
        )
    console.print(table)
    if not records:
        console.print("no batches recorded", markup=False)
    return EXIT_OK
