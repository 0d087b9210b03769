"""``ctxprec score``: score one partition of a warehouse table and write the results back."""

from __future__ import annotations

import argparse
import json
import uuid
from typing import TYPE_CHECKING

from ..pipeline.outcome import Outcome, decide
from ._args import (
    RAW,
    UsageError,
    add_cascade,
    add_flag,
    add_segments,
    add_source,
    add_traces,
    add_warehouse,
    check_judge,
    check_partition,
    config_from_args,
    guarded,
    settings,
)
from ._common import err_console
from .commands import COMMANDS

if TYPE_CHECKING:
    from ..pipeline import ChunkResult, RunSummary

EPILOG = """\
examples:
  ctxprec score --warehouse sqlite:///ctxprec.db --partition 2026-11-28
  ctxprec score --warehouse postgresql://etl@db/analytics --partition 2026-11-28 \\
      --judge gpt-4o-mini --concurrency 32 --max-cost 5
  ctxprec score --partition 2026-11-28 --metric turn_contextual_precision   # (alias: --conversations)
  ctxprec score --partition 2026-11-28 --column retrieval_context=contexts --column event_time=ts
  ctxprec score --partition 2026-11-28 --segment tenant --segment retriever_version   # per-segment figures
  ctxprec score --partition 2026-11-28 --chunk 3 --run-id nightly-2026-11-28   # one chunk only
  ctxprec score --partition 2026-11-28 --finalize --run-id nightly-2026-11-28   # then summarise
  ctxprec score --partition 2026-11-28 --source-format openinference --source-table spans
  ctxprec score --partition 2026-11-28 --source-format openinference --stage rerank
  ctxprec score --warehouse sqlite:///traces.db --otlp-json traces.json --partition 2026-11-28
  ctxprec score --phoenix http://localhost:6006 --phoenix-project rag-app --write-back --partition 2026-11-28

Every setting without a flag comes from its CTXPREC_* variable too (docs/configuration.md), and
OPENAI_API_KEY / OPENAI_BASE_URL configure the judge's client; flags override the variables.
Re-running a partition only judges rows that are not scored yet.

exit codes:  (the Airflow operator and the Dagster asset decide the same way)
  0  done: the partition is complete, every row is scored or recorded as bad input
  1  retry (rows failed because of the judge, or the warehouse was unreachable: re-run) or
     fail (bad warehouse, missing table, judge misconfigured: fix it first)
  2  bad arguments (partition format, identifiers, numbers)
  4  --max-cost reached: the rows it could not afford are recorded as budget_exhausted
     failures; the next run picks them up
"""


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "score",
        help=COMMANDS["score"].help,
        description="Score the contextual precision of one partition of a warehouse table and upsert "
        "the results into ctxprec_scores / ctxprec_failures / ctxprec_runs.",
        epilog=EPILOG,
        formatter_class=RAW,
    )
    add_warehouse(p)
    add_source(p)
    add_cascade(p)
    add_segments(p)
    add_traces(p)
    for flag in ("--concurrency", "--max-cost", "--max-rpm", "--max-tpm", "--sample-rate", "--max-rows"):
        add_flag(p, flag)
    add_flag(p, "--outage-tolerance")
    p.add_argument("--strict", action="store_true", help="strict mode: threshold 1, any score below 1 becomes 0")
    p.add_argument(
        "--workers",
        type=int,
        metavar="N",
        default=1,
        help="score chunks in N worker processes (default 1; use the machine's cores for "
        "large partitions with a fast judge)",
    )
    p.add_argument(
        "--chunk",
        type=int,
        metavar="INDEX",
        help="score only this chunk (0-based, as planned by --chunk-size); ctxprec_runs is not updated",
    )
    p.add_argument(
        "--batch",
        action="store_true",
        help="judge through the OpenAI Batch API: half price, results within 24 h; resumes the "
        "partition's open batches instead of submitting again (default: CTXPREC_JUDGE_MODE or sync)",
    )
    add_flag(p, "--batch-retry")
    p.add_argument("--run-id", metavar="ID", help="run id to record (default: a new random id)")
    p.add_argument(
        "--finalize",
        action="store_true",
        help="only summarise the partition into ctxprec_runs (after scoring its chunks with --chunk)",
    )
    p.add_argument("--json", action="store_true", help="print the run summary as JSON on stdout instead of a table")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(func=guarded("score", run))


