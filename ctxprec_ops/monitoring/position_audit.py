"""``audit_position``: the position-bias audit of a partition (``ctxprec audit position``).

Draws ``n`` scored rows of the partition (seeded, ``draw``) from the scores of the audited judge
and its current prompt version, reads their input rows, and runs ``calibration.audit`` on them;
the result is stored in ``ctxprec_audits`` (``store=False``: not). ``estimate_position_audit``
draws the same rows and only counts what the audit would send the judge (nothing is written).
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.engine import Engine

from ..calibration.audit import AuditEstimate, PositionAudit, estimate_audit, run_position_audit
from ..calibration.audit_table import write_audit
from ..calibration.run import read_cases
from ..cases.single_turn import LLMTestCase
from ..errors import CtxPrecError
from ..judge import defaults
from ..judge.models import resolve_judge
from ..metrics.contextual_precision import ContextualPrecisionMetric
from ..pipeline.columns import SourceColumns
from .draw import Draw, NothingToDrawError, draw_scored_rows
from .population import engine_scope

__all__ = ["audit_position", "estimate_position_audit"]


def _drawn_cases(
    engine: Engine,
    partition_key: str,
    n: int,
    judge: Any,
    *,
    seed: int,
    source_table: str | None,
    mapping: str | None,
    columns: SourceColumns | dict[str, str] | None,
) -> tuple[Draw, dict[str, LLMTestCase], dict[str, str]]:
    probe = ContextualPrecisionMetric(model=judge, include_reason=False)
    try:
        draw = draw_scored_rows(
            engine, partition_key, n, seed=seed, judge_model=probe.evaluation_model,
            prompt_version=probe.prompt_version, source_table=source_table, mapping=mapping,
        )  # fmt: skip
    except NothingToDrawError:
        raise CtxPrecError(
            f"{partition_key} has no contextual_precision scores of judge {probe.evaluation_model} with prompt "
            f"{probe.prompt_version} to audit: score the partition with that judge first (the audit compares "
            "the judge with its own stored verdicts)"
        ) from None
    table = draw.population.source_table or source_table or "retrieval_logs"
    read = read_cases(engine, [r.log_id for r in draw.rows], source_table=table, columns=columns)
    cases = {k: v for k, v in read.items() if not isinstance(v, str)}
    skipped = {k: v for k, v in read.items() if isinstance(v, str)}
    return draw, cases, skipped


def audit_position(
    warehouse: str | Engine,
    partition_key: str,
    n: int,
    *,
    judge: Any = "lexical",
    seed: int = 0,
    max_cost: float | None = None,
    concurrency: int = defaults.CONCURRENCY,
    source_table: str | None = None,
    mapping: str | None = None,
    columns: SourceColumns | dict[str, str] | None = None,
    store: bool = True,
) -> PositionAudit:
    """Re-judge ``n`` drawn rows of ``partition_key`` with their nodes reversed (no judgment
    cache) and compare with the judge's stored verdicts; store the audit in ``ctxprec_audits``.
    ``judge``: a model name or a ``JudgeModel``."""
    judge = resolve_judge(judge)
    with engine_scope(warehouse, read_only=not store) as engine:
        draw, cases, skipped = _drawn_cases(
            engine, partition_key, n, judge, seed=seed, source_table=source_table, mapping=mapping, columns=columns
        )
        stored = {r.log_id: r.verdicts for r in draw.rows}
        audit = run_position_audit(
            cases, stored, judge=judge, partition_key=partition_key, source_table=draw.population.source_table,
            seed=seed, requested=n, concurrency=concurrency, max_cost=max_cost, skipped=skipped,
        )  # fmt: skip
        if store and audit.cases:
            write_audit(engine, audit)
    return audit


def estimate_position_audit(
    warehouse: str | Engine,
    partition_key: str,
    n: int,
    *,
    judge: Any = "lexical",
    seed: int = 0,
    source_table: str | None = None,
    mapping: str | None = None,
    columns: SourceColumns | dict[str, str] | None = None,
) -> AuditEstimate:
    """What ``audit_position`` with the same arguments would send the judge (read-only)."""
    judge = resolve_judge(judge)
    with engine_scope(warehouse) as engine:
        _draw, cases, skipped = _drawn_cases(
            engine, partition_key, n, judge, seed=seed, source_table=source_table, mapping=mapping, columns=columns
        )
    return estimate_audit(cases, judge=judge, partition_key=partition_key, skipped=skipped)
