"""``ctxprec trend``, ``ctxprec check``, ``ctxprec report``: monitoring over the output tables."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING, Any

from rich.text import Text

from ..errors import IdentifierError
from ..pipeline.columns import merge_columns
from ._args import (
    RAW,
    UsageError,
    add_columns,
    add_flag,
    add_metric,
    add_warehouse,
    check_warehouse,
    columns_of,
    guarded,
    metric_of,
    settings,
)
from ._args import check_partition as check_partition_key
from ._args import mapping_of_args as _mapping
from ._common import EXIT_ALERT, EXIT_OK, err_console
from ._render import print_prose, stdout_console
from .commands import COMMANDS

if TYPE_CHECKING:  # the monitoring stack (pandas, scipy) is imported by the commands that use it
    from ..monitoring import AlertRules

RULES_HELP = """\
alert rules:
  threshold   mean < --min-mean, pass rate < --min-pass-rate           (severity error)
  regression  mean more than --min-drop below the pooled per-case scores of the previous
              --baseline-partitions scored partitions AND one-sided Welch t-test p < --alpha;
              no verdict with fewer than 2 baseline partitions / 20 cases  (warn).
              Partitions that fired this rule are left out of later baselines
              (--keep-regressions-in-baseline to pool them anyway)
  volume      rows < --volume-ratio x the baseline median rows per partition; a partition
              with no rows at all is checked too                            (warn)
  failure     failed rows / rows > --max-failure-rate                       (warn)
Labels: where rows of a partition drawn with `ctxprec labels sample` are fully labelled
(`ctxprec labels import`), the mean corrected with them is shown with its 95% CI; with
--use-corrected the threshold rule's min_mean compares it (>= 10 labelled rows).
Figures use one judge model / prompt version (default: the most recent), so a judge change
never mixes populations. Each rule's flag defaults to its CTXPREC_* variable (docs/configuration.md).
"""

#: what the read commands need (trend, check, report, compare)
READS_ONLY = (
    "privileges: read access only (SELECT on the ctxprec_* tables); a SQLite file is opened read-only and "
    "never written\n"
)

TREND_EPILOG = (
    """\
examples:
  ctxprec trend --warehouse sqlite:///ctxprec.db
  ctxprec trend --days 30 --metric turn_contextual_precision --min-mean 0.6

"""
    + READS_ONLY
)

CHECK_EPILOG = (
    """\
examples:
  ctxprec check --warehouse sqlite:///ctxprec.db --partition 2026-11-28
  ctxprec check --partition 2026-11-28 --min-mean 0.6 --min-pass-rate 0.7 --webhook https://hooks.slack.com/services/...
  ctxprec check --partition 2026-11-28 --json > check.json

exit codes:
  0  no alert    1  error (warehouse, tables)    2  bad arguments    3  an alert fired

"""
    + READS_ONLY
    + "\n"
    + RULES_HELP
    + """Delivery (only when an alert fires): --webhook or CTXPREC_ALERT_WEBHOOK (Slack-compatible JSON);
--email-to or CTXPREC_ALERT_EMAIL_TO with CTXPREC_SMTP_HOST/PORT/USER/PASSWORD/FROM/STARTTLS.
"""
)

REPORT_EPILOG = """\
examples:
  ctxprec report --warehouse sqlite:///ctxprec.db --out report.html
  ctxprec report --out /srv/reports/ctxprec.html --days 60 --min-mean 0.6

