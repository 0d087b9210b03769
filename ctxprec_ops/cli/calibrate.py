"""``ctxprec calibrate``: measure judges against labelled node judgments (``log_id,node,relevant``)."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from ..monitoring.table_fit import Col, FitTable
from ..pipeline.columns import SourceColumns, merge_columns
from ._args import (
    RAW,
    UsageError,
    add_columns,
    add_flag,
    add_warehouse,
    check_judge,
    check_warehouse,
    columns_of,
    guarded,
    settings,
)
from ._common import EXIT_OK, err_console
from ._render import stdout_console
from .commands import COMMANDS

EPILOG = """\
examples:
  ctxprec calibrate --warehouse sqlite:///ctxprec_demo.db --labels demo_labels.csv --judge lexical
  ctxprec calibrate --labels labels.csv --judge gpt-4o-mini --judge gpt-4o --compare
  ctxprec calibrate --label-set default --judge gpt-4o-mini

The labels file is CSV with a header and the columns log_id,node,relevant (node = 1-based rank
in the row's retrieval_context; relevant = 1/0, true/false or yes/no). Each judge scores the
labelled rows of the retrieval-log table (all their nodes, as in production); the labelled
nodes' verdicts are compared with the labels (precision, recall, F1, Cohen's kappa) and, for
rows whose every node is labelled, the judge's score with the label-based score (MAE, Spearman
rho). Brackets are 95% bootstrap intervals over cases. Results are stored in
ctxprec_calibrations (one row per judge model, prompt version and label set) and shown by
`ctxprec report`. --compare prints the judges side by side with the difference of the last
against the first and its paired bootstrap interval (an interval without 0 is a real difference).
"""

_TITLES = {
    "precision": "verdict precision",
    "recall": "verdict recall",
    "f1": "verdict F1",
    "kappa": "Cohen's κ",
    "mae": "score MAE (lower = better)",
    "spearman": "score Spearman ρ",
}


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "calibrate",
        help=COMMANDS["calibrate"].help,
        description="Run judge(s) on labelled retrievals and report their agreement with the labels.",
        epilog=EPILOG,
        formatter_class=RAW,
    )
    add_warehouse(p)
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--labels", metavar="FILE.csv", help="CSV with columns log_id,node,relevant")
    src.add_argument(
        "--label-set",
        metavar="NAME",
        help="read the labels from ctxprec_labels (stored by ctxprec labels import) instead of a file",
    )
    p.add_argument(
        "--judge",
        action="append",
        metavar="MODEL",
        default=None,
        help="judge to calibrate (repeatable; default: CTXPREC_JUDGE)",
    )
    p.add_argument("--compare", action="store_true", help="side by side, with the paired difference (needs 2 judges)")
    p.add_argument("--source-table", metavar="NAME", help="retrieval-log table (default: CTXPREC_SOURCE_TABLE)")
    add_columns(p)
    add_flag(p, "--concurrency")
    p.add_argument("--resamples", type=int, default=1000, metavar="N", help="bootstrap resamples (default: 1000)")
    add_flag(
        p,
        "--samples",
        about="calibrate the majority of N sampled answers per node (odd): compare with a calibration at 1 to "
        "see whether sampling brings the judge closer to the labels",
    )
    p.add_argument("--json", action="store_true", help="print the figures as JSON")
    p.set_defaults(func=guarded("calibrate", run))


if TYPE_CHECKING:
    from ..calibration.run import CalibrationResult
    from ..calibration.stats import Estimate


def _fmt(e: Estimate) -> str:
    """``0.812 [0.790–0.833]``: the interval one word, so a narrow column wraps it whole."""
    if e.value is None:
        return "—"
    if e.low is None or e.high is None:
        return f"{e.value:.3f}"
    return f"{e.value:.3f} [{e.low:.3f}–{e.high:.3f}]"


def _row(result: CalibrationResult) -> dict[str, Any]:
    from ..calibration.table import FIGURES

    a = result.agreement
    out: dict[str, Any] = {
        "judge_model": result.judge_model,
        "prompt_version": result.prompt_version,
        "label_set": result.label_set,
        "cases": a.cases,
        "nodes": a.nodes,
        "scored_cases": a.scored_cases,
        "failed_cases": len(result.failed_cases),
        "confusion": {"tp": a.tp, "fp": a.fp, "fn": a.fn, "tn": a.tn},
        "judge_calls": result.judge_calls,
        "cost": result.cost,
    }
    for f in FIGURES:
        e = getattr(a, f)
        out[f] = {"value": e.value, "low": e.low, "high": e.high}
    return out


def run(args: argparse.Namespace) -> int:
    from ..calibration import read_labels
    from ..calibration.run import calibrate, compare
    from ..calibration.table import FIGURES

    s = settings(args)
    warehouse = s.warehouse_url
    check_warehouse(warehouse)
    judges = args.judge or [s.judge]
    for j in judges:
        check_judge(j, s)
    if args.compare and len(judges) != 2:
        raise UsageError("--compare needs exactly two --judge values")
    if args.resamples < 0:
        raise UsageError("--resamples must be >= 0")
    try:
        columns = SourceColumns.from_mapping(merge_columns(s.source_columns, columns_of(args)), source="column mapping")
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    source_table = args.source_table or s.source_table
    if args.label_set is not None:
        from ..calibration.label_table import read_label_set
        from ..calibration.labels import LabelFileError

        try:
            labels = read_label_set(warehouse, args.label_set, source_table=source_table)
        except LabelFileError:
            raise
        except ValueError as exc:  # a bad label set name
            raise UsageError(str(exc)) from None
    else:
        labels = read_labels(args.labels)
    log = None if args.json else (lambda m: err_console.print(m, markup=False, highlight=False))
    results = calibrate(
        warehouse,
        labels,
        judges,
        source_table=source_table,
        columns=columns,
        concurrency=s.concurrency,
        resamples=args.resamples,
        log_fn=log,
        samples=s.judge_samples,
    )
    diff = compare(results[0], results[1], resamples=args.resamples) if args.compare else None
    console = stdout_console()
    if args.json:
        payload: dict[str, Any] = {"calibrations": [_row(r) for r in results]}
        if diff is not None:
            payload["difference"] = {f: {"value": e.value, "low": e.low, "high": e.high} for f, e in diff.items()}
        console.print_json(json.dumps(payload, default=str))
        return EXIT_OK
    # fits an 80-column terminal: the labels never wrap, a value wraps before its interval
    prompts = sorted({r.prompt_version for r in results})
    same = len(prompts) == 1
    table = FitTable(
        Col("figure [95% CI]", justify="left"),
        *[Col(r.judge_model + ("" if same else f" prompt {r.prompt_version}"), wrap=True) for r in results],
        *([Col(f"difference {results[1].judge_model} − {results[0].judge_model}", wrap=True)] if diff else []),
        title=f"judge calibration against {labels.name} ({labels.nodes} node labels)"
        + (f" · prompt {prompts[0]}" if same else ""),
    )
    for f in FIGURES:
        cells = [_fmt(getattr(r.agreement, f)) for r in results]
        if diff is not None:
            cells.append(_fmt(diff[f]))
        table.add_row(_TITLES[f], *cells)
    table.add_row(
        "cases (fully labelled)",
        *[f"{r.agreement.cases} ({r.agreement.scored_cases})" for r in results],
        *([""] if diff else []),
    )
    table.add_row(
        "TP/FP/FN/TN",
        *[f"{r.agreement.tp}/{r.agreement.fp}/{r.agreement.fn}/{r.agreement.tn}" for r in results],
        *([""] if diff else []),
    )
    table.add_row(
        "judge calls, cost",
        *[f"{r.judge_calls}, " + ("unknown" if r.cost is None else f"${r.cost:.4f}") for r in results],
        *([""] if diff else []),
    )
    console.print(table)
    for r in results:
        if r.failed_cases:
            first = next(iter(r.failed_cases.items()))
            console.print(
                f"{r.judge_model}: {len(r.failed_cases)} labelled log id(s) not (fully) used, e.g. "
                f"{first[0]}: {first[1]}",
                markup=False,
                highlight=False,
            )
    console.print("stored in ctxprec_calibrations", markup=False)
    return EXIT_OK
