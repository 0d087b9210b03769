"""Rich tables of the monitoring commands: ``check``'s figures, per-segment checks (``check --by``,
``trend --by``) and the sampled partitions of a trend."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.text import Text

from ..monitoring.table_fit import Col, FitTable
from ._render import print_prose, stdout_console

if TYPE_CHECKING:
    from ..monitoring import CheckResult
    from ..monitoring.segments import SegmentCheck


def _f(v: float | None, spec: str = ".3f") -> str:
    return "—" if v is None else format(v, spec)


def figures_table(result: CheckResult) -> FitTable:
    s, b = result.figures.summary, result.baseline.summary
    t = FitTable(
        Col("", justify="left"),
        Col("partition"),
        Col(f"baseline ({len(result.baseline.partitions)} partitions)"),
        title=f"{result.metric} · {result.partition_key}",
    )

    def f3(v):
        return "—" if v is None else f"{v:.3f}"

    def pc(v):
        return "—" if v is None else f"{v:.1%}"

    ci = "—" if s.ci_low is None else f"{s.ci_low:.3f}–{s.ci_high:.3f}"
    bci = "—" if b.ci_low is None else f"{b.ci_low:.3f}–{b.ci_high:.3f}"
    t.add_row("n (scored cases)", str(s.n), str(b.n))
    label = result.figures.sample_label()
    if label:  # the figures are the sample's: say so next to them
        t.add_row("sample", label, "")
    t.add_row("mean", f3(s.mean), f3(b.mean))
    t.add_row("95% CI", ci, bci)
    t.add_row("median", f3(s.median), f3(b.median))
    t.add_row("pass rate", pc(s.pass_rate), pc(b.pass_rate))
    med = result.baseline.median_rows
    t.add_row("rows (failed)", f"{result.figures.rows} ({result.figures.rows_failed})",
              "—" if med is None else f"median {med:g}")  # fmt: skip
    reg = result.regression
    p = "" if reg.p_value is None else f", p={reg.p_value:.3g}"
    t.add_row("regression test", f"{reg.verdict}{p}", "" if reg.drop is None else f"drop {reg.drop:+.3f}")
    return t


def sample_notes(df: Any) -> list[str]:
    """One line per sampled partition of the trend: its sample size, rows and CI."""
    out = []
    for row in df.itertuples(index=False):
        if getattr(row, "sampled", False):
            ci = (
                "" if row.ci_low != row.ci_low else f", mean {row.mean:.3f} [95% CI {row.ci_low:.3f}-{row.ci_high:.3f}]"
            )
            total = "" if row.rows_total != row.rows_total else f" of {int(row.rows_total):,} rows"
            rate = "" if row.sample_rate != row.sample_rate else f" (rate {row.sample_rate:g})"
            out.append(f"{row.partition_key} is a sample: {row.n:,} scored{total}{rate}{ci}")
    return out


def segment_check_table(check: SegmentCheck) -> FitTable:
    """One row per segment value, worst delta first. In a narrow terminal p, baseline, Holm p and
    rows give way, in that order; the segment's name never."""
    t = FitTable(
        Col(check.by, justify="left"),
        Col("rows", drop=4),
        Col("mean"),
        Col("baseline", drop=2),
        Col("delta"),
        Col("p", drop=1),
        Col("Holm p", drop=3),
        Col("status", justify="left"),
        title=f"{check.metric} · {check.partition_key} by {check.by}",
    )
    for s in check.by_delta():
        style = "red" if s.status == "alert" else ("dim" if s.status == "too few rows" else None)
        t.add_row(
            Text(s.label), str(s.rows), _f(s.mean), _f(s.baseline_mean), _f(s.delta, "+.3f"),
            _f(s.p_value, ".2g"), _f(s.p_adjusted, ".2g"), s.status, style=style,
        )  # fmt: skip
    return t


def print_segment_check(check: SegmentCheck) -> None:
    console = stdout_console()
    console.print(segment_check_table(check))
    for s in check.alerting:
        for a in s.alerts:
            style = "bold red" if a.severity == "error" else "bold yellow"
            console.print(Text.assemble(("ALERT", style), f" [{a.severity}] {a.rule}: {a.message}"))
    few = check.too_few_line()
    if few:
        print_prose(console, f"note: {few}")


def segment_trend_table(by: str, checks: Sequence[SegmentCheck]) -> FitTable:
    """One row per segment value: the latest day's figures, the daily means, the days it alerted.
    In a narrow terminal baseline, Holm p, rows and the daily means give way, in that order."""
    from ..monitoring.stats import sparkline

    last = checks[-1]
    t = FitTable(
        Col(by, justify="left"),
        Col("rows", drop=3),
        Col("mean"),
        Col("baseline", drop=1),
        Col("delta"),
        Col("Holm p", drop=2),
        Col("daily mean", justify="left", drop=4),
        Col("alert days", justify="left", wrap=True),
        title=f"{last.metric} by {by}: {checks[0].partition_key} → {last.partition_key}",
    )
    values = {s.value: s.label for c in checks for s in c.segments}
    for value in sorted(values, key=lambda v: (v is not None, v or "")):
        per_day = [next((s for s in c.segments if s.value == value), None) for c in checks]
        latest = per_day[-1]
        means = [s.mean if s is not None else None for s in per_day]
        alert_days = [c.partition_key for c, s in zip(checks, per_day) if s is not None and s.status == "alert"]
        t.add_row(
            Text(values[value]), str(latest.rows) if latest else "0", _f(latest.mean if latest else None),
            _f(latest.baseline_mean if latest else None), _f(latest.delta if latest else None, "+.3f"),
            _f(latest.p_adjusted if latest else None, ".2g"), sparkline(means, lo=0.0, hi=1.0),
            ", ".join(alert_days), style="red" if alert_days and alert_days[-1] == last.partition_key else None,
        )  # fmt: skip
    return t
