"""``check_partition``: one partition's figures, baseline and fired alerts, as a ``CheckResult``.

The result is what every entry point consumes: the CLI prints ``summary()`` and exits 3 when
``fired``; Airflow fails the alert task; Dagster turns ``alerts`` into check results (severity
``error`` for thresholds, ``warn`` otherwise) and ``to_dict()`` into metadata.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Engine

from ..secrets import redact
from ..warehouse.source import parse_partition_key
from .alerts import Alert, RegressionTest, evaluate_rules
from .corrected import attach_corrected
from .figures import BaselineFigures, PartitionFigures, baseline_figures, partition_figures
from .history import History, load_history
from .population import Population, engine_scope
from .rules import AlertRules

__all__ = ["CheckResult", "check_partition", "check_history", "DEFAULT_METRIC"]

DEFAULT_METRIC = "contextual_precision"


@dataclass
class CheckResult:
    """Outcome of checking one partition."""

    partition_key: str
    metric: str
    population: Population | None
    figures: PartitionFigures
    baseline: BaselineFigures
    rules: AlertRules
    regression: RegressionTest
    alerts: list[Alert] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: the label-corrected mean (``calibration.correction.CorrectedEstimate``); None: no labelled rows
    corrected: Any = None

    @property
    def fired(self) -> bool:
        return bool(self.alerts)

    @property
    def errors(self) -> list[Alert]:
        return [a for a in self.alerts if a.severity == "error"]

    @property
    def warnings(self) -> list[Alert]:
        return [a for a in self.alerts if a.severity == "warn"]

    def alerts_of(self, kind: str) -> list[Alert]:
        """Alerts of one family: ``threshold``, ``regression`` or ``volume``."""
        return [a for a in self.alerts if a.kind == kind]

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe (no NaN, no numpy types): for XCom, Dagster metadata, ``--json``."""
        return {
            "partition_key": self.partition_key,
            "metric": self.metric,
            "judge_model": self.population.judge_model if self.population else None,
            "prompt_version": self.population.prompt_version if self.population else None,
            "source_table": self.population.source_table if self.population else None,
            "mapping": self.population.mapping if self.population else None,
            "fired": self.fired,
            "figures": self.figures.to_dict(),
            "baseline": self.baseline.to_dict(),
            "regression": self.regression.to_dict(),
            "alerts": [a.to_dict() for a in self.alerts],
            "notes": [redact(n) for n in self.notes],
            "rules": self.rules.to_dict(),
            "corrected": self.corrected.to_dict() if self.corrected is not None else None,
        }

    def headline(self) -> str:
        s = self.figures.summary
        if s.n:
            ci = f" [95% CI {s.ci_low:.3f}-{s.ci_high:.3f}]" if s.ci_low is not None else ""
            pr = f", pass rate {s.pass_rate:.1%}" if s.pass_rate is not None else ""
            med = f", median {s.median:.3f}" if s.median is not None else ""
            body = f"n={s.n}, mean {s.mean:.3f}{ci}{med}{pr}"
        else:
            body = "no scored cases"
        vol = f"{self.figures.rows} rows, {self.figures.rows_failed} failed"
        label = self.figures.sample_label()
        sample = f" [{label}: the figures and CI are the sample's]" if label else ""
        return f"{self.partition_key} {self.metric}{sample}: {body}; {vol}"

    def summary(self) -> str:
        """Multi-line, human-readable, secret-free text (the body of every sink message)."""
        lines = [self.headline()]
        b = self.baseline.summary
        if b.n:
            lines.append(
                f"baseline: {self.baseline.describe()}: n={b.n}, mean {b.mean:.3f}"
                + (f", median rows {self.baseline.median_rows:g}" if self.baseline.median_rows is not None else "")
            )
        elif self.baseline.excluded or self.baseline.missing:
            lines.append(f"baseline: {self.baseline.describe()}")
        if self.population:
            lines.append(f"population: {self.population.label()}")
        if self.corrected is not None:
            lines.append(f"labels: {self.corrected.describe()}")
        if self.regression.verdict in ("regression", "no regression") and self.regression.p_value is not None:
            lines.append(
                f"regression test: {self.regression.verdict} "
                f"(drop {self.regression.drop:+.3f}, p={self.regression.p_value:.4g})"
            )
        if self.alerts:
            lines.append(f"ALERTS ({len(self.alerts)}):")
            lines += [f"  [{a.severity}] {a.rule}: {a.message}" for a in self.alerts]
        else:
            lines.append("no alerts")
        lines += [f"note: {n}" for n in self.notes]
        return redact("\n".join(lines))


#: with regressed partitions left out of the baseline, this many baselines' worth of earlier scored
#: partitions are loaded to tell which of them regressed (the oldest are judged on what is loaded)
LOOKBACK_FACTOR = 3


def lookback(rules: AlertRules) -> int:
    """Scored partitions to load before a checked partition for its baseline."""
    factor = LOOKBACK_FACTOR if rules.exclude_regressions_from_baseline else 1
    return rules.baseline_partitions * factor


