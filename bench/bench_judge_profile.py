"""Where ``evaluate()``'s distance to the judge's limit goes: a breakdown, not a target.

Run from the repository root:  .venv/bin/python bench/bench_judge_profile.py

The cases, server and settings of ``bench_judge_throughput.py`` (320 cases, a 0.3 s judge, 32
requests in flight; the server in a child process). Printed, medians of ``--repeats`` runs:

* the slot-seconds lost against the limit (``C x wall - sum of the server's request times``),
  split by phase from the server's own arrival/finish times: before the first request arrives
  (start), until ``C`` are first in flight (ramp), the middle (turnaround: a slot idle between an
  answer leaving the server and the next request arriving), after the last request arrived (the
  last wave's drain) and after the last answer left (wind-down);
* the client's CPU per case (``time.process_time``) for ``evaluate()`` and for the bare ``openai``
  client (the same prompts under a semaphore): the difference is the evaluator's own share;
* the event loop's stalls: a 1 ms ticker's lateness (how long answers wait for the loop);
* with ``--profile``, one more ``evaluate()`` under cProfile: own time grouped by package.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import os
import pstats
import statistics
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_judge_throughput import ChildServer, make_cases  # noqa: E402

from ctxprec_ops import ContextualPrecisionMetric, a_evaluate  # noqa: E402
from ctxprec_ops.judge.models.openai_judge import JUDGE_ANSWER_SCHEMA, OpenAIJudge  # noqa: E402
from ctxprec_ops.scoring.template import ContextualPrecisionTemplate  # noqa: E402


def _phases(requests: list[dict[str, Any]], start: float, end: float, c: int) -> dict[str, float]:
    """Slot-seconds lost (``c`` minus requests in flight at the server, integrated) per phase."""
    spans = sorted((r["arrived"], r["finished"]) for r in requests if "finished" in r)
    events = sorted([(a, 1) for a, _ in spans] + [(f, -1) for _, f in spans])
    first_arrival, last_arrival = spans[0][0], max(a for a, _ in spans)
    last_finish = max(f for _, f in spans)
    full_at = None
    n = 0
    for t, d in events:
        n += d
        if n >= c and full_at is None:
            full_at = t
    full_at = full_at or last_arrival
    lost = {"start": c * (first_arrival - start), "ramp": 0.0, "turnaround": 0.0, "drain": 0.0}
    lost["wind-down"] = c * (end - last_finish)
    n, prev = 0, first_arrival
    for t, d in events:
        if t > prev:
            idle = (c - n) * (t - prev)
            phase = "ramp" if t <= full_at else ("turnaround" if t <= last_arrival else "drain")
            lost[phase] += idle
        n += d
        prev = t
    lost["requests in steady state"] = sum(1 for a, _ in spans if full_at < a <= last_arrival)
    return lost


async def _ticker(lags: list[float], stop: asyncio.Event) -> None:
    loop = asyncio.get_running_loop()
    while not stop.is_set():
        t = loop.time()
        await asyncio.sleep(0.001)
        lags.append(loop.time() - t - 0.001)


def run_evaluate(server: ChildServer, n: int, c: int, latency: float, seed: int, prof: Any = None) -> dict[str, Any]:
    server.configure(seed, {"latency": latency})
    cases, _ = make_cases(n, seed)
    judge = OpenAIJudge("bench-judge", base_url=server.base_url, api_key="bench-key", timeout=30.0)
    metric = ContextualPrecisionMetric(model=judge)

    async def main() -> tuple[float, float, float, list[float]]:
        lags: list[float] = []
        stop = asyncio.Event()
        tick = asyncio.create_task(_ticker(lags, stop))
        cpu0, t0, m0 = time.process_time(), time.perf_counter(), time.monotonic()
        if prof is not None:
            prof.enable()
        await a_evaluate(cases, [metric], concurrency=c, show_progress=False)
        if prof is not None:
            prof.disable()
        wall, cpu, m1 = time.perf_counter() - t0, time.process_time() - cpu0, time.monotonic()
        stop.set()
        await tick
        return wall, cpu, m0, m1, lags  # type: ignore[return-value]

    wall, cpu, m0, m1, lags = asyncio.run(main())  # type: ignore[misc]
    reqs = server.timeline()
    return {"wall": wall, "cpu": cpu, "lost": _phases(reqs, m0, m1, c), "lags": lags, "served": reqs}


def run_bare(server: ChildServer, n: int, c: int, latency: float, seed: int) -> dict[str, Any]:
    import openai

    server.configure(seed, {"latency": latency})
    cases, _ = make_cases(n, seed)
    prompts = [
        ContextualPrecisionTemplate.generate_verdicts(x.input, x.expected_output, x.retrieval_context) for x in cases
    ]
    fmt: Any = {
        "type": "json_schema",
        "json_schema": {"name": "judge_answer", "strict": True, "schema": JUDGE_ANSWER_SCHEMA},
    }

    async def main() -> tuple[float, float, float, float]:
        gate = asyncio.Semaphore(c)
        async with openai.AsyncOpenAI(base_url=server.base_url, api_key="bench-key", max_retries=0) as client:

            async def one(prompt: str) -> None:
                async with gate:
                    await client.chat.completions.create(
                        model="bench-judge",
                        temperature=0,
                        response_format=fmt,
                        messages=[{"role": "user", "content": prompt}],
                    )

            cpu0, t0, m0 = time.process_time(), time.perf_counter(), time.monotonic()
            await asyncio.gather(*(one(p) for p in prompts))
            return time.perf_counter() - t0, time.process_time() - cpu0, m0, time.monotonic()

    wall, cpu, m0, m1 = asyncio.run(main())
    reqs = server.timeline()
    return {"wall": wall, "cpu": cpu, "lost": _phases(reqs, m0, m1, c)}


def run_httpx(server: ChildServer, n: int, c: int, latency: float, seed: int) -> dict[str, Any]:
    """The same requests through the openai client's httpx alone (no openai, no evaluator)."""
    import json

    from ctxprec_ops.judge.models.capped_http import capped_async_client

    server.configure(seed, {"latency": latency})
    cases, _ = make_cases(n, seed)
    fmt = {
        "type": "json_schema",
        "json_schema": {"name": "judge_answer", "strict": True, "schema": JUDGE_ANSWER_SCHEMA},
    }
    prompts = [
        ContextualPrecisionTemplate.generate_verdicts(x.input, x.expected_output, x.retrieval_context) for x in cases
    ]

    async def main() -> tuple[float, float, float, float]:
        gate = asyncio.Semaphore(c)
        async with capped_async_client(1 << 20) as client:

            async def one(prompt: str) -> None:
                body = {
                    "model": "bench-judge",
                    "temperature": 0,
                    "response_format": fmt,
                    "messages": [{"role": "user", "content": prompt}],
                }
                async with gate:
                    r = await client.post(
                        f"{server.base_url}/chat/completions", json=body, headers={"Authorization": "Bearer bench-key"}
                    )
                    json.loads(r.content)

            cpu0, t0, m0 = time.process_time(), time.perf_counter(), time.monotonic()
            await asyncio.gather(*(one(p) for p in prompts))
            return time.perf_counter() - t0, time.process_time() - cpu0, m0, time.monotonic()

    wall, cpu, m0, m1 = asyncio.run(main())
    return {"wall": wall, "cpu": cpu, "lost": _phases(server.timeline(), m0, m1, c)}


