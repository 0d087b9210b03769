"""``ctxprec estimate`` for a judge cascade: the cheap judge on every node to judge, the strong judge
on the share it is expected to re-judge, and the calibration sample when one is due.

The expected escalation rate is the stored calibration's (``ctxprec_cascades``: the share of its
sample below the threshold), else the mean escalation rate of this configuration's last runs
(``ctxprec_runs``), else unknown — then every node is priced for the strong judge too, an upper
bound the output says it is. The strong judge's tokens are the cheap judge's prompts and one
answer per node, scaled by that rate (escalated nodes are judged in groups like the others).
A calibration is due with a target agreement and no stored calibration (or ``recalibrate``): its
``calibration_nodes`` nodes are priced for both judges, at the sync price (the sample is judged
with ordinary calls, in batch mode too).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import sqlalchemy as sa
from sqlalchemy.engine import Engine

from ..judge.pricing import batch_price_of, price_of
from ..warehouse.cascades import latest_calibration
from ..warehouse.engine import read_connection
from ..warehouse.reflect import get_columns, table_names
from ..warehouse.schema import RUNS, output_tables
from .cascade import identity_of

if TYPE_CHECKING:
    from .config import PipelineConfig

__all__ = ["CheapStage", "price_cascade", "expected_rate"]

#: recent runs whose escalation rate is averaged when there is no calibration to go by
RECENT_RUNS = 7

Price = tuple[float, float]


class CheapStage(Protocol):
    """What pricing the strong stage reads from (and adds to) an estimate of the cheap stage
    (``estimate.Estimate``)."""

    prompt_tokens: int
    completion_tokens: int
    samples: int
    nodes_total: int
    nodes_to_judge: int
    cost: float | None
    batch_cost: float | None
    cascade: dict[str, Any] | None


def _usd(prompt: float, completion: float, price: Price | None) -> float | None:
    return None if price is None else (prompt * price[0] + completion * price[1]) / 1_000_000


def _sum(*values: float | None) -> float | None:
    return None if any(v is None for v in values) else float(sum(v for v in values if v is not None))


def expected_rate(engine: Engine, config: PipelineConfig, metric: Any) -> tuple[float | None, str, bool]:
    """``(rate or None, where it comes from, whether a calibration is due)``."""
    cascade = metric.cascade
    schema = config.output_schema
    if cascade.target_agreement is not None:
        row = None if config.recalibrate else latest_calibration(engine, identity_of(metric), schema)
        if row is not None:
            return float(row["escalation_rate"]), f"the stored calibration ({row['nodes']} nodes)", False
    if RUNS in table_names(engine, schema) and {c["name"] for c in get_columns(engine, RUNS, schema)} >= {
        "escalation_rate"
    }:
        r = output_tables(schema).runs
        q = (
            sa.select(r.c.escalation_rate)
            .where(r.c.metric == metric.metric_name, r.c.judge_model == metric.evaluation_model)
            .where(r.c.escalation_rate.is_not(None))
            .order_by(r.c.finished_at.desc())
            .limit(RECENT_RUNS)
        )
        with read_connection(engine) as conn:
            rates = [float(x) for (x,) in conn.execute(q)]
        if rates:
            return sum(rates) / len(rates), f"the last {len(rates)} run(s)", cascade.target_agreement is not None
    return (
        None,
        "unknown: every node priced for the strong judge too (an upper bound)",
        (cascade.target_agreement is not None),
    )


def price_cascade(est: CheapStage, config: PipelineConfig, metric: Any, engine: Engine, cheap: Price | None) -> None:
    """Add the strong stage and the calibration to ``est`` (whose figures are the cheap stage's)."""
    cascade = metric.cascade
    strong_model = cascade.strong_model
    strong = cascade.strong.price_per_million or price_of(strong_model, config.prices)
    rate, source, due = expected_rate(engine, config, metric)
    share = 1.0 if rate is None else rate
    answers = max(1, est.samples)  # the strong judge answers once per node
    strong_prompt = share * est.prompt_tokens
    strong_completion = share * est.completion_tokens / answers
    cheap_cost = _usd(est.prompt_tokens, est.completion_tokens, cheap)
    strong_cost = _usd(strong_prompt, strong_completion, strong)
    calibration_nodes = min(config.calibration_nodes, est.nodes_total) if due else 0
    per_node = est.prompt_tokens / est.nodes_to_judge if est.nodes_to_judge else 0.0
    completion_per_node = est.completion_tokens / est.nodes_to_judge if est.nodes_to_judge else 0.0
    calibration_cost = _sum(
        _usd(calibration_nodes * per_node, calibration_nodes * completion_per_node, cheap),
        _usd(calibration_nodes * per_node, calibration_nodes * completion_per_node / answers, strong),
    )
    cheap_batch = batch_price_of(metric.model.get_model_name(), config.prices) if cheap is not None else None
    strong_batch = batch_price_of(strong_model, config.prices) if strong is not None else None
    est.cascade = {
        "strong_model": strong_model,
        "strong_price_per_million": strong,
        "escalate_below": cascade.escalate_below,
        "target_agreement": cascade.target_agreement,
        "escalation_rate": rate,
        "escalation_rate_source": source,
        "nodes_escalated": round(share * est.nodes_to_judge),
        "cheap_cost": cheap_cost,
        "strong_cost": strong_cost,
        "calibration_nodes": calibration_nodes,
        "calibration_cost": calibration_cost,
        "strong_only_cost": _usd(est.prompt_tokens, est.completion_tokens / answers, strong),
    }
    est.cost = _sum(cheap_cost, strong_cost, calibration_cost)
    if est.batch_cost is not None:
        est.batch_cost = _sum(
            _usd(est.prompt_tokens, est.completion_tokens, cheap_batch),
            _usd(strong_prompt, strong_completion, strong_batch),
            calibration_cost,
        )
