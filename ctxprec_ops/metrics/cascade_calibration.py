"""``metric.calibrate(cases)``: a cascade's threshold chosen on a sample of the cases' nodes.

The nodes every valid case would send the judge (``judge_requests``) form the pool; a random
``nodes`` of them (reproducible by ``seed``) are judged by both judges and ``C`` is chosen for the
metric's ``target_agreement`` (``judge.escalation``). With ``labels`` the pool is the labelled nodes
and the labels are the reference. ``evaluate`` calibrates a metric that needs it on the cases it
was given, before scoring them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Protocol

from ..errors import CtxPrecError, JudgeConfigurationError
from ..judge import defaults
from ..judge.calls import JudgeRun
from ..judge.escalation import Calibration, SampleNode, calibrate, draw
from ..judge.limiter import AdaptiveLimiter
from ..judge.models.base import JudgeModel

__all__ = ["CascadeMetric", "calibrate_metric", "sample_of"]


class CascadeMetric(Protocol):
    """What calibrating asks of a metric with a cascade (``base.BaseRetrievalMetric``)."""

    model: JudgeModel
    cascade: Any
    judge_samples: int
    max_nodes_per_call: int
    max_retries: int

    def coerce(self, test_case: Any) -> Any: ...
    def judge_requests(self, test_case: Any) -> list[tuple[str, str, list[str]]]: ...
    def judge_template(self) -> type: ...
    def stage_versions(self) -> tuple[str, str]: ...
    def set_threshold(self, escalate_below: float, calibration: Any = None) -> None: ...


def sample_of(
    metric: CascadeMetric,
    cases: Iterable[Any],
    nodes: int,
    labels: Mapping[str, Mapping[int, bool]] | None = None,
    seed: Any = 0,
) -> list[SampleNode]:
    """A random sample of ``nodes`` of the nodes ``cases`` would send the judge (invalid cases
    skipped); with ``labels`` (by case id), of the labelled ones, each carrying its label."""
    pool: list[SampleNode] = []
    for index, case in enumerate(cases):
        try:
            requests = metric.judge_requests(metric.coerce(case))
        except CtxPrecError:
            continue  # not scorable: scoring reports it
        given = labels.get(str(getattr(case, "id", index))) if labels is not None else None
        if labels is not None and not given:
            continue
        for r, (question, expected, texts) in enumerate(requests):
            for rank, text in enumerate(texts, start=1):
                gold = given.get(rank) if given is not None else None
                if labels is not None and gold is None:
                    continue
                pool.append(SampleNode((index, r), question, expected, rank, text, gold))
    return [pool[i] for i in draw(len(pool), nodes, seed)]


async def calibrate_metric(
    metric: CascadeMetric,
    cases: Any,
    *,
    nodes: int | None = None,
    labels: Mapping[str, Mapping[int, bool]] | None = None,
    seed: Any = 0,
    run: JudgeRun | None = None,
) -> Calibration:
    """See ``BaseRetrievalMetric.calibrate``; sets the metric's threshold and returns the calibration."""
    cascade = metric.cascade
    if cascade is None or cascade.target_agreement is None:
        raise JudgeConfigurationError("calibrate() is for a cascade with a target_agreement (escalate_to=...)")
    size = nodes if nodes is not None else cascade.calibration_nodes
    case_list = list(cases) if not hasattr(cases, "retrieval_context") else [cases]
    sample = sample_of(metric, case_list, size, labels, seed)
    run = run or JudgeRun(limiter=AdaptiveLimiter(defaults.CONCURRENCY), max_retries=metric.max_retries)
    versions = metric.stage_versions()
    calibration = await calibrate(
        sample, metric.model, cascade, metric.judge_template(), versions, run,
        max_nodes_per_call=metric.max_nodes_per_call, samples=metric.judge_samples,
        label_set="given" if labels is not None else None,
    )  # fmt: skip
    metric.set_threshold(calibration.escalate_below, calibration)
    return calibration
