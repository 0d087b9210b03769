"""Label-corrected means by simulation: how often the 95% interval covers the true gold mean, how
wide it is, and how far the judge's raw mean and the corrected mean are from the truth, by the
number of labelled rows.

Run from the repository root:  .venv/bin/python bench/bench_correction.py [--markdown]

Each simulated partition has ``--rows`` retrievals of 3-10 ranked nodes whose gold relevance is
drawn with a probability falling with the rank (0.6 at rank 1, x0.8 per rank). Judges with known
errors, independent of anything else:

- ``over-calls``: an irrelevant node is called relevant with probability 0.25 (a relevant one is
  missed with 0.05);
- ``under-calls``: a relevant node is missed with probability 0.30 (an irrelevant one called
  relevant with 0.03);
- ``favours the top``: rank-dependent: an irrelevant node at rank 1 or 2 is called relevant
  with probability 0.3, a relevant node at rank 3 or later is missed with probability 0.5 (0.05
  errors elsewhere): the position bias ``ctxprec audit position`` finds.

Gold and judge scores are the metric's formula over the gold labels and over the verdicts. Per
partition and label count n, n rows are drawn uniformly without replacement and the corrected
mean is ``ctxprec_ops.calibration.correction.difference_estimate`` — the code ``ctxprec check``
runs. Over ``--partitions`` partitions (seeded) the table gives the coverage of the 95%
interval, its mean width, the corrected mean's RMSE and the raw mean's mean error (its bias).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere in the repo

from ctxprec_ops.calibration.correction import difference_estimate, t_quantile  # noqa: E402
from ctxprec_ops.scoring.formula import contextual_precision  # noqa: E402

LABELS = (5, 10, 20, 40, 80)


@dataclass(frozen=True)
class KnownJudge:
    """A judge whose errors are known: false positive / negative rates; before rank ``late_from``
    the false positive rate is at least ``early_fp``, from it on relevant nodes are missed at
    least at ``late_miss``."""

    name: str
    fp: float
    fn: float
    early_fp: float = 0.0
    late_miss: float = 0.0
    late_from: int = 3

    def verdict(self, rng: random.Random, relevant: bool, rank: int) -> bool:
        early = rank < self.late_from
        if relevant:
            return rng.random() >= (self.fn if early else max(self.fn, self.late_miss))
        return rng.random() < (max(self.fp, self.early_fp) if early else self.fp)


JUDGES = (
    KnownJudge("over-calls", fp=0.25, fn=0.05),
    KnownJudge("under-calls", fp=0.03, fn=0.30),
    KnownJudge("favours the top", fp=0.05, fn=0.05, early_fp=0.3, late_miss=0.5),
)


def simulate_partition(rng: random.Random, rows: int, judge: KnownJudge) -> tuple[list[float], list[float]]:
    """(gold scores, judge scores) of one partition's ``rows`` retrievals."""
    gold, judged = [], []
    for _ in range(rows):
        n = rng.randint(3, 10)
        labels = [rng.random() < 0.6 * 0.8 ** (k - 1) for k in range(1, n + 1)]
        verdicts = [judge.verdict(rng, rel, k) for k, rel in enumerate(labels, start=1)]
        gold.append(contextual_precision(labels))
        judged.append(contextual_precision(verdicts))
    return gold, judged


@dataclass
class Cell:
    covered: int = 0
    estimates: int = 0
    widths: float = 0.0
    sq_error: float = 0.0
    raw_error: float = 0.0
    raw_covered: int = 0  # the judge's own 95% t-interval over the partition's rows contains the truth

    @property
    def raw_coverage(self) -> float:
        return self.raw_covered / self.estimates

    @property
    def coverage(self) -> float:
        return self.covered / self.estimates

    @property
    def width(self) -> float:
        return self.widths / self.estimates

    @property
    def rmse(self) -> float:
        return (self.sq_error / self.estimates) ** 0.5


def simulate(
    partitions: int = 400, rows: int = 300, labels: tuple[int, ...] = LABELS, seed: int = 0
) -> dict[tuple[str, int], Cell]:
    """``{(judge name, labelled rows): Cell}`` over ``partitions`` seeded partitions per judge."""
    out: dict[tuple[str, int], Cell] = {}
    for j, judge in enumerate(JUDGES):
        rng = random.Random(seed * 1000 + j)
        for _ in range(partitions):
            gold, judged = simulate_partition(rng, rows, judge)
            truth = statistics.fmean(gold)
            judge_mean = statistics.fmean(judged)
            half = t_quantile(0.975, rows - 1) * statistics.stdev(judged) / rows**0.5
            raw_covered = int(judge_mean - half <= truth <= judge_mean + half)
            for n in labels:
                idx = rng.sample(range(rows), n)
                # minimum=2: the rows below the product's minimum (10) are measured too, to show why it is one
                est = difference_estimate(judge_mean, rows, [gold[i] for i in idx], [judged[i] for i in idx], minimum=2)
                cell = out.setdefault((judge.name, n), Cell())
                assert est.mean is not None and est.ci_low is not None and est.ci_high is not None
                cell.estimates += 1
                cell.covered += int(est.ci_low <= truth <= est.ci_high)
                cell.widths += est.ci_high - est.ci_low
                cell.sq_error += (est.mean - truth) ** 2
                cell.raw_error += judge_mean - truth
                cell.raw_covered += raw_covered
    return out


def table(results: dict[tuple[str, int], Cell], markdown: bool = False) -> str:
    labels = sorted({n for _, n in results})
    lines = []
    if markdown:
        lines.append(
            "| judge | judge's mean: error (its 95% CI covers the truth) | labelled rows "
            "| corrected 95% CI covers the truth | CI width | corrected RMSE |"
        )
        lines.append("|---|---:|---:|---:|---:|---:|")
    else:
        lines.append(
            f"{'judge':<18} {'raw error (CI covers)':>21} {'labels':>6} {'coverage':>8} {'width':>6} {'RMSE':>6}"
        )
    for judge in JUDGES:
        for i, n in enumerate(labels):
            c = results[(judge.name, n)]
            raw = f"{c.raw_error / c.estimates:+.3f} ({c.raw_coverage:.0%})" if i == 0 else ""
            name = judge.name if i == 0 else ""
            if markdown:
                lines.append(f"| {name} | {raw} | {n} | {c.coverage:.1%} | {c.width:.3f} | {c.rmse:.3f} |")
            else:
                lines.append(f"{name:<18} {raw:>21} {n:>6} {c.coverage:>8.1%} {c.width:>6.3f} {c.rmse:>6.3f}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--partitions", type=int, default=400, help="simulated partitions per judge (default: 400)")
    ap.add_argument("--rows", type=int, default=300, help="scored rows per partition (default: 300)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--markdown", action="store_true", help="print the table as markdown (as docs/trust.md shows it)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    results = simulate(args.partitions, args.rows, seed=args.seed)
    print(table(results, markdown=args.markdown))
    if not args.markdown:
        print(
            f"\n{args.partitions} partitions x {args.rows} rows per judge, seed {args.seed}; "
            f"{time.perf_counter() - t0:.1f} s"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
