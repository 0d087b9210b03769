"""Does a partition run keep the judge as busy as a flat ``evaluate()``? Side by side, one run.

Run from the repository root:  .venv/bin/python bench/bench_saturation.py

The local OpenAI-compatible judge server (``tests/fixtures/judge_server.py``, in a child process,
real HTTP, real ``openai`` client) answers each request after a lognormal delay: mean 0.3 s,
p99 about 5x the median (sigma = ln 5 / 2.326 = 0.69; median 0.236 s, p99 1.18 s). The same
3,200 cases (5 nodes each, one judge call per case) are scored

- by ``evaluate(cases, [metric], concurrency=32)``, and
- by ``score_partition`` over a SQLite table holding them as one partition (chunks of 500,
  concurrency 32; a fresh copy of the warehouse each time, so nothing is cached),

alternating which goes first, ``--repeats`` times; medians are printed. Start-up is excluded:
``evaluate`` is timed around the call; the partition run from its ``planned`` progress event
(engine, tables, judge and plan ready) to the last chunk written (``finalize_run`` excluded too;
its whole wall time is printed alongside). Target: partition >= 95 % of evaluate's cases/s.
Exit status 1 when it is missed. The machine is shared: compare the two in the same run only.

``--cli``: ``ctxprec score`` in a fresh process instead (as the console script runs it), start-up
included, against ``evaluate()``; each phase of the run (imports and planning, the first request,
judging, the tail, the last write, finalize, teardown) from the process's progress events and the
server's request times (one monotonic clock for every process).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import shutil
import sqlite3
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from bench_judge_throughput import ChildServer, make_cases  # noqa: E402

from ctxprec_ops import ContextualPrecisionMetric, evaluate  # noqa: E402
from ctxprec_ops.judge.models.openai_judge import OpenAIJudge  # noqa: E402
from ctxprec_ops.pipeline import PipelineConfig, ProgressEvent, score_partition  # noqa: E402

DAY = "2026-11-28"
TARGET = 0.95


class LogNormal:
    """Server latency: lognormal with the given mean and p99/median ratio (picklable)."""

    def __init__(self, mean: float, p99_over_median: float, seed: int) -> None:
        self.sigma = math.log(p99_over_median) / 2.326
        self.mu = math.log(mean) - self.sigma**2 / 2
        self.rng = random.Random(seed)

    def __call__(self, _record: dict) -> float:
        return self.rng.lognormvariate(self.mu, self.sigma)


def build(path: str, cases: list[Any]) -> None:
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE retrieval_logs (id INTEGER PRIMARY KEY, event_time TEXT NOT NULL, input TEXT, "
        "actual_output TEXT, expected_output TEXT, retrieval_context TEXT)"
    )
    conn.executemany(
        "INSERT INTO retrieval_logs VALUES (?, ?, ?, ?, ?, ?)",
        (
            (
                i + 1,
                f"{DAY} {i * 86_399 // len(cases) // 3600:02d}:{i * 86_399 // len(cases) % 3600 // 60:02d}:00",
                c.input,
                c.actual_output,
                c.expected_output,
                json.dumps(c.retrieval_context),
            )
            for i, c in enumerate(cases)
        ),
    )
    conn.commit()
    conn.close()


def judge(server: ChildServer) -> OpenAIJudge:
    return OpenAIJudge("bench-judge", base_url=server.base_url, api_key="bench-key", timeout=60.0)


def run_evaluate(server: ChildServer, cases: list[Any], concurrency: int, seed: int) -> dict[str, float]:
    server.configure(seed, {"latency": LogNormal(0.3, 5.0, seed)})
    metric = ContextualPrecisionMetric(model=judge(server))
    t0 = time.perf_counter()
    result = evaluate(cases, [metric], concurrency=concurrency, show_progress=False)
    seconds = time.perf_counter() - t0
    assert not result.errors, result.errors[:3]
    return {"seconds": seconds, "rate": len(cases) / seconds, "calls": server.stats()["calls"]}


def run_partition(
    server: ChildServer, source: str, tmp: str, n: int, concurrency: int, chunk: int, seed: int
) -> dict[str, float]:
    server.configure(seed, {"latency": LogNormal(0.3, 5.0, seed)})
    db = os.path.join(tmp, f"run_{seed}.db")
    shutil.copy(source, db)
    marks: dict[str, float] = {}

    def progress(ev: ProgressEvent) -> None:
        if ev.kind == "planned":
            marks["planned"] = time.perf_counter()
        elif ev.kind == "chunk_done":
            marks["written"] = time.perf_counter()

    cfg = PipelineConfig(
        warehouse=f"sqlite:///{db}", judge=judge(server), chunk_size=chunk, concurrency=concurrency, quiet_gc=True
    )
    t0 = time.perf_counter()
    summary = score_partition(cfg, DAY, progress=progress)
    wall = time.perf_counter() - t0
    assert summary.rows_scored == n, summary
    seconds = marks["written"] - marks["planned"]
    os.remove(db)
    return {"seconds": seconds, "rate": n / seconds, "wall": wall, "calls": server.stats()["calls"]}


#: the child of ``--cli``: notes when the interpreter reached it and when the run's progress events
#: came (CLOCK_MONOTONIC: one clock for every process of the machine), then runs ``ctxprec``
_CLI_CHILD = """
import json, sys, time
entry = time.monotonic()
from ctxprec_ops.cli import progress as _p
marks = {"entry": entry}
_callback = _p.ProgressDisplay.callback
def callback(self, label):
    inner = _callback(self, label)
    def on(ev):
        now = time.monotonic()
        if ev.kind == "chunk_done":
            marks.setdefault("first_chunk_done", now)
            marks["last_chunk_done"] = now
        else:
            marks.setdefault(ev.kind, now)
        inner(ev)
    return on
