"""Self-consistency (``samples=N``) against the local OpenAI-compatible judge server: what N
sampled answers per node cost in requests, tokens, wall time and client CPU, with ``n`` and
without it, measured interleaved with ``samples=1`` in one run.

Run from the repository root:  .venv/bin/python bench/bench_self_consistency.py

Cases as in ``bench_judge_throughput.py`` (5 nodes of ~400 characters). The server (a child
process) answers every request after ``--latency`` s; with sampling its choices follow the
pattern right, right, wrong, right, wrong (every node flips in 2 of 5 samples), so the majority
must still give every planted score exactly, with agreement 0.6 on every node. Scenarios, in
rotation for ``--repeats`` rounds: ``samples=1``; ``samples=N`` with ``n`` (one request per case);
``samples=N`` on an endpoint that ignores ``n`` (then N requests per case). Medians are printed.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere in the repo
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_judge_throughput import ChildServer, make_cases  # noqa: E402

from ctxprec_ops import ContextualPrecisionMetric, evaluate  # noqa: E402
from ctxprec_ops.judge.models.openai_judge import OpenAIJudge  # noqa: E402
from tests.fixtures.judge_server import contrary_oracle, default_oracle  # noqa: E402


def run(server: ChildServer, scenario: str, samples: int, n_cases: int, concurrency: int, latency: float) -> dict:
    config: dict[str, Any] = {"latency": latency}
    if samples > 1:
        config["choice_oracles"] = [default_oracle, default_oracle, contrary_oracle, default_oracle, contrary_oracle]
    if scenario == "no n":
        config["n_mode"] = "ignore"
    server.configure(0, config)
    cases, expected = make_cases(n_cases, 7)
    judge = OpenAIJudge("bench-judge", base_url=server.base_url, api_key="bench-key", timeout=30.0)
    metric = ContextualPrecisionMetric(model=judge, samples=samples)
    cpu0, t0 = time.process_time(), time.perf_counter()
    result = evaluate(cases, [metric], concurrency=concurrency, show_progress=False)
    wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
    correct = sum(1 for r, want in zip(result, expected) if r.score is not None and abs(r.score - want) <= 1e-12)
    agreements = [v.agreement for r in result for v in r.verdicts if getattr(v, "agreement", None) is not None]
    return {
        "wall": wall,
        "cpu_per_case_ms": 1000 * cpu / n_cases,
        "requests_per_case": server.stats()["calls"] / n_cases,
        "prompt_tokens_per_case": result.prompt_tokens / n_cases,
        "completion_tokens_per_case": result.completion_tokens / n_cases,
        "correct": correct,
        "mean_agreement": statistics.fmean(agreements) if agreements else None,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cases", type=int, default=320)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--latency", type=float, default=0.3)
    ap.add_argument("--samples", type=int, default=5)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    scenarios = [("samples=1", 1), (f"samples={args.samples}, n", args.samples), ("no n", args.samples)]
    server = ChildServer()
    try:
        run(server, "samples=1", 1, 32, args.concurrency, 0.0)  # warm-up
        got: dict[str, list[dict]] = {name: [] for name, _ in scenarios}
        for _ in range(args.repeats):
            for name, samples in scenarios:
                got[name].append(run(server, name, samples, args.cases, args.concurrency, args.latency))
    finally:
        server.stop()
    base = statistics.median(r["wall"] for r in got["samples=1"])
    base_cpu = statistics.median(r["cpu_per_case_ms"] for r in got["samples=1"])
    base_ct = statistics.median(r["completion_tokens_per_case"] for r in got["samples=1"])
    print(
        f"{args.cases} cases x 5 nodes, concurrency {args.concurrency}, latency {args.latency} s, "
        f"{args.repeats} interleaved rounds (medians); load {os.getloadavg()[0]:.1f}"
    )
    print(
        f"{'scenario':<14} {'wall s':>7} {'x':>5} {'req/case':>8} {'prompt tok':>10} {'compl tok':>9} {'x':>5} "
        f"{'CPU ms/case':>11} {'x':>5} {'correct':>8} {'agreement':>9}"
    )
    ok = True
    for name, _ in scenarios:
        rs = got[name]

        def med(key: str, rs: list[dict] = rs) -> float:
            return statistics.median(r[key] for r in rs)

        agree = rs[0]["mean_agreement"]
        correct = min(r["correct"] for r in rs)
        ok &= correct == args.cases
        print(
            f"{name:<14} {med('wall'):>7.2f} {med('wall') / base:>5.2f} {med('requests_per_case'):>8.2f} "
            f"{med('prompt_tokens_per_case'):>10.0f} {med('completion_tokens_per_case'):>9.0f} "
            f"{med('completion_tokens_per_case') / base_ct:>5.2f} {med('cpu_per_case_ms'):>11.2f} "
            f"{med('cpu_per_case_ms') / base_cpu:>5.2f} {correct:>4}/{args.cases:<3} "
            f"{'—' if agree is None else f'{agree:.2f}':>9}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