def ours_alone(n: int, seed: int) -> float:
    """CPU ms per case of the evaluator's own work without HTTP: the prompt, the request body as
    JSON, the answer's JSON read and checked, the score and its reason, the result."""
    import json

    from ctxprec_ops.judge.calls import JudgeRun
    from ctxprec_ops.judge.limiter import AdaptiveLimiter
    from ctxprec_ops.judge.models.base import Generation, JudgeModel
    from ctxprec_ops.scoring.template import answer_format

    cases, _ = make_cases(n, seed)
    fmt = answer_format(ContextualPrecisionTemplate)

    class Echo(JudgeModel):
        """Answers every prompt from its node blocks (what the server would say), in process."""

        def get_model_name(self) -> str:
            return "echo"

        def generate(self, prompt: str, schema: Any = None) -> str:
            raise NotImplementedError

        async def a_generate_with_usage(self, prompt: str, schema: Any = None) -> Generation:
            json.dumps(
                {"model": "echo", "messages": [{"role": "user", "content": prompt}], "response_format": fmt_body}
            )
            ids = [int(x.split('"')[0]) for x in prompt.split('<node id="')[1:]]
            body = {
                "choices": [
                    {
                        "message": {
                            "content": json.dumps(
                                {
                                    "verdicts": [
                                        {
                                            "node": k,
                                            "relevant": True,
                                            "reason": "The passage states the fact the answer relies on.",
                                        }
                                        for k in ids
                                    ]
                                }
                            )
                        }
                    }
                ],
                "usage": {"prompt_tokens": 800, "completion_tokens": 100},
            }
            data = json.loads(json.dumps(body))
            return Generation(output=data["choices"][0]["message"]["content"], prompt_tokens=800, completion_tokens=100)

    fmt_body = {
        "type": "json_schema",
        "json_schema": {"name": "judge_answer", "strict": True, "schema": JUDGE_ANSWER_SCHEMA},
    }
    metric = ContextualPrecisionMetric(model=Echo())
    run = JudgeRun(limiter=AdaptiveLimiter(32))
    del fmt

    async def main() -> None:
        for i, case in enumerate(cases):
            await metric.score_case(case, run, i)

    cpu0 = time.process_time()
    asyncio.run(main())
    return (time.process_time() - cpu0) / n * 1e3