_p.ProgressDisplay.callback = callback
from ctxprec_ops.cli import main
code = main()  # as the console script calls it: argv from sys.argv
marks["returned"] = time.monotonic()
sys.stderr.write("MARKS " + json.dumps(marks) + "\\n")
sys.exit(code)
"""


def run_cli(
    server: ChildServer, source: str, tmp: str, n: int, concurrency: int, chunk: int, seed: int
) -> dict[str, Any]:
    """``ctxprec score`` in a fresh process, start-up included: its phases, from the process's
    progress events and the server's request times."""
    import subprocess

    server.configure(seed, {"latency": LogNormal(0.3, 5.0, seed)})
    db = os.path.join(tmp, f"cli_{seed}.db")
    shutil.copy(source, db)
    env = dict(os.environ, OPENAI_BASE_URL=server.base_url, OPENAI_API_KEY="bench-key", NO_PROXY="127.0.0.1,localhost")
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    argv = [
        sys.executable,
        "-c",
        _CLI_CHILD,
        "score",
        "--warehouse",
        f"sqlite:///{db}",
        "--partition",
        DAY,
        "--judge",
        "bench-judge",
        "--concurrency",
        str(concurrency),
        "--chunk-size",
        str(chunk),
        "--quiet",
    ]
    spawn = time.monotonic()
    out = subprocess.run(argv, env=env, capture_output=True, text=True)
    exited = time.monotonic()
    if out.returncode != 0:
        raise RuntimeError(f"ctxprec score exited {out.returncode}: {out.stderr[-2000:]}")
    marks = json.loads(next(line for line in out.stderr.splitlines() if line.startswith("MARKS "))[6:])
    timeline = server.timeline()
    first_arrival = min(r["arrived"] for r in timeline)
    last_arrival = max(r["arrived"] for r in timeline)
    last_finish = max(r["finished"] for r in timeline)
    os.remove(db)
    phases = {
        "interpreter start": marks["entry"] - spawn,
        "imports, config, engine, tables, plan": marks["planned"] - marks["entry"],
        "planned -> first request at the judge": first_arrival - marks["planned"],
        "first -> last request sent (judging)": last_arrival - first_arrival,
        "last request sent -> last answer (tail)": last_finish - last_arrival,
        "last answer -> last chunk written": marks["last_chunk_done"] - last_finish,
        "last chunk written -> run finished (finalize)": marks["finished"] - marks["last_chunk_done"],
        "finished -> summary printed": marks["returned"] - marks["finished"],
        "summary printed -> process exit": exited - marks["returned"],
    }
    return {"seconds": exited - spawn, "rate": n / (exited - spawn), "calls": len(timeline), "phases": phases}


