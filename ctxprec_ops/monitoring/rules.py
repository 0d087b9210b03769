"""``AlertRules``: the alert rules' settings — thresholds, the regression test's drop and
significance, the baseline's size, the volume and failure limits. Each default and what it allows
is declared here once (``bounds.setting``): ``check_partition``, the CLI's flags and
``ctxprec_ops.config.Settings`` (``CTXPREC_MIN_MEAN``, ...) take them from here. No numpy or
pandas: the CLI's ``--help`` reads them."""

from __future__ import annotations

from dataclasses import asdict, dataclass

from ..pipeline.bounds import check_bounds, setting

__all__ = ["AlertRules"]


@dataclass(frozen=True)
class AlertRules:
    """Rule settings; None disables a threshold rule. What each number allows is declared on its
    field (``bounds.setting``; ``ctxprec_ops.config.Settings`` takes it from there)."""

    min_mean: float | None = setting(None, ge=0, le=1)
    min_pass_rate: float | None = setting(None, ge=0, le=1)
    min_drop: float = setting(0.05, ge=0, le=1)
    alpha: float = setting(0.01, gt=0, lt=1)
    baseline_partitions: int = setting(7, ge=1, integer=True)
    min_baseline_partitions: int = 2
    min_baseline_cases: int = 20
    volume_ratio: float = setting(0.5, ge=0, le=1)
    max_failure_rate: float | None = setting(0.2, ge=0, le=1)
    exclude_regressions_from_baseline: bool = True
    #: scored cases a partition needs for a regression verdict (Welch's test estimates its spread)
    min_cases: int = 2
    #: ``min_mean`` compares the label-corrected mean where there are enough labelled rows
    #: (``monitoring.corrected``); the other rules are unchanged
    use_corrected: bool = False
    #: the ``ctxprec_labels`` label set that corrects the figures
    label_set: str = "default"

    def __post_init__(self) -> None:
        check_bounds(self)
        if self.min_baseline_partitions < 1:
            raise ValueError("baseline_partitions and min_baseline_partitions must be at least 1")
        if self.min_baseline_cases < 2:
            raise ValueError("min_baseline_cases must be at least 2")
        if self.min_cases < 2:
            raise ValueError("min_cases must be at least 2 (a t-test needs two cases to see a spread)")

    def to_dict(self) -> dict[str, object]:
        return asdict(self)
