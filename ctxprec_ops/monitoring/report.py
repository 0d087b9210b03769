"""The HTML report: one self-contained file (inline CSS and SVG, no script, no external asset).

``render_report(engine_or_url, out_path)`` checks every day of the window with the alert rules,
draws the daily mean with its 95% CI band and threshold line, the pass rate and the volume with
alert markers, and lists the worst-scored cases of the latest scored partition with their node
verdicts. Node texts and reasons are untrusted: Jinja autoescaping is on for the whole page.
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined
from markupsafe import Markup
from sqlalchemy.engine import Engine

from ..errors import CtxPrecError
from ..secrets import redact
from ..warehouse.engine import display_url
from ..warehouse.identifiers import split_table_name
from ..warehouse.schema import existing_output_tables
from .cases import case_threshold, load_worst_cases
from .charts import COLORS, NARROW_H, NARROW_W, H, HLine, Overlay, W, bar_chart, line_chart
from .check import DEFAULT_METRIC, CheckResult
from .history import History
from .population import engine_scope
from .rules import AlertRules
from .trend import staleness_note, trend_results

__all__ = ["render_report", "render_report_html", "report_context"]

_env = Environment(
    loader=PackageLoader("ctxprec_ops.monitoring", "templates"),
    autoescape=True,
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{v:.1%}"


def _num(v: float | None, spec: str = ".3f") -> str:
    return "—" if v is None else format(v, spec)


_env.filters["pct"] = _pct
_env.filters["num"] = _num


def _markers(results: Sequence[CheckResult], kinds: set[str] | None = None) -> dict[int, tuple[str, str]]:
    out = {}
    for i, r in enumerate(results):
        alerts = [a for a in r.alerts if kinds is None or a.kind in kinds]
        if alerts:
            severity = "error" if any(a.severity == "error" for a in alerts) else "warn"
            out[i] = (severity, "\n".join(a.message for a in alerts))
    return out


HALF_W = 540  # the pass-rate and volume charts sit side by side on desktop


def _charts(
    days: list[str],
    results: Sequence[CheckResult],
    rules: AlertRules,
    hl_mean: list[HLine],
    hl_pass: list[HLine],
    metric: str,
    *,
    narrow: bool = False,
) -> dict[str, Markup]:
    """The three charts, wide (desktop) or narrow (phones: fewer day labels, a taller aspect)."""
    summ = [r.figures.summary for r in results]
    width, height = (NARROW_W, NARROW_H) if narrow else (W, H)
    half_width = NARROW_W if narrow else HALF_W
    return {
        "mean": line_chart(
            days, [s.mean for s in summ], title=f"Daily mean {metric} with 95% CI",
            band=([s.ci_low for s in summ], [s.ci_high for s in summ]),
            hlines=hl_mean, markers=_markers(results), width=width, height=height,
            overlay=_corrected_overlay(results),
        ),
        "pass_rate": line_chart(
            days, [s.pass_rate for s in summ], title="Daily pass rate", hlines=hl_pass,
            markers=_markers(results, {"threshold"}), y_range=(0.0, 1.0), pct=True, value_label="pass rate",
            width=half_width, height=height,
        ),
        "volume": bar_chart(
            days,
            [
                ("scored", [float(r.figures.rows - r.figures.rows_failed) for r in results], COLORS["bar"]),
                ("failed", [float(r.figures.rows_failed) for r in results], COLORS["failed"]),
            ],
            title="Rows per partition (scored and failed)",
            markers=_markers(results, {"volume"}),
            width=half_width,
            height=height,
        ),
    }  # fmt: skip


def _corrected_overlay(results: Sequence[CheckResult]) -> Overlay | None:
    """The label-corrected mean and its 95% interval per day (None: no day has one)."""
    ests = [r.corrected if r.corrected is not None and r.corrected.available else None for r in results]
    if not any(ests):
        return None
    return Overlay(
        [e.mean if e else None for e in ests],
        [e.ci_low if e else None for e in ests],
        [e.ci_high if e else None for e in ests],
        "corrected mean",
    )


def report_context(
    history: History,
    results: Sequence[CheckResult],
    rules: AlertRules,
    *,
    worst_cases: Sequence[dict[str, Any]] = (),
    worst_partition: str | None = None,
    threshold: float | None = None,
    warehouse: str = "",
    title: str | None = None,
    explicit_end: bool = False,
    segment_checks: Sequence[Any] = (),
    comparison: Any = None,
) -> dict[str, Any]:
    """Everything the template needs (pure: charts are rendered here)."""
    metric = history.metric
    days = [r.partition_key for r in results]
    hl_mean = []
    if rules.min_mean is not None:
        hl_mean.append(HLine(rules.min_mean, "min_mean"))
    if threshold is not None:
        hl_mean.append(HLine(threshold, "case threshold", color="#6b7280", dash="2 4"))
    hl_pass = [HLine(rules.min_pass_rate, "min_pass_rate")] if rules.min_pass_rate is not None else []
    charts = _charts(days, results, rules, hl_mean, hl_pass, metric)
    charts_narrow = _charts(days, results, rules, hl_mean, hl_pass, metric, narrow=True)
    latest = results[-1] if results else None
    stale = staleness_note(latest.partition_key) if latest is not None and not explicit_end else None
    window_alerts = [(r.partition_key, a) for r in reversed(results) for a in r.alerts]
    pop = history.population
    return {
        "title": title or "Retrieval quality report",
        "metric": metric,
        "judge_model": pop.judge_model if pop else None,
        "prompt_version": pop.prompt_version if pop else None,
        "warehouse": redact(warehouse),
        "generated_at": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "days": days,
        "results": list(results),
        "latest": latest,
        "charts": charts,
        "charts_narrow": charts_narrow,
        "window_alerts": window_alerts,
        "alert_days": [r.partition_key for r in results if r.alerts],
        "rules": rules,
        "threshold": threshold,
        "worst_cases": list(worst_cases),
        "worst_partition": worst_partition,
        "stale": stale,
        "segment_checks": list(segment_checks),
        "comparison": comparison,
        "corrected_days": [r for r in results if r.corrected is not None],
        "audits": [],
    }


def render_report_html(context: dict[str, Any]) -> str:
    return _env.get_template("report.html.j2").render(**context)


def _calibrations(engine: Engine) -> list[dict[str, Any]]:
    """The stored judge calibrations (``ctxprec calibrate``), newest first; none on any error."""
    from ..calibration.table import read_calibrations

    try:
        return read_calibrations(engine)[:20]
    except Exception as exc:  # a bonus section: never fails the report
        logging.getLogger("ctxprec_ops.monitoring").warning("report: calibrations not shown: %s", type(exc).__name__)
        return []


def _audits(engine: Engine, metric: str, history: History, partitions: list[str]) -> list[dict[str, Any]]:
    """The latest position audit of each partition of the window for the report's judge; none on
    any error."""
    from ..calibration.audit_table import read_audits

    pop = history.population
    if pop is None or not partitions:
        return []
    try:
        rows = read_audits(engine, partitions=partitions, judge_model=pop.judge_model, metric=metric)
    except Exception as exc:  # a bonus section: never fails the report
        logging.getLogger("ctxprec_ops.monitoring").warning("report: audits not shown: %s", type(exc).__name__)
        return []
    latest: dict[str, dict[str, Any]] = {}
    for r in rows:  # newest first
        latest.setdefault(str(r["partition_key"]), r)
    return [latest[k] for k in sorted(latest, reverse=True)]


def _flip_rates(engine: Engine, metric: str, history: History, partitions: list[str]) -> list[Any]:
    """Self-consistency figures of a population judged with samples > 1; none on any error."""
    from .flips import flip_rates

    try:
        return flip_rates(engine, metric, history.population, partitions)
    except Exception as exc:  # a bonus section: never fails the report
        logging.getLogger("ctxprec_ops.monitoring").warning("report: flip rates not shown: %s", type(exc).__name__)
        return []


def _cascade(engine: Engine, history: History, partitions: list[str]) -> dict[str, Any] | None:
    """A cascade population's per-day figures and its latest calibration; None on any error."""
    from ..warehouse.cascades import read_cascades
    from .cascades import cascade_days, cascade_of

    about = cascade_of(history.population)
    if about is None:
        return None
    try:
        days = cascade_days(engine, history.population, partitions)
        latest = next(
            (
                c
                for c in read_cascades(engine)
                if (c["cheap_model"], c["strong_model"]) == (about["cheap"], about["strong"])
            ),
            None,
        )
    except Exception as exc:  # a bonus section: never fails the report
        logging.getLogger("ctxprec_ops.monitoring").warning("report: cascade not shown: %s", type(exc).__name__)
        return None
    return {**about, "days": days, "calibration": latest}