_GROUPS = (
    ("ctxprec_ops", "ctxprec_ops (ours)"),
    ("openai", "openai client"),
    ("httpx", "httpx/httpcore/h11/anyio"),
    ("httpcore", "httpx/httpcore/h11/anyio"),
    ("h11", "httpx/httpcore/h11/anyio"),
    ("anyio", "httpx/httpcore/h11/anyio"),
    ("pydantic", "pydantic"),
    ("asyncio", "asyncio event loop"),
    ("selectors", "asyncio event loop"),
    ("json", "json"),
)


def _group(filename: str) -> str:
    if filename.startswith("<built-in") or filename == "~":
        return "builtins (C: socket, json, hashing...)"
    parts = Path(filename).parts
    for key, name in _GROUPS:
        if key in parts:
            return name
    return "other Python"


def profile_groups(prof: cProfile.Profile, cases: int) -> list[tuple[str, float]]:
    stats = pstats.Stats(prof)
    by: dict[str, float] = {}
    for (filename, _line, _fn), (_cc, _nc, tt, _ct, _callers) in stats.stats.items():  # type: ignore[attr-defined]
        g = _group(filename)
        by[g] = by.get(g, 0.0) + tt
    return sorted(((g, t / cases * 1e3) for g, t in by.items()), key=lambda x: -x[1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=320)
    ap.add_argument("--concurrency", type=int, default=32)
    ap.add_argument("--latency", type=float, default=0.3)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--profile", action="store_true", help="one more evaluate() under cProfile")
    ap.add_argument("--top", type=int, default=25, help="functions listed with --profile")
    ap.add_argument("--dump", help="with --profile: write the profile here (pstats format)")
    args = ap.parse_args()
    os.environ.setdefault("NO_PROXY", "127.0.0.1,localhost")
    n, c, lat = args.cases, args.concurrency, args.latency
    ideal = n * lat / c
    server = ChildServer()
    try:
        run_evaluate(server, c, c, 0.0, 999)  # warm-up
        ev: list[dict[str, Any]] = []
        bare: list[dict[str, Any]] = []
        raw: list[dict[str, Any]] = []
        for seed in range(args.repeats):  # side by side, rotating which goes first
            trio = [
                lambda s=seed: ev.append(run_evaluate(server, n, c, lat, s)),
                lambda s=seed: bare.append(run_bare(server, n, c, lat, s)),
                lambda s=seed: raw.append(run_httpx(server, n, c, lat, s)),
            ]
            for f in trio[seed % 3 :] + trio[: seed % 3]:
                f()
        alone = statistics.median(ours_alone(n, seed) for seed in range(args.repeats))
        load = os.getloadavg()[0]
        print(f"{n} cases, latency {lat} s, concurrency {c}: ideal {ideal:.2f} s; load {load:.1f}")
        for name, runs in (("evaluate()", ev), ("bare openai client", bare), ("httpx alone", raw)):
            wall = statistics.median(r["wall"] for r in runs)
            cpu = statistics.median(r["cpu"] for r in runs) / n * 1e3
            print(f"\n{name}: wall {wall:.2f} s = {ideal / wall:.1%} of the limit; client CPU {cpu:.2f} ms/case")
            keys = [k for k in runs[0]["lost"] if k != "requests in steady state"]
            for k in keys:
                v = statistics.median(r["lost"][k] for r in runs)
                print(f"  lost {k:<11} {v / c:6.3f} s of wall ({v:6.2f} slot-s)")
            steady = statistics.median(
                r["lost"]["turnaround"] / max(1, r["lost"]["requests in steady state"]) for r in runs
            )
            print(
                f"  turnaround per request in steady state {steady * 1e3:6.1f} ms (a slot idle between answer and next request)"
            )
        print(f"\nthe evaluator's own work without HTTP (prompt, body, answer, score, result): {alone:.2f} ms/case")
        lags = [x for r in ev for x in r["lags"]]
        lags.sort()
        print(
            f"\nevent loop lateness of a 1 ms tick during evaluate(): median {statistics.median(lags) * 1e3:.1f} ms, "
            f"p90 {lags[int(0.9 * len(lags))] * 1e3:.1f} ms, max {lags[-1] * 1e3:.1f} ms"
        )
        if args.profile:
            prof = cProfile.Profile()
            run_evaluate(server, n, c, lat, 7, prof)
            print("\ncProfile of one evaluate() (own time per case, inflated by the profiler):")
            for g, ms in profile_groups(prof, n):
                print(f"  {g:<42} {ms:6.2f} ms")
            pstats.Stats(prof).sort_stats("tottime").print_stats(args.top)
            if args.dump:
                prof.dump_stats(args.dump)
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
