"""``ctxprec estimate``: the judge calls, tokens and cost a ``score`` run would spend."""

from __future__ import annotations

import argparse
import json

from ._args import (
    RAW,
    UsageError,
    add_cascade,
    add_source,
    add_traces,
    add_warehouse,
    check_partition,
    config_from_args,
    guarded,
)
from ._common import EXIT_OK, err_console
from .commands import COMMANDS

EPILOG = """\
examples:
  ctxprec estimate --warehouse sqlite:///ctxprec.db --partition 2026-11-28 --judge gpt-4o-mini
  ctxprec estimate --partition 2026-11-28 --conversations --json

Reads the partition in keyset chunks like `score`, skips rows already scored for this judge
and prompt version, and nodes already in the judgment cache (ctxprec_judgments). Prompt tokens
are the real prompts counted with the model's BPE encoding (cl100k/o200k, bundled by the
'tokens' extra; else characters / 4, and the output says which), completion tokens 40 per node; prices
from ctxprec_ops.judge.pricing (override with CTXPREC_PRICES='{"model": [in_usd_per_1M, out_usd_per_1M]}').
No judge is called and nothing is written; no API key is needed.
privileges: read access only (SELECT on the input and ctxprec_* tables); a SQLite file is opened read-only.
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "estimate",
        help=COMMANDS["estimate"].help,
        description="Estimate the judge calls, tokens and USD cost of scoring one partition.",
        epilog=EPILOG,
        formatter_class=RAW,
    )
    add_warehouse(p)
    add_source(p)
    add_cascade(p)
    add_traces(p)
    p.add_argument("--json", action="store_true", help="print the estimate as JSON on stdout")
    p.set_defaults(func=guarded("estimate", run))


def run(args: argparse.Namespace) -> int:
    from ..pipeline.estimate import estimate_partition
    from ._render import estimate_table, stdout_console

    console = stdout_console()
    partition = check_partition(args.partition)
    if getattr(args, "otlp_json", None):
        raise UsageError("--otlp-json loads a file for ctxprec score; estimate the spans table it loaded into")
    config = config_from_args(args)

    def progress(rows: int, _total: int | None) -> None:
        if not args.json and err_console.is_terminal:
            err_console.print(f"estimate: {rows} rows read", end="\r", markup=False, highlight=False)

    est = estimate_partition(config, partition, progress=progress)
    if args.json:
        console.print_json(json.dumps(est.to_dict(), default=str))
        return EXIT_OK
    console.print(estimate_table(est))
    console.print("no judge call was made and nothing was written", markup=False, highlight=False)
    if est.cost is None:
        console.print(f"no price known for {est.judge_model!r}: set CTXPREC_PRICES to get a cost", markup=False)
    elif est.offline_judge:
        console.print(
            "offline judge: no network calls and no cost; the figures show what an LLM judge would be sent",
            markup=False,
        )
    for example in est.invalid_examples[:3]:
        console.print(f"invalid row {example}", markup=False, highlight=False)
    console.print(f"method: {est.method}", markup=False, highlight=False, style="dim")
    return EXIT_OK