def run(args: argparse.Namespace) -> int:
    from ..pipeline import finalize_run, score_partition
    from ._render import run_table, stdout_console
    from .progress import ProgressDisplay

    console = stdout_console()
    partition = check_partition(args.partition)
    if args.workers < 1:
        raise UsageError("--workers must be at least 1")
    if args.otlp_json:
        args.source_format = load_otlp(args, args.source_format)
    config = config_from_args(
        args, strict_mode=True if args.strict else None, judge_mode="batch" if args.batch else None
    )
    if config.judge_mode == "batch" and (args.chunk is not None or args.workers > 1):
        raise UsageError("--batch scores the whole partition in one process: drop --chunk/--workers")
    if config.kind.needs_judge:  # the label metric computes without a judge: no key needed
        check_judge(config.judge, settings(args))
        if config.escalate_to is not None:  # a cascade's strong judge: the same checks
            check_judge(config.escalate_to, settings(args))
    run_id = args.run_id or uuid.uuid4().hex
    label = f"{partition} {config.metric}"

    if args.chunk is not None and args.finalize:
        raise UsageError("--chunk and --finalize are separate steps: score chunks first, then finalize")
    if args.chunk is not None:
        return _one_chunk(args, config, partition, run_id, label)

    if args.finalize:
        if not args.run_id:
            raise UsageError("--finalize needs the --run-id the chunks were scored with")
        summary = finalize_run(config, partition, run_id=run_id)
    else:
        with ProgressDisplay(enabled=not args.quiet) as display:
            summary = score_partition(
                config, partition, run_id=run_id, progress=display.callback(label), workers=args.workers
            )

    if args.json:
        console.print_json(json.dumps(summary.to_dict(), default=str))
    else:
        console.print(run_table(summary, title=f"{config.table_name} · run {run_id}"))
        for note in config.trace_options.notes() if config.trace_options else ():
            if note not in (summary.error_message or ""):  # else the run's notes below say it
                console.print(f"note: {note}", markup=False, highlight=False)
        if summary.error_message and decide(summary).outcome is Outcome.DONE:  # else the error line says it
            console.print(f"note: {summary.error_message}", markup=False, highlight=False, soft_wrap=True)
    return _exit_code(summary)


def load_otlp(args: argparse.Namespace, source_format: str | None) -> str:
    """``--otlp-json FILE``: load the file into the spans table; the source format to score it
    with (the flag, else ``CTXPREC_SOURCE_FORMAT`` when it names a span format, else the file's)."""
    from pathlib import Path

    from ..traces.otlp import load_otlp_json
    from ..warehouse.engine import database_file, get_engine
    from ._args import settings

    s = settings()  # the variables alone: --source-format given means given on the command line
    url = args.warehouse or s.warehouse_url
    try:
        database = database_file(url)
    except Exception:
        database = None  # config_from_args says what is wrong with it
    if database and database != ":memory:" and not database.startswith("file:") and not Path(database).exists():
        if not Path(database).parent.exists():
            raise UsageError(f"the directory of the SQLite warehouse {database!r} does not exist")
        import sqlite3

        sqlite3.connect(database).close()  # a new, empty warehouse for the file's spans
    if source_format == "rows":
        raise UsageError("--otlp-json loads spans: use --source-format openinference or otel-genai")
    table = args.source_table or s.span_table
    loaded = load_otlp_json(get_engine(url), args.otlp_json, table)
    err_console.print(loaded.summary(), markup=False, highlight=False, soft_wrap=True)
    chosen = source_format or (s.source_format if s.is_set("CTXPREC_SOURCE_FORMAT") else None)
    chosen = chosen or loaded.detected_format()
    if chosen is None or chosen == "rows":
        seen = ", ".join(f"{k} {v}" for k, v in loaded.conventions.items()) or "none"
        raise UsageError(
            f"cannot tell which convention {args.otlp_json} follows (spans by convention: {seen}): "
            "give --source-format openinference or otel-genai"
        )
    return chosen


def _exit_code(result: RunSummary | ChunkResult) -> int:
    """The outcome policy's exit code; anything but done says why on stderr, in one line."""
    decision = decide(result)
    if decision.outcome is not Outcome.DONE:
        err_console.print(f"ctxprec score: {decision.reason}", markup=False, highlight=False, soft_wrap=True)
    return decision.exit_code


def _one_chunk(args: argparse.Namespace, config, partition: str, run_id: str, label: str) -> int:
    from ..pipeline import plan_chunks, prepare, score_chunk
    from ._render import chunk_table, stdout_console
    from .progress import ProgressDisplay

    console = stdout_console()
    ctx = prepare(config)
    chunks = plan_chunks(config, partition, context=ctx)
    if not 0 <= args.chunk < len(chunks):
        raise UsageError(
            f"--chunk {args.chunk} is out of range: partition {partition} has {len(chunks)} chunk(s)"
            + (f" (0-{len(chunks) - 1})" if chunks else "")
        )
    with ProgressDisplay(enabled=not args.quiet) as display:
        result = score_chunk(
            config,
            chunks[args.chunk],
            run_id=run_id,
            context=ctx,
            progress=display.callback(f"{label} chunk {args.chunk}"),
        )
    if args.json:
        console.print_json(json.dumps({"run_id": run_id, **result.to_dict()}, default=str))
    else:
        console.print(chunk_table(result, run_id=run_id))
    return _exit_code(result)
