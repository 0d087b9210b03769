"""The demo job behind ``ctxprec demo``: build the sample warehouse, score every partition of
both tables, then load the trend and alerts and write the HTML report.

Printing is the caller's job (the CLI); this module returns what happened as ``DemoResult``.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..errors import CtxPrecError
from ..pipeline import METRIC_KINDS, PipelineConfig, ProgressCallback, RunSummary, score_partition
from ..pipeline.outcome import Decision, Outcome, decide
from ..secrets import redact, redact_url
from ..warehouse.engine import database_file, normalize_url
from ..warehouse.schema import output_tables
from .defaults import DEFAULT_DEMO_URL, DEFAULT_REPORT, DEMO_JUDGE
from .sample import SampleInfo, create_sample_warehouse

__all__ = [
    "DemoResult",
    "run_demo",
    "METRICS",
    "check_demo_warehouse",
    "check_report_path",
]

#: the metrics the demo scores: every kind of the registry, each on its default table of the sample warehouse
METRICS = tuple(METRIC_KINDS.values())


@dataclass
class DemoResult:
    info: SampleInfo
    judge: str
    summaries: list[RunSummary]
    seconds_data: float
    seconds_scoring: float
    seconds_total: float = 0.0
    trends: dict[str, Any] = field(default_factory=dict)  # metric -> load_trend DataFrame
    report_path: Path | None = None  # the retrieval report
    reports: dict[str, Path] = field(default_factory=dict)  # metric -> report file
    report_note: str | None = None  # why there is no report, if there is none
    estimate: tuple[int, float | None] | None = None  # (judge calls, USD) predicted for an LLM judge
    calibration: Any = None  # calibration.CalibrationResult of the judge against the sample's labels
    labels_path: Path | None = None  # the labelled sample (CSV) written next to the report
    calibration_note: str | None = None  # why the judge was not calibrated, if it was not

    def by_metric(self, metric: str) -> list[RunSummary]:
        return [s for s in self.summaries if s.metric == metric]

    @property
    def incomplete(self) -> list[tuple[RunSummary, Decision]]:
        """The partition runs that did not complete (outcome ``retry`` or ``fail``), with the decision."""
        pairs = [(s, decide(s)) for s in self.summaries]
        return [(s, d) for s, d in pairs if d.outcome is not Outcome.DONE]

    @property
    def alerts(self) -> list[tuple[str, str, str]]:
        """(metric, partition, message) of every alert the trend shows."""
        out = []
        for metric, df in self.trends.items():
            for row in df.itertuples(index=False):
                for message in row.alert_messages or []:
                    out.append((metric, str(row.partition_key), message))
        return out


def _sqlite_file(url: str) -> Path | None:
    path = database_file(url)  # the file a SQLite URL names; None for anything else
    return None if path is None else Path(path)


def check_demo_warehouse(url: str, *, force: bool) -> None:
    """Refuse to wipe a non-SQLite-file warehouse unless ``force`` is given."""
    if _sqlite_file(url) is None and not force:
        raise CtxPrecError(
            f"the demo recreates its warehouse; {redact_url(url)} is not a SQLite file, so pass --force "
            "to drop and recreate retrieval_logs, conversation_logs and the ctxprec_* tables there"
        )


def _fresh_engine(url: str, *, force: bool) -> Engine:
    """A new engine on an emptied demo warehouse.

    A SQLite file is deleted and recreated. Any other warehouse needs ``force``: the two sample
    tables and the four ctxprec_* output tables are dropped there. The engine is new (not the
    process-wide cached one) so no cached reflection or "tables exist" knowledge survives.
    """
    path = _sqlite_file(url)
    if path is not None:
        for p in (path, *(path.with_name(path.name + s) for s in ("-wal", "-shm", "-journal"))):
            p.unlink(missing_ok=True)
        path.parent.mkdir(parents=True, exist_ok=True)
        # single writer, sequential: the plain pysqlite engine is enough for the demo
        return sa.create_engine(normalize_url(url), connect_args={"check_same_thread": False})
    check_demo_warehouse(url, force=force)
    engine = sa.create_engine(normalize_url(url), pool_pre_ping=True)
    from ..calibration.table import calibrations_table
    from ..warehouse.label_figures import label_figures_table

    with engine.begin() as conn:
        output_tables().metadata.drop_all(conn, checkfirst=True)
        label_figures_table().drop(conn, checkfirst=True)
        calibrations_table().drop(conn, checkfirst=True)
    return engine


def run_demo(
    warehouse: str = DEFAULT_DEMO_URL,
    *,
    days: int = 14,
    rows_per_day: tuple[int, int] = (250, 400),
    conversations_per_day: tuple[int, int] = (20, 40),
    judge: str | None = None,
    out: str | Path | None = DEFAULT_REPORT,
    seed: int = 20261128,
    end_date: str | None = None,
    concurrency: int | None = None,
    chunk_size: int | None = None,
    force: bool = False,
    progress_for: Callable[[str], ProgressCallback] | None = None,
    log: Callable[[str], None] | None = None,
    configure: Callable[..., PipelineConfig] = PipelineConfig,
) -> DemoResult:
    """Create the sample warehouse at ``warehouse`` (recreated), score every partition of every
    metric with ``judge`` (default ``DEMO_JUDGE``, the offline lexical judge, whatever
    ``OPENAI_API_KEY`` and ``CTXPREC_JUDGE`` say), load the trend and alerts, write the HTML
    reports next to ``out``. Runs that did not complete are in ``DemoResult.incomplete``.

    ``configure`` builds each run's ``PipelineConfig`` from the demo's own values (keyword
    arguments): ``PipelineConfig`` itself (the library's defaults) unless the caller passes its
    resolved settings' (the CLI: ``Settings.pipeline_config``, the environment's)."""
    started = time.perf_counter()
    if out is not None:
        check_report_path(out)
    judge_name = judge or DEMO_JUDGE
    engine = _fresh_engine(warehouse, force=force)
    try:
        info = create_sample_warehouse(
            engine,
            days=days,
            rows_per_day=rows_per_day,
            conversations_per_day=conversations_per_day,
            seed=seed,
            end_date=end_date,
        )
        info.url = redact_url(warehouse)
        t_data = time.perf_counter() - started
        if log:
            log(
                f"sample warehouse {info.url}: {info.total_retrievals} retrieval logs and "
                f"{info.total_conversations} conversations over {days} days "
                f"({info.partitions[0]} .. {info.partitions[-1]}), built in {t_data:.1f}s"
            )

        summaries: list[RunSummary] = []
        run_id = f"demo-{uuid.uuid4().hex[:12]}"
        given = {"concurrency": concurrency, "chunk_size": chunk_size}
        given = {k: v for k, v in given.items() if v is not None}
        configs = [
            configure(
                warehouse=engine,
                judge=judge_name,
                metric=kind.name,
                source_table=kind.default_table,
                source_format="rows",  # the sample warehouse holds log tables, whatever CTXPREC_SOURCE_FORMAT says
                columns=kind.columns(),
                judge_mode="sync",  # results now, whatever CTXPREC_JUDGE_MODE says
                **given,
            )
            for kind in METRICS
        ]
        result_estimate = None
        if judge_name.strip().lower() != "lexical":
            result_estimate = _estimate(configs, info.partitions)
            if log:
                calls, cost = result_estimate
                log(
                    f"LLM judge {judge_name}: about {calls:,} judge calls, estimated cost "
                    f"{'unknown' if cost is None else f'${cost:.2f}'} (use --judge lexical for the offline judge)"
                )
        t0 = time.perf_counter()
        for config in configs:
            metric = config.metric
            for key in info.partitions:
                cb = progress_for(f"{key} {metric}") if progress_for else None
                summaries.append(score_partition(config, key, run_id=run_id, progress=cb))
        t_scoring = time.perf_counter() - t0

        result = DemoResult(info, judge_name, summaries, t_data, t_scoring, estimate=result_estimate)
        _calibrate(result, engine, judge_name, out, log)
        if log:
            log(
                f"scored {len(summaries)} partition runs in {t_scoring:.1f}s; loading the trend and writing the reports"
            )
        _monitor(result, engine, days=days, end=info.partitions[-1], out=out)
        result.seconds_total = time.perf_counter() - started
        return result
    finally:
        engine.dispose()


def _calibrate(
    result: DemoResult, engine: Engine, judge: str, out: str | Path | None, log: Callable[[str], None] | None
) -> None:
    """The judge against the sample's node labels (``ctxprec calibrate``); the labels are written
    next to the report as ``<report>_node_labels.csv`` so the command can be re-run on them."""
    from ..calibration import calibrate, parse_labels
    from ..calibration.demo_labels import demo_label_csv

    text = demo_label_csv(engine)
    if text.count("\n") < 2:  # the header only: a sample too small to hold a labelled retrieval
        result.calibration_note = "too few well-formed retrievals to calibrate the judge against labels"
        if log:
            log(f"judge {judge} not calibrated: {result.calibration_note}")
        return
    if out is not None:
        path = Path(out)
        result.labels_path = path.with_name(f"{path.stem}_node_labels.csv")
        result.labels_path.write_text(text, encoding="utf-8")
    labels = parse_labels(text, result.labels_path.name if result.labels_path else "demo labels")
    [result.calibration] = calibrate(engine, labels, [judge], resamples=500)
    if log:
        a = result.calibration.agreement
        log(
            f"judge {judge} against {labels.nodes} node labels of {a.cases} retrievals: verdict F1 {a.f1.fmt(2)}, "
            f"Cohen's kappa {a.kappa.fmt(2)}, score MAE {a.mae.fmt(2)} (ctxprec calibrate)"
        )


def _estimate(configs: list[PipelineConfig], partitions: list[str]) -> tuple[int, float | None]:
    """Judge calls and cost the scoring is about to spend (``estimate_partition``, no call)."""
    from ..pipeline.estimate import estimate_partition

    calls, cost = 0, 0.0
    unknown = False
    for config in configs:
        for key in partitions:
            est = estimate_partition(config, key)
            calls += est.judge_calls
            if est.cost is None:
                unknown = True
            else:
                cost += est.cost
    return calls, None if unknown else cost


def check_report_path(out: str | Path) -> Path:
    """The report path, refused up front (before minutes of work) if it cannot be written."""
    path = Path(out)
    if path.suffix.lower() not in (".html", ".htm"):
        raise ValueError(f"the report is an HTML file: --out should end in .html, got {path.name!r}")
    if not path.parent.exists():
        raise ValueError(f"the directory of {str(path)!r} does not exist")
    return path


def _monitor(result: DemoResult, engine: Engine, *, days: int, end: str, out: str | Path | None) -> None:
    """Trend + alerts of both metrics; the HTML reports (retrievals at ``out``, conversations
    next to it as ``<name>_conversations.html``)."""
    from .. import monitoring

    for kind in METRICS:
        result.trends[kind.name] = monitoring.load_trend(engine, metric=kind.name, days=days, end=end)
    if out is None:
        result.report_note = "no report requested"
        return
    path = check_report_path(out)
    main, *others = METRICS
    result.report_path = Path(
        monitoring.render_report(
            engine, path, metric=main.name, days=days, end=end, source_table=main.default_table, columns={}
        )
    )
    result.reports[main.name] = result.report_path
    try:  # the other metrics' reports are a bonus: their failure must not fail the demo
        for kind in others:
            other = path.with_name(f"{path.stem}{kind.report_suffix or '_' + kind.name}{path.suffix}")
            result.reports[kind.name] = Path(
                monitoring.render_report(
                    engine, other, metric=kind.name, days=days, end=end, source_table=kind.default_table, columns={}
                )
            )
    except Exception as exc:
        result.report_note = f"report not written: {type(exc).__name__}: {redact(str(exc))[:200]}"