def regressed_partitions(history: History, rules: AlertRules) -> frozenset[str]:
    """The loaded scored partitions that fire the regression rule against their own baseline,
    oldest first, each baseline leaving out the regressions found before it (memoized)."""
    if not rules.exclude_regressions_from_baseline:
        return frozenset()
    memo_key = (
        rules.baseline_partitions,
        rules.min_drop,
        rules.alpha,
        rules.min_baseline_partitions,
        rules.min_baseline_cases,
        rules.min_cases,
    )
    cached = history.regressed_cache.get(memo_key)
    if cached is not None:
        return cached
    regressed: set[str] = set()
    for key in sorted(k for k, d in history.partitions.items() if d.moments.n):
        data = history.get(key)
        base = baseline_figures(history, key, rules.baseline_partitions, exclude=frozenset(regressed))
        if base.partitions and any(k not in history.partitions for k in base.partitions):
            continue  # its baseline is not loaded (older than the lookback): taken as in control
        _, reg, _ = evaluate_rules(history.metric, partition_figures(data), data.moments, base, rules)
        if reg.verdict == "regression":
            regressed.add(key)
    result = frozenset(regressed)
    history.regressed_cache[memo_key] = result
    return result


def _no_population_note(history: History, partition_key: str) -> str:
    """Why there is nothing to compare: nothing scored at all, or nothing on or before this day."""
    known = sorted(set(history.seen_keys) | set(history.run_keys))
    if not known:
        return f"no scores at all for metric {history.metric} in this warehouse"
    span = known[0] if len(known) == 1 else f"{known[0]}..{known[-1]}"
    if known[0] <= partition_key:  # rows on or before it exist: of another scoring configuration
        return (
            f"{partition_key} has no {history.metric} scores of this population, nor does any day before it: "
            f"the warehouse's {history.metric} partitions {span} were scored under another judge model, prompt "
            "version, input table or column mapping (--judge-model, --prompt-version, --source-table, --column)"
        )
    return (
        f"{partition_key} has no {history.metric} scores, nor does any day before it "
        f"(the warehouse has {history.metric} partitions {span})"
    )


def check_history(history: History, partition_key: str, rules: AlertRules) -> CheckResult:
    """Apply the rules to one partition of an already loaded ``History`` (pure)."""
    data = history.get(partition_key)
    fig = partition_figures(data)
    exclude = regressed_partitions(history, rules) - {partition_key}
    base = baseline_figures(history, partition_key, rules.baseline_partitions, exclude=exclude)
    alerts, reg, notes = evaluate_rules(history.metric, fig, data.moments, base, rules)
    if base.missing:
        notes.insert(
            0,
            f"baseline incomplete: {', '.join(base.missing)} not yet scored "
            f"(the baseline uses {len(base.partitions)} partition(s); check again once they are)",
        )
    if history.population is None:
        notes.insert(0, _no_population_note(history, partition_key))
    elif not data.rows and data.run is None and partition_key not in history.run_keys:
        notes.insert(
            0,
            f"{partition_key} has not been scored yet (no run, no scores, no failures recorded for "
            f"{history.metric}): score it first (ctxprec score --partition {partition_key})",
        )
    return CheckResult(partition_key, history.metric, history.population, fig, base, rules, reg, alerts, notes)


def check_partition(
    engine_or_url: Engine | str,
    partition_key: str,
    *,
    metric: str = DEFAULT_METRIC,
    min_mean: float | None = AlertRules.min_mean,
    min_pass_rate: float | None = AlertRules.min_pass_rate,
    min_drop: float = AlertRules.min_drop,
    alpha: float = AlertRules.alpha,
    baseline_partitions: int = AlertRules.baseline_partitions,
    volume_ratio: float = AlertRules.volume_ratio,
    max_failure_rate: float | None = AlertRules.max_failure_rate,
    min_baseline_partitions: int = AlertRules.min_baseline_partitions,
    min_baseline_cases: int = AlertRules.min_baseline_cases,
    judge_model: str | None = None,
    prompt_version: str | None = None,
    source_table: str | None = None,
    mapping: str | None = None,
    exclude_regressions_from_baseline: bool = True,
    use_corrected: bool = False,
    label_set: str = "default",
) -> CheckResult:
    """Check one partition against the rules (see ``alerts``) and its trailing baseline.

    The population defaults to the most recent (source_table, judge_model, prompt_version) of
    the partition; pass ``source_table`` (``schema.table`` as scored) to check one input table,
    ``mapping`` (a column mapping's fingerprint, ``pipeline.mapping``) to check the scores read
    with one column mapping.
    A partition with no rows at all is still checked (volume rule).
    """
    parse_partition_key(partition_key)
    rules = AlertRules(
        min_mean=min_mean,
        min_pass_rate=min_pass_rate,
        min_drop=min_drop,
        alpha=alpha,
        baseline_partitions=baseline_partitions,
        min_baseline_partitions=min_baseline_partitions,
        min_baseline_cases=min_baseline_cases,
        volume_ratio=volume_ratio,
        max_failure_rate=max_failure_rate,
        exclude_regressions_from_baseline=exclude_regressions_from_baseline,
        use_corrected=use_corrected,
        label_set=label_set,
    )
    with engine_scope(engine_or_url) as engine:
        history = load_history(
            engine,
            metric,
            keys=[partition_key],
            baseline_for=[partition_key],
            baseline_partitions=baseline_partitions,
            lookback=lookback(rules),
            population_partition=partition_key,
            up_to=partition_key,
            judge_model=judge_model,
            prompt_version=prompt_version,
            source_table=source_table,
            mapping=mapping,
        )
        result = check_history(history, partition_key, rules)
        attach_corrected(engine, history, [result], rules)
    return result