The file is self-contained (inline CSS and SVG, no scripts, no network): open it offline or
attach it to a ticket.
""" + READS_ONLY.replace("\n", "; --out needs a writable directory\n")


def _positive(raw: str) -> int:
    try:
        v = int(raw)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {raw!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {v}")
    return v


def add_population_flags(p: argparse.ArgumentParser) -> None:
    """Where and whose scores: --warehouse, --metric, --judge-model, --prompt-version, --source-table."""
    add_warehouse(p)
    add_metric(p)
    p.add_argument(
        "--judge-model", metavar="NAME", help="compare scores of this judge model (default: the most recent)"
    )
    p.add_argument(
        "--prompt-version", metavar="V", help="compare scores of this prompt version (default: the most recent)"
    )
    p.add_argument(
        "--source-table",
        metavar="NAME",
        help="compare scores of this input table (`table` or `schema.table` as scored; the report also "
        "reads the worst cases' texts there); default: the metric's input table, "
        "CTXPREC_SOURCE_TABLE / CTXPREC_CONVERSATION_TABLE or retrieval_logs / conversation_logs",
    )
    add_columns(p)  # the column mapping is part of whose scores: the configured one's are compared


def population_args(args: argparse.Namespace) -> dict[str, Any]:
    """The population keyword arguments of the monitoring functions, from the flags."""
    return {
        "metric": metric_of(args).name,
        "judge_model": args.judge_model,
        "prompt_version": args.prompt_version,
        "source_table": _source_table(args),
        "mapping": _mapping(args),
    }


def id_column_of(args: argparse.Namespace) -> str:
    """The input table's id column under the configured column mapping (``--column id=...``)."""
    kind = metric_of(args)
    try:
        return merge_columns(getattr(settings(), kind.columns_setting), columns_of(args)).get("id", "id")
    except (TypeError, ValueError) as exc:
        raise UsageError(str(exc)) from None


def _add_by(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--by",
        action="append",
        metavar="COL",
        default=None,
        help="also check each value of this segment column (scored with --segment COL); repeatable. "
        "Regression p-values are Holm-corrected across the segments",
    )
    p.add_argument(
        "--min-rows",
        type=_positive,
        default=20,
        metavar="N",
        help="with --by: segments with fewer scored rows are listed as 'too few rows', not alerted on "
        "(default: %(default)s)",
    )


def _common(p: argparse.ArgumentParser, *, thresholds: bool = True) -> None:
    add_population_flags(p)
    if thresholds:
        for flag in (
            "--min-mean",
            "--min-pass-rate",
            "--min-drop",
            "--alpha",
            "--baseline-partitions",
            "--volume-ratio",
            "--max-failure-rate",
        ):
            add_flag(p, flag)
        p.add_argument(
            "--keep-regressions-in-baseline",
            action="store_true",
            help="pool partitions that fired a regression alert into later baselines "
            "(default: leave them out, as process control does)",
        )
        add_label_flags(p)


def add_label_flags(p: argparse.ArgumentParser) -> None:
    """``--label-set`` and ``--use-corrected``: the gold labels that correct the figures."""
    p.add_argument(
        "--label-set",
        metavar="NAME",
        help="the ctxprec_labels label set whose fully labelled rows correct the mean (default: CTXPREC_LABEL_SET "
        "or default)",
    )
    p.add_argument(
        "--use-corrected",
        action="store_true",
        default=None,
        help="min_mean compares the label-corrected mean where enough rows are labelled (default: "
        "CTXPREC_USE_CORRECTED); the regression, volume and pass-rate rules are unchanged",
    )


def _source_table(args: argparse.Namespace) -> str:
    """The input table whose scores are compared: ``--source-table``, else the metric's
    configured table (validated: ``IdentifierError`` -> exit 2)."""
    from ..pipeline.context import source_table_name

    given = getattr(args, "source_table", None)
    try:
        if given:
            return source_table_name(given, None)
        return settings(args).recorded_source(metric_of(args))  # a spans table's scores: its stage's
    except IdentifierError as exc:
        raise UsageError(str(exc)) from None


