"""Recent partitions with their figures and alerts: ``trend_results``, ``load_trend``,
``format_trend_table``.

The window is ``days`` calendar days ending at ``end`` (default: the latest partition with any
row), never before the first partition with data. Days without any row are kept (rows = 0), so a
silent day shows up, and every day is checked with the same rules as ``ctxprec check``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import pandas as pd
from sqlalchemy.engine import Engine

from ..warehouse.source import parse_partition_key
from .check import DEFAULT_METRIC, CheckResult, check_history, lookback
from .corrected import attach_corrected
from .history import History, load_history, partition_range
from .population import engine_scope
from .rules import AlertRules
from .stats import sparkline
from .table_fit import Col, FitTable

__all__ = ["trend_results", "load_trend", "results_frame", "format_trend_table", "staleness_note", "TREND_COLUMNS"]

TREND_COLUMNS = [
    "partition_key", "n", "mean", "median", "ci_low", "ci_high", "pass_rate", "rows", "rows_failed",
    "failure_rate", "run_status", "cost", "baseline_mean", "drop", "p_value", "regression", "alerts",
    "alert_messages", "sampled", "sample_rate", "rows_total",
    "corrected_mean", "corrected_ci_low", "corrected_ci_high", "labelled_rows",
]  # fmt: skip


def trend_results(
    engine_or_url: Engine | str,
    *,
    metric: str = DEFAULT_METRIC,
    days: int = 14,
    end: str | None = None,
    rules: AlertRules | None = None,
    judge_model: str | None = None,
    prompt_version: str | None = None,
    source_table: str | None = None,
    mapping: str | None = None,
) -> tuple[History, list[CheckResult]]:
    """Check every day of the window; return the loaded history and one result per day (oldest first)."""
    if days < 1:
        raise ValueError(f"days must be at least 1, got {days}")
    if end is not None:
        parse_partition_key(end)
    rules = rules or AlertRules()
    with engine_scope(engine_or_url) as engine:
        index = load_history(
            engine,
            metric,
            up_to=end,
            judge_model=judge_model,
            prompt_version=prompt_version,
            source_table=source_table,
            mapping=mapping,
        )
        known = sorted(set(index.seen_keys) | set(index.scored_keys))
        if end is None:
            if not known:
                return index, []
            end = known[-1]
        first = known[0] if known else end
        keys = partition_range(end, days, start=min(first, end))
        history = load_history(
            engine,
            metric,
            keys=keys,
            baseline_for=keys,
            baseline_partitions=rules.baseline_partitions,
            lookback=lookback(rules),
            population=index.population,
        )
        results = [check_history(history, k, rules) for k in keys]
        attach_corrected(engine, history, results, rules)
    return history, results


def results_frame(results: Sequence[CheckResult]) -> pd.DataFrame:
    """One row per partition (see ``TREND_COLUMNS``); ``alerts`` lists the fired rule names."""
    rows = []
    for r in results:
        f = r.figures.to_dict()
        rows.append(
            {
                **{k: f.get(k) for k in TREND_COLUMNS if k in f},
                "baseline_mean": r.baseline.summary.mean,
                "drop": r.regression.drop,
                "p_value": r.regression.p_value,
                "regression": r.regression.verdict,
                "alerts": [a.rule for a in r.alerts],
                "alert_messages": [a.message for a in r.alerts],
                **_corrected_columns(r),
            }
        )
    df = pd.DataFrame(rows, columns=TREND_COLUMNS)
    for col in ("n", "rows", "rows_failed"):
        df[col] = df[col].astype("int64")
    df["sampled"] = df["sampled"].fillna(False).astype(bool)
    df["labelled_rows"] = pd.to_numeric(df["labelled_rows"], errors="coerce").fillna(0).astype("int64")
    df["rows_total"] = pd.to_numeric(df["rows_total"], errors="coerce").astype("float64")
    for col in (
        "mean",
        "median",
        "ci_low",
        "ci_high",
        "pass_rate",
        "failure_rate",
        "cost",
        "sample_rate",
        "baseline_mean",
        "drop",
        "p_value",
        "corrected_mean",
        "corrected_ci_low",
        "corrected_ci_high",
    ):
        df[col] = pd.to_numeric(df[col], errors="coerce").astype("float64")
    return df


def _corrected_columns(r: CheckResult) -> dict[str, object]:
    """The label-corrected mean and its 95% interval (None: no or too few labelled rows)."""
    c = r.corrected
    return {
        "corrected_mean": c.mean if c is not None else None,
        "corrected_ci_low": c.ci_low if c is not None else None,
        "corrected_ci_high": c.ci_high if c is not None else None,
        "labelled_rows": c.labelled_rows if c is not None else 0,
    }


def load_trend(
    engine_or_url: Engine | str,
    *,
    metric: str = DEFAULT_METRIC,
    days: int = 14,
    end: str | None = None,
    rules: AlertRules | None = None,
    judge_model: str | None = None,
    prompt_version: str | None = None,
    source_table: str | None = None,
    mapping: str | None = None,
) -> pd.DataFrame:
    """Per-partition figures and alerts of the last ``days`` days, as a DataFrame.

    ``df.attrs`` holds ``metric``, ``judge_model``, ``prompt_version``, ``source_table`` and
    ``mapping`` (the population; ``source_table=None`` / ``mapping=None``: the input table / column
    mapping of the most recent score).
    """
    history, results = trend_results(
        engine_or_url, metric=metric, days=days, end=end, rules=rules,
        judge_model=judge_model, prompt_version=prompt_version, source_table=source_table, mapping=mapping,
    )  # fmt: skip
    df = results_frame(results)
    pop = history.population
    df.attrs.update(
        metric=metric,
        judge_model=pop.judge_model if pop else None,
        prompt_version=pop.prompt_version if pop else None,
        source_table=pop.source_table if pop else None,
        mapping=pop.mapping if pop else None,
    )
    return df


def staleness_note(latest_key: str | None, *, today: dt.date | None = None) -> str | None:
    """A warning when the newest partition with data is older than yesterday (UTC), else None.

    The trend window ends at the latest partition with data, so a pipeline that stopped would
    otherwise look healthy; ``ctxprec check --partition <yesterday>`` raises the volume alert.
    """
    if not latest_key:
        return None
    today = today or dt.datetime.now(dt.UTC).date()
    lag = (today - dt.timedelta(days=1) - parse_partition_key(latest_key)).days
    if lag <= 0:
        return None
    return (
        f"the latest partition with data is {latest_key}, {lag} day(s) before yesterday (UTC): "
        "no rows since then; is the pipeline running?"
    )


def _fmt(v: float | None, spec: str, missing: str = "—") -> str:
    return missing if v is None or pd.isna(v) else format(v, spec)


_EIGHTHS = " ▏▎▍▌▋▊▉"


def _bar(value: float | None, width: int = 10) -> str:
    """A horizontal bar of ``value`` in [0, 1], ``width`` characters at full scale."""
    if value is None:
        return ""
    eighths = int(round(max(0.0, min(1.0, value)) * width * 8))
    full, rest = divmod(eighths, 8)
    return ("█" * full + (_EIGHTHS[rest] if rest else "")).ljust(width)


def _corrected_cell(row) -> str:
    if pd.isna(row.corrected_mean):
        return f"({row.labelled_rows} labelled)" if row.labelled_rows else ""
    half = max(row.corrected_mean - row.corrected_ci_low, row.corrected_ci_high - row.corrected_mean)
    return f"{row.corrected_mean:.3f} ± {half:.3f} ({row.labelled_rows})"


def format_trend_table(df: pd.DataFrame, *, title: str | None = None) -> FitTable:
    """A rich table of ``load_trend``'s frame: n, mean ± CI, pass rate, volume, alerts, sparkline,
    and the label-corrected mean where a day has labels. It fits the console it is printed to
    (``table_fit``): in a narrow terminal the mean bar, median, rows, failures, pass rate and the
    corrected mean give way, in that order; the date and the mean ± CI never."""
    metric = df.attrs.get("metric", DEFAULT_METRIC)
    pop = df.attrs.get("judge_model")
    caption_bits = [f"judge {pop} / prompt {df.attrs.get('prompt_version')}"] if pop else []
    means = [None if pd.isna(v) else float(v) for v in df["mean"]] if len(df) else []
    if means:
        finite = [m for m in means if m is not None]
        lo, hi = (max(0.0, min(finite) - 0.1), min(1.0, max(finite) + 0.1)) if finite else (0.0, 1.0)
        caption_bits.append(f"mean trend {sparkline(means, lo=lo, hi=hi)} ({lo:.2f}–{hi:.2f})")
    if len(df) and bool(df["sampled"].any()):
        caption_bits.append("n* = a sample of the partition's rows was scored (see the notes)")
    corrected = len(df) > 0 and bool(df["corrected_mean"].notna().any())
    if corrected:
        caption_bits.append("corrected = the mean corrected with gold labels ± 95% CI (labelled rows)")
    table = FitTable(
        Col("partition", justify="left"),
        Col("n"),
        Col("mean ± 95% CI"),
        Col("median", drop=2),
        Col("pass rate", drop=5),
        Col("rows", drop=3),
        Col("failed", drop=4),
        *([Col("corrected (labels)", drop=6)] if corrected else []),
        Col("mean bar", justify="left", drop=1),
        Col("alerts", justify="left", wrap=True),
        title=title or f"{metric}: last {len(df)} partitions",
        caption="  ·  ".join(caption_bits) or None,
    )
    for row in df.itertuples(index=False):
        if pd.isna(row.mean):
            mean = "—"
        elif pd.isna(row.ci_low):
            mean = f"{row.mean:.3f}"
        else:
            mean = f"{row.mean:.3f} ± {max(row.mean - row.ci_low, row.ci_high - row.mean):.3f}"
        failed = f"{row.rows_failed}" + (
            f" ({row.failure_rate:.0%})" if row.rows_failed and not pd.isna(row.failure_rate) else ""
        )
        spark = _bar(None if pd.isna(row.mean) else float(row.mean))
        alerts = ", ".join(row.alerts) if row.alerts else ""
        style = "red" if row.alerts else None
        n_text = f"{row.n}*" if row.sampled else str(row.n)
        extra = [_corrected_cell(row)] if corrected else []
        table.add_row(
            str(row.partition_key), n_text, mean, _fmt(row.median, ".3f"), _fmt(row.pass_rate, ".1%"),
            str(row.rows), failed, *extra, spark, alerts, style=style,
        )  # fmt: skip
    return table