def _segment_sections(
    engine: Engine, history: History, by: Sequence[str], partition: str | None, rules: AlertRules, min_rows: int
) -> list[Any]:
    if not by or partition is None:
        return []
    from .segments import segment_checks

    return [segment_checks(engine, history, col, [partition], rules, min_rows=min_rows)[0] for col in by]


def _reference_free(engine: Engine, metric: str, history: History, partitions: list[str]) -> int:
    """How many of the window's scores were reference-free (a spans source judged against each
    retrieval's own answer, ``ctxprec_scores.reference = 'answer'``); 0 on any error."""
    import sqlalchemy as sa

    pop = history.population
    try:
        tables = existing_output_tables(engine)
        t = tables.scores
        if pop is None or not partitions or "reference" not in tables.scores_columns:
            return 0
        where = [t.c.metric == metric, pop.where(t), t.c.partition_key.in_(partitions)]
        with engine.connect() as conn:
            return int(conn.execute(sa.select(sa.func.count()).where(*where, t.c.reference == "answer")).scalar_one())
    except Exception as exc:  # a note: never fails the report
        logging.getLogger("ctxprec_ops.monitoring").warning("report: reference note not shown: %s", type(exc).__name__)
        return 0


def render_report(
    engine_or_url: Engine | str,
    out_path: str | os.PathLike[str],
    *,
    metric: str = DEFAULT_METRIC,
    days: int = 30,
    end: str | None = None,
    rules: AlertRules | None = None,
    min_mean: float | None = None,
    min_pass_rate: float | None = None,
    worst: int = 10,
    source_table: str | None = None,
    mapping: str | None = None,
    columns: Mapping[str, str] | None = None,
    judge_model: str | None = None,
    prompt_version: str | None = None,
    title: str | None = None,
    by: Sequence[str] = (),
    min_rows: int = 20,
    comparison: Mapping[str, Any] | None = None,
) -> Path:
    """Write the report for the last ``days`` partitions to ``out_path``; return its path.

    ``by``: segment columns whose values get a section each (the latest scored partition's
    per-segment check, worst delta first). ``comparison``: the keyword arguments of
    ``monitoring.compare`` (``partition``, ``by``, ``baseline``, ``candidate``, ``until``,
    ``pair_on``, ``within``, ``alpha``) for a comparison table (``partition`` defaults to the
    latest scored partition).

    ``min_mean``/``min_pass_rate`` are shortcuts for the same fields of ``rules``. The worst
    cases' texts come from ``source_table`` (default: the input table of the most recent score,
    else the metric's default table) read through ``columns`` (logical name -> column, as for
    scoring). ``source_table`` also chooses whose scores are reported (two input tables are
    different populations), and so does ``mapping`` (the fingerprint of the column mapping they
    were read with, ``pipeline.mapping``; default: that of the most recent score).
    """
    rules = rules or AlertRules(min_mean=min_mean, min_pass_rate=min_pass_rate)
    out = Path(out_path)
    if out.suffix.lower() not in (".html", ".htm"):
        raise ReportPathError(f"the report is an HTML file: --out should end in .html, got {out.name!r}")
    if not out.parent.is_dir():
        raise ReportPathError(f"the directory of {str(out)!r} does not exist")
    if source_table is not None:
        split_table_name(source_table, None, "source table name")  # IdentifierError, before any work
    with engine_scope(engine_or_url) as engine:
        history, results = trend_results(
            engine, metric=metric, days=days, end=end, rules=rules,
            judge_model=judge_model, prompt_version=prompt_version, source_table=source_table, mapping=mapping,
        )  # fmt: skip
        scored = [r.partition_key for r in results if r.figures.summary.n]
        worst_partition = scored[-1] if scored else None
        cases: list[dict[str, Any]] = []
        threshold = None
        if worst_partition is not None:
            cases = load_worst_cases(
                engine,
                metric,
                history.population,
                worst_partition,
                limit=worst,
                source_table=source_table,
                columns=columns,
            )
            threshold = case_threshold(engine, metric, history.population, worst_partition)
        seg = _segment_sections(engine, history, by, worst_partition, rules, min_rows)
        cmp = None
        if comparison is not None and (comparison.get("partition") or worst_partition):
            from .compare import compare

            comparison = {"partition": worst_partition, **{k: v for k, v in comparison.items() if v is not None}}
            pop = history.population  # the report's population, whatever the comparison's range
            who: dict[str, Any] = (
                {"judge_model": pop.judge_model, "prompt_version": pop.prompt_version, "mapping": pop.mapping}
                if pop
                else {}
            )
            cmp = compare(engine, metric=metric, source_table=source_table, **who, **comparison)
        ctx = report_context(
            history, results, rules, worst_cases=cases, worst_partition=worst_partition,
            threshold=threshold, warehouse=display_url(engine), title=title, explicit_end=end is not None,
            segment_checks=seg, comparison=cmp,
        )  # fmt: skip
        ctx["calibrations"] = _calibrations(engine)
        ctx["flip_rates"] = _flip_rates(engine, metric, history, scored)
        ctx["cascade"] = _cascade(engine, history, [r.partition_key for r in results])
        ctx["audits"] = _audits(engine, metric, history, [r.partition_key for r in results])
        ctx["reference_free"] = _reference_free(engine, metric, history, scored)
    html = render_report_html(ctx)
    # write atomically: a reader (or a browser refresh) never sees half a report
    try:
        fd, tmp = tempfile.mkstemp(prefix=".report-", suffix=".html", dir=out.parent)
    except OSError as exc:  # the path the caller gave, not the temporary file's name
        raise ReportPathError(f"cannot write the report {str(out)!r}: {(exc.strerror or str(exc)).lower()}") from None
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(html)
        os.chmod(tmp, 0o644)
        os.replace(tmp, out)
    except OSError as exc:
        Path(tmp).unlink(missing_ok=True)
        raise ReportPathError(f"cannot write the report {str(out)!r}: {(exc.strerror or str(exc)).lower()}") from None
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return out


class ReportPathError(CtxPrecError, ValueError):
    """The report cannot be written where it was asked to be (not retried: the path is the fix)."""

    error_type = "usage"
    retryable = False
