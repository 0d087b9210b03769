"""Agreement between a judge and labels, with case-level bootstrap confidence intervals.

Input: per labelled case, the label of each labelled node and the judge's verdict on it, plus
(for cases whose every retrieved node is labelled) the label-based score and the judge's score.

- verdicts (positive class = relevant): precision = TP/(TP+FP), recall = TP/(TP+FN),
  F1 = 2PR/(P+R), Cohen's κ = (p_o − p_e)/(1 − p_e) with p_o the observed agreement and p_e the
  agreement expected by chance from the two marginals (κ = 1 when p_e = 1 and they agree fully);
- scores: MAE = mean |judge score − label score|; Spearman's ρ = Pearson correlation of the
  ranks (ties get their average rank); undefined (None) with fewer than 2 cases or a constant side.

CIs: percentile bootstrap (default 1,000 resamples, fixed seed) over **cases**, not nodes — the
nodes of one case are judged together and are not independent. A figure undefined in a
resample is left out of that figure's interval.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

__all__ = ["CaseLabels", "Estimate", "Agreement", "agreement", "verdict_figures", "point_figures", "spearman"]


@dataclass(frozen=True)
class CaseLabels:
    """One labelled case: (label, verdict) per labelled node; scores when the case is complete."""

    log_id: str
    labels: tuple[bool, ...]
    verdicts: tuple[bool, ...]
    label_score: float | None = None
    judge_score: float | None = None


@dataclass(frozen=True)
class Estimate:
    value: float | None
    low: float | None = None
    high: float | None = None

    def fmt(self, digits: int = 3) -> str:
        if self.value is None:
            return "—"
        if self.low is None or self.high is None:
            return f"{self.value:.{digits}f}"
        return f"{self.value:.{digits}f} [{self.low:.{digits}f}, {self.high:.{digits}f}]"


@dataclass(frozen=True)
class Agreement:
    cases: int
    nodes: int
    scored_cases: int  # cases with every node labelled: the score comparisons use these
    tp: int
    fp: int
    fn: int
    tn: int
    precision: Estimate
    recall: Estimate
    f1: Estimate
    kappa: Estimate
    mae: Estimate
    spearman: Estimate


def verdict_figures(
    tp: float, fp: float, fn: float, tn: float
) -> tuple[float | None, float | None, float | None, float | None]:
    """(precision, recall, F1, κ) from a confusion matrix; None where a denominator is 0."""
    precision = tp / (tp + fp) if tp + fp else None
    recall = tp / (tp + fn) if tp + fn else None
    f1 = 2 * tp / (2 * tp + fp + fn) if 2 * tp + fp + fn else None
    n = tp + fp + fn + tn
    kappa = None
    if n:
        po = (tp + tn) / n
        pe = ((tp + fp) * (tp + fn) + (fn + tn) * (fp + tn)) / (n * n)
        kappa = (po - pe) / (1 - pe) if pe < 1 else (1.0 if po == 1 else None)
    return precision, recall, f1, kappa


def _ranks(x: np.ndarray) -> np.ndarray:
    order = np.argsort(x, kind="mergesort")
    ranks = np.empty(len(x), dtype=np.float64)
    ranks[order] = np.arange(1, len(x) + 1, dtype=np.float64)
    # ties: the average of their ranks
    _, inverse, counts = np.unique(x, return_inverse=True, return_counts=True)
    if (counts > 1).any():
        sums = np.bincount(inverse, weights=ranks)
        ranks = sums[inverse] / counts[inverse]
    return ranks


def spearman(a: Sequence[float], b: Sequence[float]) -> float | None:
    """Spearman's ρ with average ranks for ties; None if fewer than 2 pairs or a side is constant."""
    x, y = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    if len(x) < 2:
        return None
    rx, ry = _ranks(x), _ranks(y)
    rx, ry = rx - rx.mean(), ry - ry.mean()
    denom = float(np.sqrt((rx * rx).sum() * (ry * ry).sum()))
    return float((rx * ry).sum() / denom) if denom else None


def point_figures(
    cases: Sequence[CaseLabels], idx: np.ndarray, conf: np.ndarray, scores: np.ndarray, scored: np.ndarray
) -> list[float | None]:
    """The six figures (precision, recall, F1, kappa, score MAE, Spearman rho) of the cases at
    ``idx`` (rows of the per-case arrays ``conf``, ``scores``, ``scored``)."""
    tp, fp, fn, tn = conf[idx].sum(axis=0)
    p, r, f1, k = verdict_figures(float(tp), float(fp), float(fn), float(tn))
    s_idx = idx[scored[idx]]
    mae = rho = None
    if len(s_idx):
        diff = scores[s_idx, 1] - scores[s_idx, 0]
        mae = float(np.abs(diff).mean())
        rho = spearman(scores[s_idx, 0], scores[s_idx, 1])
    return [p, r, f1, k, mae, rho]


def agreement(cases: Sequence[CaseLabels], *, resamples: int = 1000, seed: int = 0, level: float = 0.95) -> Agreement:
    """Every agreement figure of ``cases`` with its bootstrap CI (see the module docstring)."""
    conf = np.zeros((len(cases), 4), dtype=np.int64)  # tp, fp, fn, tn per case
    scores = np.zeros((len(cases), 2), dtype=np.float64)  # label score, judge score
    scored = np.zeros(len(cases), dtype=bool)
    for i, c in enumerate(cases):
        for lab, ver in zip(c.labels, c.verdicts):
            conf[i, (0 if ver else 3) if lab == ver else (1 if ver else 2)] += 1
        if c.label_score is not None and c.judge_score is not None:
            scores[i] = (c.label_score, c.judge_score)
            scored[i] = True
    all_idx = np.arange(len(cases))
    point = point_figures(cases, all_idx, conf, scores, scored)
    lows: list[float | None] = [None] * 6
    highs: list[float | None] = [None] * 6
    if len(cases) >= 2 and resamples > 0:
        rng = np.random.default_rng(seed)
        draws: list[list[float]] = [[] for _ in range(6)]
        for _ in range(resamples):
            idx = rng.integers(0, len(cases), len(cases))
            for j, v in enumerate(point_figures(cases, idx, conf, scores, scored)):
                if v is not None:
                    draws[j].append(v)
        alpha = (1 - level) / 2
        for j in range(6):
            if point[j] is not None and draws[j]:
                lows[j] = float(np.quantile(draws[j], alpha))
                highs[j] = float(np.quantile(draws[j], 1 - alpha))
    tp, fp, fn, tn = (int(v) for v in conf.sum(axis=0))
    est = [Estimate(point[j], lows[j], highs[j]) for j in range(6)]
    return Agreement(
        cases=len(cases),
        nodes=int(conf.sum()),
        scored_cases=int(scored.sum()),
        tp=tp,
        fp=fp,
        fn=fn,
        tn=tn,
        precision=est[0],
        recall=est[1],
        f1=est[2],
        kappa=est[3],
        mae=est[4],
        spearman=est[5],
    )