def _settings(args: argparse.Namespace) -> tuple[str, AlertRules]:
    from ..monitoring import AlertRules

    s = settings(args)
    args.metric = metric_of(args).name
    url = s.warehouse_url
    check_warehouse(url)
    try:
        rules = AlertRules(
            min_mean=s.min_mean,
            min_pass_rate=s.min_pass_rate,
            min_drop=s.min_drop,
            alpha=s.alpha,
            baseline_partitions=s.baseline_partitions,
            volume_ratio=s.volume_ratio,
            max_failure_rate=s.max_failure_rate,
            exclude_regressions_from_baseline=not args.keep_regressions_in_baseline,
            use_corrected=args.use_corrected if args.use_corrected is not None else s.use_corrected,
            label_set=args.label_set or s.label_set,
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    return url, rules


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "trend", help=COMMANDS["trend"].help,
        description="Show the last partitions (UTC days) with n, mean ± 95% CI, median, pass rate, volume and "
                    "the alerts each day would raise.",
        epilog=TREND_EPILOG + "\n" + RULES_HELP, formatter_class=RAW,
    )  # fmt: skip
    _common(p)
    p.add_argument(
        "--days",
        type=_positive,
        default=14,
        metavar="N",
        help="calendar days ending at the latest partition (default: %(default)s)",
    )
    p.add_argument("--end", metavar="YYYY-MM-DD", help="last partition of the window (default: the latest with data)")
    _add_by(p)
    p.set_defaults(func=guarded("trend", run_trend))

    p = subparsers.add_parser(
        "check", help=COMMANDS["check"].help,
        description="Check one partition against threshold, regression, volume and failure-rate rules. "
                    "Prints the figures and alerts; exits 3 when an alert fires.",
        epilog=CHECK_EPILOG, formatter_class=RAW,
    )  # fmt: skip
    _common(p)
    p.add_argument("--partition", required=True, metavar="YYYY-MM-DD", help="the partition (UTC day) to check")
    add_flag(p, "--webhook")
    add_flag(p, "--email-to")
    p.add_argument("--json", action="store_true", help="print the result as JSON on stdout")
    _add_by(p)
    p.set_defaults(func=guarded("check", run_check))

    p = subparsers.add_parser(
        "report", help=COMMANDS["report"].help,
        description="Write one self-contained HTML file: daily mean with its 95% CI and thresholds, pass rate, "
                    "volume, alert markers and the worst cases of the latest partition with their node verdicts.",
        epilog=REPORT_EPILOG + "\n" + RULES_HELP, formatter_class=RAW,
    )  # fmt: skip
    _common(p)
    p.add_argument("--out", required=True, metavar="FILE.html", help="where to write the report")
    p.add_argument(
        "--days",
        type=_positive,
        default=30,
        metavar="N",
        help="calendar days ending at the latest partition (default: %(default)s)",
    )
    p.add_argument("--end", metavar="YYYY-MM-DD", help="last partition of the window (default: the latest with data)")
    p.add_argument(
        "--worst", type=_positive, default=10, metavar="N", help="worst cases to show (default: %(default)s)"
    )
    _add_by(p)
    g = p.add_argument_group("comparison table (as ctxprec compare)")
    g.add_argument("--compare-by", metavar="COL", help="segment column holding the versions to compare")
    g.add_argument("--baseline", metavar="A", help="with --compare-by: the baseline value")
    g.add_argument("--candidate", metavar="B", help="with --compare-by: the candidate value")
    g.add_argument("--pair-on", metavar="COL", help="with --compare-by: pair rows sharing this column's value")
    g.add_argument("--within", metavar="COL", help="with --compare-by: compare per value of this column")
    g.add_argument("--compare-from", metavar="YYYY-MM-DD", help="first partition compared (default: the latest)")
    g.add_argument("--compare-until", metavar="YYYY-MM-DD", help="last partition compared")
    p.set_defaults(func=guarded("report", run_report))


def run_trend(args: argparse.Namespace) -> int:
    from ..monitoring import format_trend_table, load_trend
    from ..monitoring.trend import staleness_note
    from ..warehouse.engine import display_url
    from ._monitor_render import sample_notes

    url, rules = _settings(args)
    if args.end:
        check_partition_key(args.end)
    df = load_trend(url, metric=args.metric, days=args.days, end=args.end, rules=rules,
                    judge_model=args.judge_model, prompt_version=args.prompt_version,
                    source_table=_source_table(args), mapping=_mapping(args))  # fmt: skip
    console = stdout_console()
    if df.empty:
        console.print(f"no {args.metric} partitions in {display_url(url)} yet", markup=False)
        return EXIT_OK
    console.print(format_trend_table(df))
    for messages in df["alert_messages"]:
        for m in messages:
            console.print(Text.assemble(("ALERT", "bold red"), " ", m))
    for line in sample_notes(df):
        print_prose(console, f"note: {line}")
    note = None if args.end else staleness_note(str(df["partition_key"].iloc[-1]))
    if note:
        console.print(Text.assemble(("note", "bold yellow"), " ", note))
    for by in args.by or ():
        from ..monitoring.segments import segment_trend
        from ._monitor_render import segment_trend_table

        checks = segment_trend(url, by, days=args.days, end=args.end, rules=rules, min_rows=args.min_rows,
                               **population_args(args))  # fmt: skip
        if checks:
            console.print(segment_trend_table(by, checks))
            for a in checks[-1].alerts:
                console.print(Text.assemble(("ALERT", "bold red"), " ", a.message))
    return EXIT_OK


