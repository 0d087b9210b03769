"""Rich tables the commands print: run summaries, a chunk result, an estimate. Each is a
``FitTable``: it fits the terminal it is printed to (an 80-column one included) by leaving out
its least important columns first, never the row's name or date."""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich import box
from rich.console import Console
from rich.markup import escape

from ..monitoring.table_fit import Col, FitTable
from ..pipeline import ChunkResult, RunSummary

if TYPE_CHECKING:
    from ..pipeline.estimate import Estimate

__all__ = [
    "runs_table",
    "run_table",
    "chunk_table",
    "estimate_table",
    "fmt_cost",
    "fmt_num",
    "stdout_console",
    "print_prose",
]


def _width_known() -> bool:
    from ._common import console

    return console.is_terminal or bool(os.environ.get("COLUMNS"))


def stdout_console() -> Console:
    """The console for results: the terminal's width, or 140 columns when piped or logged
    (rich's default of 80 would fold the tables), unless ``COLUMNS`` says otherwise."""
    from ._common import console

    if _width_known():
        return console
    return Console(width=140)


def print_prose(console: Console, text: str, *, style: str | None = None) -> None:
    """A message line: wrapped at word boundaries to the terminal's width (or ``COLUMNS``); one
    line when the output is piped or logged with no width given (for grep and log readers)."""
    console.print(text, markup=False, highlight=False, style=style, soft_wrap=not _width_known())


def fmt_num(v: float | None, spec: str = ".3f") -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "—"
    return format(v, spec)


def fmt_cost(v: float | None) -> str:
    if v is None:
        return "unknown"
    return f"${v:,.4f}" if v < 100 else f"${v:,.2f}"


def _ci(s: RunSummary) -> str:
    if s.ci_low is None or s.ci_high is None:
        return "—"
    return f"{s.ci_low:.3f}–{s.ci_high:.3f}"


_STATUS_STYLE = {"succeeded": "green", "partial": "yellow", "budget_exhausted": "magenta", "failed": "red"}


def status_cell(s: RunSummary) -> str:
    """The run's status as printed, with what it counts: a ``succeeded`` run's bad input rows
    (recorded in ``ctxprec_failures``, not retried) and a ``partial`` run's unaccounted rows."""
    style = _STATUS_STYLE.get(s.status)
    cell = f"[{style}]{s.status}[/]" if style else s.status
    if s.status == "succeeded" and s.input_problems:
        cell += f", [yellow]{s.input_problems} bad input[/]"
    if s.rows_unaccounted:
        cell += f", [red]{s.rows_unaccounted} unaccounted[/]"
    return cell


def runs_table(summaries: Sequence[RunSummary], *, title: str | None = None, show_metric: bool = True) -> FitTable:
    """One row per partition run: counts, mean/median, pass rate, 95% CI of the mean, spend. In a
    narrow terminal cached, median, tokens, CI, scored, cost and metric give way, in that order."""
    table = FitTable(
        Col("partition", justify="left"),
        *([Col("metric", justify="left", drop=7)] if show_metric else []),
        Col("status", justify="left"),
        Col("rows"),
        Col("scored", drop=5),
        Col("cached", drop=1),
        Col("failed"),
        Col("mean"),
        Col("median", drop=2),
        Col("pass rate"),
        Col("95% CI", drop=4),
        Col("tokens", drop=3),
        Col("cost", drop=6),
        title=title,
        box=box.SIMPLE_HEAD,
        pad_edge=False,
    )
    for s in summaries:
        cells = [s.partition_key]
        if show_metric:
            cells.append(s.metric)
        cells.append(status_cell(s))
        cells += [
            str(s.rows_total),
            str(s.rows_scored),
            str(s.rows_cached),
            str(s.rows_failed),
            fmt_num(s.mean_score),
            fmt_num(s.median_score),
            fmt_num(s.pass_rate, ".1%") if s.pass_rate is not None else "—",
            _ci(s),
            f"{(s.prompt_tokens or 0) + (s.completion_tokens or 0):,}",
            fmt_cost(s.cost),
        ]
        table.add_row(*cells)
    return table


def _figures(title: str | None, rows: Sequence[tuple[str, str]], **options: object) -> FitTable:
    """A two-column table (figure, value): the value wraps at word boundaries if it must."""
    table = FitTable(
        Col("figure", justify="left", style="bold"),
        Col("value", wrap=True),
        title=title,
        show_header=False,
        **options,
    )
    for name, value in rows:
        table.add_row(name, value)
    return table


