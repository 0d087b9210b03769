"""The position-bias audit: does the judge's verdict on a node depend on where the node is shown?

Each audited row is judged again with its nodes in **reversed order**, numbered 1..n in the order
shown (so no id gives the original rank away): the node shown k-th is the node of original rank
n + 1 − k, and its verdict is mapped back to that rank. The answers are compared with the
stored verdicts of the same judge and prompt version (original order):

- ``flip_rate``: the share of node verdicts that differ;
- ``score_shift``: the mean over cases of (score of the reversed verdicts mapped back − score of
  the stored verdicts), both by the formula over the original ranking, with its paired 95%
  t-interval (``ci_low``, ``ci_high``) and two-sided p-value;
- ``by_rank``: nodes and flips per original rank (a judge that misses late nodes flips the first
  ranks and the last ones, where the two orders differ most).

The judgment cache is neither read nor written: it is keyed per node text, so a cached verdict
would answer the reversed question with the original one and hide any order effect. Calls go
through ``evaluate`` with the run's spending cap (``Budget``); a case the cap refuses is counted
in ``failed`` and left out. ``estimate_audit`` counts the calls, tokens and cost first, without
calling the judge (the same arithmetic as ``ctxprec estimate``, every node judged).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from ..cases.contexts import is_plain
from ..cases.single_turn import LLMTestCase
from ..judge import defaults
from ..judge.budget import Budget
from ..judge.pricing import price_of
from ..judge.tokens import token_counter
from ..metrics.contextual_precision import ContextualPrecisionMetric
from ..pipeline.estimate import COMPLETION_TOKENS_PER_CALL, COMPLETION_TOKENS_PER_NODE, PROMPT_TOKENS_PER_CALL
from ..scoring.formula import contextual_precision
from ..scoring.template import answer_format
from .correction import t_quantile

__all__ = [
    "PositionAudit",
    "AuditEstimate",
    "reversed_case",
    "stored_relevance",
    "run_position_audit",
    "estimate_audit",
]


def reversed_case(case: LLMTestCase) -> LLMTestCase | None:
    """``case`` with its nodes in reversed order (None: not plain text nodes, which this audit
    does not reorder)."""
    items = case.retrieval_context or []
    if getattr(case, "multimodal", False) or not items or not is_plain(items):
        return None
    return LLMTestCase(
        input=case.input,
        expected_output=case.expected_output,
        retrieval_context=list(reversed(items)),
        id=case.id,
    )


def stored_relevance(verdicts: Any) -> list[bool] | None:
    """A score row's verdicts as relevance by rank 1..n (None: not a complete 1..n list)."""
    import json

    if isinstance(verdicts, (str, bytes)):
        try:
            verdicts = json.loads(verdicts)
        except ValueError:
            return None
    if not isinstance(verdicts, list):
        return None
    try:
        by_node = {int(v["node"]): bool(v["relevant"]) for v in verdicts}
    except (KeyError, TypeError, ValueError):
        return None
    if sorted(by_node) != list(range(1, len(verdicts) + 1)):
        return None
    return [by_node[k] for k in range(1, len(by_node) + 1)]


@dataclass
class PositionAudit:
    """One audit's figures (``to_dict`` is ``ctxprec audit position --json``)."""

    partition_key: str
    metric: str
    source_table: str | None
    judge_model: str
    prompt_version: str
    seed: int
    requested: int
    cases: int = 0
    nodes: int = 0
    flipped: int = 0
    flip_rate: float | None = None
    score_shift: float | None = None
    ci_low: float | None = None
    ci_high: float | None = None
    p_value: float | None = None
    by_rank: list[dict[str, int]] = field(default_factory=list)
    failed: dict[str, str] = field(default_factory=dict)  # log_id -> why the judge gave no answer
    skipped: dict[str, str] = field(default_factory=dict)  # log_id -> why the row was not audited
    judge_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    cost: float | None = 0.0
    audit_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    audited_at: datetime = field(default_factory=lambda: datetime.now(UTC))

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["audited_at"] = self.audited_at.isoformat()
        d["kind"] = "position"
        return d

    def headline(self) -> str:
        if not self.cases:
            return f"{self.partition_key}: no case audited"
        ci = f" [95% CI {self.ci_low:+.3f}, {self.ci_high:+.3f}]" if self.ci_low is not None else ""
        p = f", p={self.p_value:.2g}" if self.p_value is not None else ""
        return (
            f"{self.partition_key} {self.judge_model}: nodes shown in reversed order: {self.flipped} of {self.nodes} "
            f"verdicts flipped ({self.flip_rate:.1%}); score shift {self.score_shift:+.3f}{ci}{p} over "
            f"{self.cases} cases"
        )


def _paired(
    shifts: Sequence[float], level: float = 0.95
) -> tuple[float | None, float | None, float | None, float | None]:
    """(mean, ci_low, ci_high, two-sided p) of paired differences (t-interval)."""
    from scipy.special import stdtr

    n = len(shifts)
    if n == 0:
        return None, None, None, None
    mean = math.fsum(shifts) / n
    if n < 2:
        return mean, None, None, None
    var = math.fsum((x - mean) ** 2 for x in shifts) / (n - 1)
    if var <= 1e-24:
        return mean, mean, mean, 1.0 if abs(mean) <= 1e-12 else 0.0
    se = math.sqrt(var / n)
    half = t_quantile(0.5 + level / 2, n - 1) * se
    p = 2.0 * float(stdtr(n - 1, -abs(mean / se)))
    return mean, mean - half, mean + half, min(1.0, p)