def run_evaluate_timed(server: ChildServer, cases: list[Any], concurrency: int, seed: int) -> dict[str, Any]:
    """``run_evaluate`` with the same phases (first request, last request, last answer)."""
    t0 = time.monotonic()
    r = run_evaluate(server, cases, concurrency, seed)
    t1 = t0 + r["seconds"]
    timeline = server.timeline()
    first_arrival = min(x["arrived"] for x in timeline)
    last_arrival = max(x["arrived"] for x in timeline)
    last_finish = max(x["finished"] for x in timeline)
    r["phases"] = {
        "call -> first request at the judge": first_arrival - t0,
        "first -> last request sent (judging)": last_arrival - first_arrival,
        "last request sent -> last answer (tail)": last_finish - last_arrival,
        "last answer -> evaluate() returned": t1 - last_finish,
    }
    return r


def main_cli(a: argparse.Namespace) -> int:
    """``--cli``: ``ctxprec score`` (a fresh process, start-up included) vs ``evaluate()``."""
    cases, _ = make_cases(a.cases, seed=5)
    server = ChildServer()
    evals: list[dict[str, Any]] = []
    clis: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            source = os.path.join(tmp, "source.db")
            build(source, cases)
            run_evaluate(server, cases[: a.concurrency * 4], a.concurrency, 999)  # warm-up
            for r in range(a.repeats):
                order = ("evaluate", "cli") if r % 2 == 0 else ("cli", "evaluate")
                for what in order:
                    if what == "evaluate":
                        evals.append(run_evaluate_timed(server, cases, a.concurrency, 100 + r))
                    else:
                        clis.append(run_cli(server, source, tmp, a.cases, a.concurrency, a.chunk_size, 100 + r))
                    last = (evals if what == "evaluate" else clis)[-1]
                    print(f"repeat {r + 1} {what:9s}: {last['seconds']:6.2f}s  {last['rate']:6.1f} cases/s", flush=True)
    finally:
        server.stop()
    for name, runs in (("evaluate()", evals), ("ctxprec score (CLI)", clis)):
        print(f"\n{name}: median {statistics.median(x['seconds'] for x in runs):.2f} s")
        for k in runs[0]["phases"]:
            print(f"  {k:<48} {statistics.median(x['phases'][k] for x in runs):7.3f} s")
    e = statistics.median(x["rate"] for x in evals)
    q = statistics.median(x["rate"] for x in clis)
    ratio = q / e
    print(
        f"\nmedian: evaluate {e:.1f} cases/s, ctxprec score {q:.1f} rows/s (start-up included) -> {ratio:.1%} "
        f"of evaluate (target >= {TARGET:.0%}); load average {os.getloadavg()[0]:.1f}"
    )
    return 0 if ratio >= TARGET else 1


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", type=int, default=3200)
    p.add_argument("--concurrency", type=int, default=32)
    p.add_argument("--chunk-size", type=int, default=500)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--cli", action="store_true", help="ctxprec score in a fresh process (start-up included), by phase")
    a = p.parse_args()
    if a.cli:
        return main_cli(a)
    cases, _ = make_cases(a.cases, seed=5)
    server = ChildServer()
    evals: list[dict[str, float]] = []
    parts: list[dict[str, float]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            source = os.path.join(tmp, "source.db")
            build(source, cases)
            run_evaluate(server, cases[: a.concurrency * 4], a.concurrency, 999)  # warm-up
            for r in range(a.repeats):
                order = ("evaluate", "partition") if r % 2 == 0 else ("partition", "evaluate")
                for what in order:
                    if what == "evaluate":
                        evals.append(run_evaluate(server, cases, a.concurrency, 100 + r))
                    else:
                        parts.append(run_partition(server, source, tmp, a.cases, a.concurrency, a.chunk_size, 100 + r))
                    last = (evals if what == "evaluate" else parts)[-1]
                    print(
                        f"repeat {r + 1} {what:9s}: {last['seconds']:6.2f}s  {last['rate']:6.1f} cases/s  "
                        f"judge calls {last['calls']}"
                        + (f"  (whole run {last['wall']:.2f}s)" if "wall" in last else ""),
                        flush=True,
                    )
    finally:
        server.stop()
    e = statistics.median(x["rate"] for x in evals)
    q = statistics.median(x["rate"] for x in parts)
    ratio = q / e
    print(
        f"median: evaluate {e:.1f} cases/s, partition {q:.1f} rows/s -> {ratio:.1%} of evaluate "
        f"(target >= {TARGET:.0%}); load average {os.getloadavg()[0]:.1f}"
    )
    return 0 if ratio >= TARGET else 1


if __name__ == "__main__":
    sys.exit(main())