def run_table(s: RunSummary, *, title: str | None = None) -> FitTable:
    """One run as a two-column table (fits an 80-column terminal)."""
    failures = ", ".join(f"{t} {n}" for t, n in sorted(s.failures_by_type.items()))
    rows = [
        ("partition", s.partition_key),
        ("metric", s.metric),
        ("status", status_cell(s)),
        ("rows", f"{s.rows_total:,}"),
        ("scored", f"{s.rows_scored:,}"),
        ("  of which cached / already scored", f"{s.rows_cached:,}"),
        ("failed", f"{s.rows_failed:,}" + (f" ({failures})" if failures else "")),
        ("mean score", fmt_num(s.mean_score)),
        ("median score", fmt_num(s.median_score)),
        (
            "pass rate",
            fmt_num(s.pass_rate, ".1%") + (f" (threshold {s.threshold:g})" if s.threshold is not None else ""),
        ),
        ("95% CI of the mean", _ci(s)),
        ("judge", escape(f"{s.judge_model} · prompt {s.prompt_version}")),  # a cascade's name holds [...]
        ("judge calls", f"{s.judge_calls:,}"),
        ("tokens (prompt / completion)", f"{s.prompt_tokens or 0:,} / {s.completion_tokens or 0:,}"),
        ("cost", fmt_cost(s.cost)),
    ]
    if s.nodes_judged is not None:  # a judge cascade
        rate = fmt_num(s.escalation_rate, ".1%")
        rows += [
            (
                "nodes escalated",
                f"{s.nodes_escalated or 0:,} of {s.nodes_judged:,} ({rate}, below C={fmt_num(s.escalate_below)})",
            ),
            ("cost: cheap / strong judge", f"{fmt_cost(s.cheap_cost)} / {fmt_cost(s.strong_cost)}"),
        ]
    if s.rows_without_id:
        rows.append(("[yellow]rows without a recordable id (not scored)[/]", f"{s.rows_without_id:,}"))
    if s.rows_unpartitioned:
        rows.append(("[yellow]table rows in no partition[/]", f"{s.rows_unpartitioned:,}"))
    return _figures(title, rows, box=box.SIMPLE_HEAD, pad_edge=False)


def chunk_table(result: ChunkResult, *, run_id: str) -> FitTable:
    table = FitTable(
        Col("rows"),
        Col("scored"),
        Col("cached", drop=2),
        Col("failed"),
        Col("judge calls", drop=3),
        Col("tokens", drop=1),
        Col("cost"),
        title=f"chunk {result.index} of {result.partition_key} (run {run_id})",
    )
    table.add_row(
        str(result.rows_total),
        str(result.rows_scored),
        str(result.rows_cached),
        str(result.rows_failed),
        str(result.judge_calls),
        f"{result.prompt_tokens + result.completion_tokens:,}",
        fmt_cost(result.cost),
    )
    return table


def estimate_table(e: Estimate) -> FitTable:
    """One partition's estimate as a two-column table (figure, value)."""
    judge = escape(e.judge_model) + (" (offline)" if e.offline_judge else "")
    price = (
        f"${e.price_per_million[0]:g} / ${e.price_per_million[1]:g} per 1M in/out tokens"
        if e.price_per_million
        else "unknown"
    )
    rows = [
        ("judge", judge),
        ("prompt version", e.prompt_version),
        ("price", price),
        ("rows in partition", f"{e.rows_total:,}"),
        ("already scored (skipped)", f"{e.rows_already_scored:,}"),
        ("invalid (no judge call)", f"{e.rows_invalid:,}"),
        ("rows to score", f"{e.rows_to_score:,}"),
        ("nodes", f"{e.nodes_total:,}"),
        ("nodes cached (or repeated)", f"{e.nodes_cached:,}"),
        ("nodes to judge", f"{e.nodes_to_judge:,}"),
        ("judge calls", f"{e.judge_calls:,}"),
        *([("sampled answers per node", f"{e.samples} (n={e.samples} per request)")] if e.samples > 1 else []),
        ("prompt tokens", f"{e.prompt_tokens:,}"),
        ("completion tokens", f"{e.completion_tokens:,}"),
        ("estimated cost", fmt_cost(e.cost)),
        ("estimated cost, batch mode", fmt_cost(getattr(e, "batch_cost", None))),
        *_cascade_rows(getattr(e, "cascade", None)),
    ]
    return _figures(f"estimate · {e.partition_key} · {e.metric}", rows)


def _cascade_rows(c: dict | None) -> list[tuple[str, str]]:
    """A cascade's part of an estimate: the split of the cost and what it rests on."""
    if not c:
        return []
    rate = c["escalation_rate"]
    shown = "unknown (all nodes priced)" if rate is None else f"{rate:.1%} ({c['escalation_rate_source']})"
    return [
        ("strong judge", str(c["strong_model"])),
        ("expected escalation", shown),
        ("nodes to the strong judge", f"{c['nodes_escalated']:,}"),
        ("cost: cheap judge", fmt_cost(c["cheap_cost"])),
        ("cost: strong judge", fmt_cost(c["strong_cost"])),
        (
            "cost: calibration",
            f"{fmt_cost(c['calibration_cost'])} ({c['calibration_nodes']} nodes x 2 judges)"
            if c["calibration_nodes"]
            else "none (a stored calibration is reused, or C is given)",
        ),
        ("strong judge alone would cost", fmt_cost(c["strong_only_cost"])),
    ]