def run_position_audit(
    cases: Mapping[str, LLMTestCase],
    stored: Mapping[str, Any],
    *,
    judge: Any,
    partition_key: str,
    metric: str = "contextual_precision",
    source_table: str | None = None,
    seed: int = 0,
    requested: int | None = None,
    concurrency: int = defaults.CONCURRENCY,
    max_cost: float | None = None,
    skipped: Mapping[str, str] | None = None,
) -> PositionAudit:
    """Judge each of ``cases`` (log_id -> case, the original order) with its nodes reversed and
    compare with ``stored`` (log_id -> the score row's verdicts). ``judge``: a model name or a
    ``JudgeModel``. No judgment cache."""
    from ..evaluation.evaluate import evaluate

    probe = ContextualPrecisionMetric(model=judge, include_reason=False)
    audit = PositionAudit(
        partition_key, metric, source_table, probe.evaluation_model, probe.prompt_version, seed,
        requested if requested is not None else len(cases), skipped=dict(skipped or {}),
    )  # fmt: skip
    work: list[tuple[str, LLMTestCase, list[bool]]] = []
    for log_id, case in cases.items():
        original = stored_relevance(stored.get(log_id))
        rev = reversed_case(case)
        if original is None:
            audit.skipped[log_id] = "its score row has no complete verdicts"
        elif rev is None:
            audit.skipped[log_id] = "its nodes are not plain text (images or grouped sources are not reordered)"
        elif len(original) != len(rev.retrieval_context or []):
            audit.skipped[log_id] = "the row's nodes changed since it was scored"
        else:
            work.append((log_id, rev, original))
    if not work:
        return audit
    budget = Budget(max_cost) if max_cost is not None else None
    result = evaluate([w[1] for w in work], [probe], concurrency=concurrency, show_progress=False, budget=budget)
    ranks: dict[int, list[int]] = {}
    shifts: list[float] = []
    cost: float | None = 0.0
    for (log_id, _rev, original), r in zip(work, result.results):
        audit.judge_calls += r.judge_calls
        audit.prompt_tokens += r.prompt_tokens or 0
        audit.completion_tokens += r.completion_tokens or 0
        cost = None if cost is None or r.cost is None else cost + r.cost
        if r.error is not None or r.score is None:
            audit.failed[log_id] = f"{r.error_type or 'error'}: {r.error}"
            continue
        n = len(original)
        mapped: dict[int, bool] = {n + 1 - int(v.node): bool(v.relevant) for v in r.verdicts}
        again = [mapped[k] for k in range(1, n + 1)]
        for k, (a, b) in enumerate(zip(original, again), start=1):
            cell = ranks.setdefault(k, [0, 0])
            cell[0] += 1
            cell[1] += int(a != b)
        shifts.append(contextual_precision(again) - contextual_precision(original))
    audit.cost = cost
    audit.cases = len(shifts)
    audit.nodes = sum(c[0] for c in ranks.values())
    audit.flipped = sum(c[1] for c in ranks.values())
    audit.flip_rate = audit.flipped / audit.nodes if audit.nodes else None
    audit.by_rank = [{"rank": k, "nodes": c[0], "flipped": c[1]} for k, c in sorted(ranks.items())]
    audit.score_shift, audit.ci_low, audit.ci_high, audit.p_value = _paired(shifts)
    return audit


@dataclass
class AuditEstimate:
    """What an audit would send the judge (``--dry-run``): every node of every case is judged."""

    partition_key: str
    judge_model: str
    cases: int
    nodes: int
    judge_calls: int
    prompt_tokens: int
    completion_tokens: int
    cost: float | None
    tokenizer: str
    skipped: dict[str, str] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "dry_run": True}


def estimate_audit(
    cases: Mapping[str, LLMTestCase],
    *,
    judge: Any,
    partition_key: str,
    max_nodes_per_call: int | None = None,
    skipped: Mapping[str, str] | None = None,
) -> AuditEstimate:
    """Judge calls, tokens and cost of auditing ``cases`` (reversed prompts rendered with the real
    template and counted as ``ctxprec estimate`` counts them), without calling the judge."""
    metric = ContextualPrecisionMetric(model=judge, include_reason=False)
    template = metric.evaluation_template
    group = max_nodes_per_call or metric.max_nodes_per_call
    counter = token_counter(metric.evaluation_model)
    est = AuditEstimate(partition_key, metric.evaluation_model, 0, 0, 0, 0, 0, 0.0, counter.description)
    est.skipped = dict(skipped or {})
    for log_id, case in cases.items():
        rev = reversed_case(case)
        if rev is None:
            est.skipped[log_id] = "its nodes are not plain text (images or grouped sources are not reordered)"
            continue
        est.cases += 1
        for question, expected, nodes in metric.judge_requests(rev):
            est.nodes += len(nodes)
            for i in range(0, len(nodes), group):
                part = nodes[i : i + group]
                prompt = answer_format(template).prompt(question, expected, part, list(range(i + 1, i + len(part) + 1)))
                est.judge_calls += 1
                est.prompt_tokens += counter.count(prompt) + PROMPT_TOKENS_PER_CALL
                est.completion_tokens += COMPLETION_TOKENS_PER_CALL + COMPLETION_TOKENS_PER_NODE * len(part)
    price = getattr(metric.model, "price_per_million", None) or price_of(metric.evaluation_model)
    if getattr(metric.model, "offline", False):
        est.cost = 0.0
    elif price is None:
        est.cost = None
    else:
        est.cost = (est.prompt_tokens * price[0] + est.completion_tokens * price[1]) / 1_000_000
    return est
