"""Judge throughput of ``evaluate()`` against the local OpenAI-compatible judge server.

Run from the repository root:  .venv/bin/python bench/bench_judge_throughput.py

Scenario 1 (throughput): every case has 5 nodes of ~400 characters, the server answers after
``--latency`` s, ``evaluate(..., concurrency=C)``. The ceiling is ``limit = C / (latency x judge
calls per case)`` cases/s; the target is >= 90 % of it with <= 1 judge call per case.
The case count is a multiple of C so the last wave is full (with 200 cases at C=32 the last wave
has 8 requests and no evaluator could exceed 89 % of the limit).

Scenario 2 (faults): 200 cases, 10 % HTTP 429 (with Retry-After), 5 % HTTP 500, 5 % malformed
answers. Target: every case ends with exactly the score its planted relevance gives.

The server runs in a child process (as a real endpoint would, it does not share the GIL with
the evaluator); ``--in-process`` runs it in a thread instead. A short warm-up run (imports,
first connections) precedes the measured runs. Each scenario runs ``--repeats`` times; medians
are printed. Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import os
import random
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere in the repo

from ctxprec_ops import ContextualPrecisionMetric, LLMTestCase, evaluate  # noqa: E402
from ctxprec_ops.judge.models.openai_judge import JUDGE_ANSWER_SCHEMA, OpenAIJudge  # noqa: E402
from ctxprec_ops.scoring.formula import contextual_precision  # noqa: E402
from ctxprec_ops.scoring.template import ContextualPrecisionTemplate  # noqa: E402
from tests.fixtures.judge_server import JudgeServer  # noqa: E402

NODES_PER_CASE = 5
NODE_CHARS = 400
_WORDS = (
    "warehouse retrieval latency index shard replica vector cosine embedding partition ledger "
    "invoice tariff harbour glacier orchard violin compiler kernel thread mutex cache policy "
    "refund customer shipment carrier customs voltage turbine rotor sensor calibration drift"
).split()


@dataclass
class Run:
    elapsed: float
    cases: int
    calls: int
    prompt_tokens: int
    completion_tokens: int
    correct: int
    errors: int
    outcomes: dict[str, int]
    max_in_flight: int
    avg_in_flight: float
    stats: dict[str, int]


def make_cases(n: int, seed: int) -> tuple[list[LLMTestCase], list[float]]:
    """``n`` cases of 5 nodes; a node is relevant (contains RELEVANT) with probability 0.4."""
    rng = random.Random(seed)
    cases, expected = [], []
    for i in range(n):
        relevance = [rng.random() < 0.4 for _ in range(NODES_PER_CASE)]
        nodes = []
        for k, rel in enumerate(relevance, start=1):
            marker = (
                "This passage is RELEVANT."
                if rel
                else rng.choice(["This passage is IRRELEVANT.", "Unrelated passage.", "Background <only> & noise."])
            )
            words = []
            while sum(len(w) + 1 for w in words) < NODE_CHARS - len(marker) - 20:
                words.append(rng.choice(_WORDS))
            nodes.append(f"Doc {i}-{k}: {' '.join(words)}. {marker}")
        cases.append(
            LLMTestCase(
                input=f"Question {i}: how does the {rng.choice(_WORDS)} relate to the {rng.choice(_WORDS)}?",
                actual_output=f"Answer {i}.",
                expected_output=f"The expected answer {i} draws on the relevant passages.",
                retrieval_context=nodes,
                id=f"case-{i}",
            )
        )
        expected.append(contextual_precision(relevance))
    return cases, expected


def _avg_in_flight(requests: list[dict[str, Any]]) -> float:
    """Time-weighted mean number of requests in flight, first arrival to last answer."""
    spans = [(r["arrived"], r["finished"]) for r in requests if "finished" in r]
    if not spans:
        return 0.0
    window = max(f for _, f in spans) - min(a for a, _ in spans)
    return sum(f - a for a, f in spans) / window if window > 0 else 0.0


class LocalServer:
    """The judge server in a thread of this process."""

    def __init__(self) -> None:
        self.server = JudgeServer().start()
        self.base_url = self.server.base_url

    def configure(self, seed: int, config: dict[str, Any]) -> None:
        self.server.reset(seed)
        for name, value in config.items():
            setattr(self.server, name, value)

    def stats(self) -> dict[str, Any]:
        s = self.server
        return {
            "calls": s.calls,
            "outcomes": dict(s.outcomes),
            "max_in_flight": s.max_in_flight,
            "avg_in_flight": _avg_in_flight(s.requests),
        }

    def timeline(self) -> list[dict[str, float]]:
        """When each request arrived and finished (the server's monotonic clock)."""
        return [{"arrived": r["arrived"], "finished": r["finished"]} for r in self.server.requests if "finished" in r]

    def stop(self) -> None:
        self.server.stop()


def _serve_in_child(conn: Any) -> None:
    local = LocalServer()
    conn.send(local.base_url)
    while True:
        cmd, args = conn.recv()
        if cmd == "stop":
            local.stop()
            conn.send(None)
            return
        conn.send(getattr(local, cmd)(*args))


class ChildServer:
    """The judge server in a child process, driven over a pipe."""

    def __init__(self) -> None:
        ctx = mp.get_context("spawn")
        self._conn, child = ctx.Pipe()
        self._proc = ctx.Process(target=_serve_in_child, args=(child,), daemon=True)
        self._proc.start()
        self.base_url = self._conn.recv()

    def _ask(self, cmd: str, *args: Any) -> Any:
        self._conn.send((cmd, args))
        return self._conn.recv()

    def configure(self, seed: int, config: dict[str, Any]) -> None:
        self._ask("configure", seed, config)

    def stats(self) -> dict[str, Any]:
        return self._ask("stats")

    def timeline(self) -> list[dict[str, float]]:
        return self._ask("timeline")

    def stop(self) -> None:
        self._ask("stop")
        self._proc.join(timeout=10)


def run_once(
    server: LocalServer | ChildServer,
    n_cases: int,
    concurrency: int,
    latency: float,
    faults: dict[str, float],
    seed: int,
) -> Run:
    server.configure(seed, {"latency": latency, **faults})
    cases, expected = make_cases(n_cases, seed)
    judge = OpenAIJudge("bench-judge", base_url=server.base_url, api_key="bench-key", timeout=30.0)
    metric = ContextualPrecisionMetric(model=judge)
    start = time.perf_counter()
    result = evaluate(cases, [metric], concurrency=concurrency, show_progress=False)
    elapsed = time.perf_counter() - start
    correct = sum(
        1
        for r, want in zip(result, expected)
        if r.error is None and r.score is not None and abs(r.score - want) <= 1e-12
    )
    st = server.stats()
    return Run(
        elapsed,
        n_cases,
        st["calls"],
        result.prompt_tokens,
        result.completion_tokens,
        correct,
        len(result.errors),
        st["outcomes"],
        st["max_in_flight"],
        st["avg_in_flight"],
        dict(getattr(result, "stats", {})),
    )


def run_raw_client(server: LocalServer | ChildServer, n_cases: int, concurrency: int, latency: float) -> float:
    """Baseline: the bare openai client under a semaphore, same prompts and response format
    as the judge, no evaluator; returns cases/s. It shows what this machine allows."""
    import openai

    server.configure(0, {"latency": latency})
    cases, _ = make_cases(n_cases, 0)
    prompts = [
        ContextualPrecisionTemplate.generate_verdicts(c.input, c.expected_output, c.retrieval_context) for c in cases
    ]

    fmt: Any = {
        "type": "json_schema",
        "json_schema": {"name": "judge_answer", "strict": True, "schema": JUDGE_ANSWER_SCHEMA},
    }

    async def main() -> None:
        gate = asyncio.Semaphore(concurrency)
        async with openai.AsyncOpenAI(base_url=server.base_url, api_key="bench-key", max_retries=0) as client:

            async def one(prompt: str) -> None:
                async with gate:
                    await client.chat.completions.create(
                        model="bench-judge",
                        temperature=0,
                        response_format=fmt,
                        messages=[{"role": "user", "content": prompt}],
                    )

            await asyncio.gather(*(one(p) for p in prompts))

    start = time.perf_counter()
    asyncio.run(main())
    return n_cases / (time.perf_counter() - start)


def median(values: list[float]) -> float:
    return statistics.median(values)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--latency", type=float, default=0.3)
    ap.add_argument("--throughput-cases", type=int, default=640)
    ap.add_argument("--fault-cases", type=int, default=200)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--in-process", action="store_true", help="run the server in a thread here")
    args = ap.parse_args()
    os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
    ok = True

    server = LocalServer() if args.in_process else ChildServer()
    try:
        where = "in-process thread" if args.in_process else "child process"
        print(
            f"judge server {server.base_url} ({where}); latency {args.latency}s; "
            f"concurrency {args.concurrency}; {NODES_PER_CASE} nodes x ~{NODE_CHARS} chars"
        )
        run_once(server, args.concurrency, args.concurrency, 0.0, {}, 999)  # warm-up

        # -- scenario 1: throughput ------------------------------------------------------
        runs = [
            run_once(server, args.throughput_cases, args.concurrency, args.latency, {}, seed)
            for seed in range(args.repeats)
        ]
        rate = median([r.cases / r.elapsed for r in runs])
        calls = median([r.calls / r.cases for r in runs])
        limit = args.concurrency / (args.latency * max(calls, 1.0))
        ratio = rate / limit
        print(f"\n[throughput] {args.throughput_cases} cases x {args.repeats} runs")
        for r in runs:
            print(
                f"  run: {r.elapsed:6.2f} s  {r.cases / r.elapsed:6.1f} cases/s  "
                f"in flight avg {r.avg_in_flight:4.1f} max {r.max_in_flight}  errors {r.errors}"
            )
        print(f"  cases/s (median)            {rate:8.1f}")
        print(f"  judge calls per case        {calls:8.2f}")
        print(f"  prompt tokens per case      {median([r.prompt_tokens / r.cases for r in runs]):8.0f}")
        print(f"  completion tokens per case  {median([r.completion_tokens / r.cases for r in runs]):8.0f}")
        print(f"  limit = C/(latency*calls)   {limit:8.1f} cases/s")
        print(f"  achieved / limit            {ratio:8.1%}   (target >= 90 %, <= 1 call per case)")
        raw = median(
            [run_raw_client(server, args.throughput_cases, args.concurrency, args.latency) for _ in range(args.repeats)]
        )
        print(
            f"  bare openai client baseline {raw:8.1f} cases/s = {raw / limit:.1%} of the limit "
            f"(evaluate() reaches {rate / raw:.1%} of it)"
        )
        if ratio < 0.9 or calls > 1.0 or any(r.errors for r in runs):
            ok = False
            hint = " (the bare client misses 90 % too: this machine is the bottleneck)" if raw < 0.9 * limit else ""
            print(f"  TARGET MISSED{hint}")

        # -- scenario 2: faults ------------------------------------------------------------
        faults = {"p_429": 0.10, "p_500": 0.05, "p_malformed": 0.05}
        runs = [
            run_once(server, args.fault_cases, args.concurrency, args.latency, faults, 100 + seed)
            for seed in range(args.repeats)
        ]
        print(
            f"\n[faults] {args.fault_cases} cases x {args.repeats} runs; "
            + ", ".join(f"{k[2:]}={v:.0%}" for k, v in faults.items())
        )
        for r in runs:
            served = ", ".join(f"{k}:{v}" for k, v in sorted(r.outcomes.items()))
            print(
                f"  run: {r.elapsed:6.2f} s  correct {r.correct}/{r.cases}  "
                f"extra calls {r.calls - r.cases} (retries {r.stats.get('retries')}, "
                f"repairs {r.stats.get('repairs')})  in flight avg {r.avg_in_flight:4.1f}  "
                f"errors {r.errors}  served {{{served}}}"
            )
        correct = median([r.correct for r in runs])
        print(f"  correct scores (median)     {correct:8.0f} / {args.fault_cases}   (target: all)")
        print(f"  extra judge calls (median)  {median([r.calls - r.cases for r in runs]):8.0f}")
        print(f"  elapsed (median)            {median([r.elapsed for r in runs]):8.2f} s")
        if any(r.correct != r.cases for r in runs):
            ok = False
            print("  TARGET MISSED")
    finally:
        server.stop()

    print("\nall targets met" if ok else "\nsome targets missed")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
