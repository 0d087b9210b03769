"""The params of the ctxprec DAGs (shown and overridable on a manual trigger) and the templated
operator arguments that read them."""

from __future__ import annotations

from typing import Any

from airflow.sdk import Param

from ..config import Settings

__all__ = ["dag_params", "templated_arguments"]


def _number_param(
    default: float | None, description: str, *, integer: bool = False, lo: float | None = 0, hi: float | None = 1
) -> Param:
    kind = "integer" if integer else "number"
    # JSON-schema keywords for Param's **schema; a bound left out (None) is no bound at all
    bounds: dict[str, Any] = {k: v for k, v in (("minimum", lo), ("maximum", hi)) if v is not None}
    return Param(default, type=[kind, "null"], description=description, **bounds)


def dag_params(settings: Settings, pool: str | None) -> dict[str, Param]:
    """``partition_key`` plus the judge, chunking, sampling and alert knobs, defaulting to ``CTXPREC_*``."""
    return {
        "partition_key": Param(
            None,
            type=["null", "string"],
            pattern=r"^\d{4}-\d{2}-\d{2}$",
            description="Day to score (YYYY-MM-DD); empty = the run's data interval day",
        ),
        "threshold": _number_param(settings.threshold, "Per-case pass threshold"),
        "min_mean": _number_param(settings.min_mean, "Alert when the partition mean is below this"),
        "min_pass_rate": _number_param(settings.min_pass_rate, "Alert when the pass rate is below this"),
        "min_drop": _number_param(0.05, "Regression alert: drop below the 7-partition baseline mean"),
        "use_corrected": Param(
            settings.use_corrected,
            type="boolean",
            description="min_mean compares the mean corrected with gold labels (ctxprec labels import) where "
            "enough rows of the day are labelled",
        ),
        "chunk_size": _number_param(settings.chunk_size, "Rows per mapped chunk task", integer=True, lo=1, hi=None),
        "concurrency": _number_param(
            settings.concurrency, "Judge calls in flight per chunk task", integer=True, lo=1, hi=None
        ),
        "judge_max_retries": _number_param(
            None, "Judge retries inside a task (empty = library default)", integer=True, lo=0, hi=None
        ),
        "max_rpm": _number_param(
            settings.max_rpm,
            "Judge requests per minute per chunk task: the quota divided by "
            "the tasks that run at once (the judge_pool's slots)",
            lo=0,
            hi=None,
        ),
        "max_tpm": _number_param(
            settings.max_tpm, "Judge tokens per minute per chunk task (quota / slots)", lo=0, hi=None
        ),
        "outage_tolerance": _number_param(
            settings.outage_tolerance,
            "Seconds a chunk task waits out a judge outage before its remaining rows fail (and Airflow retries it)",
            lo=0,
            hi=None,
        ),
        "sample_rate": _number_param(
            settings.sample_rate,
            "Share of the day's rows to score (0, 1]: the same rows on every run, by a hash of the log id",
            lo=0,
            hi=1,
        ),
        "max_rows": _number_param(
            settings.max_rows, "Score at most this many rows of the day (empty = no cap)", integer=True, lo=1, hi=None
        ),
        "judge_samples": _number_param(
            settings.judge_samples,
            "Self-consistency: sampled judge answers per node, odd (majority verdict; ~N times the "
            "completion tokens; 1 = one answer)",
            integer=True,
            lo=1,
            hi=None,
        ),
        "judge_pool": Param(
            pool,
            type=["null", "string"],
            enum=[pool],
            description="Airflow pool of the score_chunk tasks (set by nightly_dag(pool=...) or "
            "CTXPREC_AIRFLOW_POOL when the DAG file is parsed; shown, not changeable)",
        ),
    }


def templated_arguments(partition_template: str) -> dict[str, Any]:
    """The operator arguments every task of a ctxprec DAG takes from the params."""
    return dict(
        partition_key=partition_template,
        threshold="{{ params.threshold }}",
        chunk_size="{{ params.chunk_size }}",
        concurrency="{{ params.concurrency }}",
        judge_max_retries="{{ params.judge_max_retries }}",
        max_rpm="{{ params.max_rpm }}",
        max_tpm="{{ params.max_tpm }}",
        outage_tolerance="{{ params.outage_tolerance }}",
        sample_rate="{{ params.sample_rate }}",
        max_rows="{{ params.max_rows }}",
        judge_samples="{{ params.judge_samples }}",
    )