def run_check(args: argparse.Namespace) -> int:
    from ..monitoring import check_partition, deliver
    from ._monitor_render import figures_table

    url, rules = _settings(args)
    partition = check_partition_key(args.partition)
    result = check_partition(
        url, partition, metric=args.metric, min_mean=rules.min_mean, min_pass_rate=rules.min_pass_rate,
        min_drop=rules.min_drop, alpha=rules.alpha, baseline_partitions=rules.baseline_partitions,
        volume_ratio=rules.volume_ratio, max_failure_rate=rules.max_failure_rate,
        judge_model=args.judge_model, prompt_version=args.prompt_version, source_table=_source_table(args),
        mapping=_mapping(args), exclude_regressions_from_baseline=rules.exclude_regressions_from_baseline,
        use_corrected=rules.use_corrected, label_set=rules.label_set,
    )  # fmt: skip
    try:
        sinks = settings(args).alert_sinks()
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    console = stdout_console()
    if not args.json:
        console.print(figures_table(result))
        print_prose(console, f"baseline: {result.baseline.describe()}")
        if result.population:
            console.print(f"population: {result.population.label()}", markup=False, highlight=False)
        if result.corrected is not None:
            console.print(f"labels: {result.corrected.describe()}", markup=False, highlight=False, soft_wrap=True)
        for a in result.alerts:
            style = "bold red" if a.severity == "error" else "bold yellow"
            console.print(Text.assemble(("ALERT", style), f" [{a.severity}] {a.rule}: {a.message}"))
        for n in result.notes:
            print_prose(console, f"note: {n}")
    seg_checks = []
    for by in args.by or ():
        from ..monitoring.segments import check_segments

        seg_checks.append(
            check_segments(url, partition, by, rules=rules, min_rows=args.min_rows, **population_args(args))
        )
    if args.json:
        out = result.to_dict()
        if seg_checks:
            out["by"] = {c.by: c.to_dict() for c in seg_checks}
            out["fired"] = result.fired or any(c.fired for c in seg_checks)
        print(json.dumps(out, indent=2, allow_nan=False))
    else:
        from ._monitor_render import print_segment_check

        for c in seg_checks:
            print_segment_check(c)
        if not result.fired and not any(c.fired for c in seg_checks):
            console.print("[green]no alerts[/green]")
    fired = result.fired or any(c.fired for c in seg_checks)
    # the log sink is for schedulers' logs; the console already shows everything
    extra = [s for s in sinks if s.name != "log"]
    result.alerts = result.alerts + [a for c in seg_checks for a in c.alerts]  # delivered with the partition's
    for err in deliver(result, extra):
        err_console.print(f"ctxprec check: alert delivery failed: {err}", markup=False, highlight=False)
    return EXIT_ALERT if fired else EXIT_OK


def run_report(args: argparse.Namespace) -> int:
    from ..monitoring import render_report
    from ._out_path import check_out_path

    out = check_out_path(args.out)  # before any work: a bad --out is a usage error
    url, rules = _settings(args)
    if args.end:
        check_partition_key(args.end)
    kind, env = metric_of(args), settings(args)
    source = _source_table(args)
    columns = merge_columns(getattr(env, kind.columns_setting), columns_of(args))
    comparison = None
    if args.compare_by:
        from ..monitoring.segment_data import parse_value

        if args.baseline is None or args.candidate is None:
            raise UsageError("--compare-by needs --baseline and --candidate")
        for day in (args.compare_from, args.compare_until):
            if day:
                check_partition_key(day)
        comparison = {
            "by": args.compare_by, "baseline": parse_value(args.baseline), "candidate": parse_value(args.candidate),
            "pair_on": args.pair_on, "within": args.within, "partition": args.compare_from,
            "until": args.compare_until, "id_column": columns.get("id"),
        }  # fmt: skip
    path = render_report(
        url, out, metric=kind.name, days=args.days, end=args.end, rules=rules, worst=args.worst,
        source_table=source, mapping=_mapping(args), columns=columns, judge_model=args.judge_model,
        prompt_version=args.prompt_version,
        by=args.by or (), min_rows=args.min_rows, comparison=comparison,
    )  # fmt: skip
    stdout_console().print(f"wrote {path}", markup=False, highlight=False)
    return EXIT_OK
