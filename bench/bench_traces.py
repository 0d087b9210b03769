"""Span-source throughput: a spans table of OpenInference traces vs the flat table of the same cases.

Run from the repository root:  .venv/bin/python bench/bench_traces.py

Builds two SQLite warehouses of the same cases, one UTC day:

- ``retrieval_logs``: one row per case (id, event_time, input, actual_output, expected_output =
  the answer, retrieval_context: 5 distinct ~200-character nodes), as ``bench_pipeline.py``;
- ``spans``: one trace per case, of ``--spans-per-trace`` spans (default 3: a CHAIN root, the
  RETRIEVER span with the 5 documents as ``retrieval.documents.{i}.document.*`` with ids and
  scores, and the LLM span whose ``llm.input_messages`` carry the prompt with the documents and
  whose ``llm.output_messages`` the answer; more spans per trace add CHAIN spans), random 16-hex
  span ids and 32-hex trace ids, indexes on ``span_id`` and ``trace_id`` (as an OTLP -> warehouse
  export has them). ``--spans`` (default 100,000) is the spans table's size.

Both are scored reference-free-equivalent (the flat table's expected output is the answer, the
spans source takes its LLM span's answer), so the judge sees the same prompts; the judge is
``bench_pipeline.py``'s ``InstantJudge`` (answers at once through the full LLM path). Each run is
a fresh process; runs alternate between the sources (``--repeat``, default 3) and the medians of
cases/s are compared. Goal: the spans source at >= 0.8x the flat table's cases/s. Exit status 1
when it is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

DAY = "2026-11-28"
GOAL = 0.8
TOPICS = ["billing", "refunds", "shipping", "passwords", "invoices", "API keys", "webhooks", "exports"]


def _case(i: int) -> tuple[str, str, list[str], str]:
    topic = TOPICS[i % len(TOPICS)]
    secs = i * 86_399 // 1_000_000
    ts = f"{DAY} {secs // 3600:02d}:{secs % 3600 // 60:02d}:{secs % 60:02d}"
    nodes = [
        f"Doc {i}-{k}: how {topic} work for account {i}. Step {k} explains the {topic} settings page, "
        f"the limits that apply, and who to contact when the {topic} process fails (ref {i * 7 + k})."
        for k in range(5)
    ]
    question = f"How do I change my {topic} settings for account {i}?"
    answer = f"Go to the {topic} settings page and follow the steps for account {i}; support helps if it fails."
    return ts, question, nodes, answer


def build_flat(path: str, cases: int) -> None:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute(
        "CREATE TABLE retrieval_logs (id INTEGER PRIMARY KEY, event_time TEXT NOT NULL, input TEXT, "
        "actual_output TEXT, expected_output TEXT, retrieval_context TEXT)"
    )
    conn.execute("CREATE INDEX ix_logs_time ON retrieval_logs (event_time)")
    rows = []
    for i in range(1, cases + 1):
        ts, q, nodes, answer = _case(i)
        rows.append((i, ts, q, answer, answer, json.dumps(nodes)))
    conn.executemany("INSERT INTO retrieval_logs VALUES (?, ?, ?, ?, ?, ?)", rows)
    conn.commit()
    conn.close()


def _hex(rng: random.Random, digits: int) -> str:
    return f"{rng.getrandbits(digits * 4):0{digits}x}"


def _spans(cases: int, per_trace: int):
    rng = random.Random(7)
    for i in range(1, cases + 1):
        ts, q, nodes, answer = _case(i)
        trace, root = _hex(rng, 32), _hex(rng, 16)
        yield (
            trace,
            root,
            None,
            "query",
            ts + ".000000",
            json.dumps({"openinference.span.kind": "CHAIN", "input.value": q}),
        )
        retriever = {"openinference.span.kind": "RETRIEVER", "input.value": q}
        for k, text in enumerate(nodes):
            retriever[f"retrieval.documents.{k}.document.content"] = text
            retriever[f"retrieval.documents.{k}.document.id"] = f"doc-{i}-{k}"
            retriever[f"retrieval.documents.{k}.document.score"] = round(1 - k / 10, 2)
        yield (trace, _hex(rng, 16), root, "retrieve", ts + ".100000", json.dumps(retriever))
        llm = {
            "openinference.span.kind": "LLM",
            "llm.model_name": "gpt-4o-mini",
            "llm.input_messages.0.message.role": "user",
            "llm.input_messages.0.message.content": "Context:\n" + "\n".join(nodes) + f"\nQuestion: {q}",
            "llm.output_messages.0.message.role": "assistant",
            "llm.output_messages.0.message.content": answer,
        }
        yield (trace, _hex(rng, 16), root, "llm", ts + ".200000", json.dumps(llm))
        for extra in range(per_trace - 3):
            attrs = {"openinference.span.kind": "CHAIN", "input.value": f"step {extra}", "output.value": answer}
            yield (trace, _hex(rng, 16), root, f"step {extra}", ts + ".300000", json.dumps(attrs))


def build_spans(path: str, cases: int, per_trace: int) -> int:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute(
        "CREATE TABLE spans (trace_id TEXT, span_id TEXT, parent_id TEXT, name TEXT, start_time TEXT, attributes TEXT)"
    )
    rows = list(_spans(cases, per_trace))
    conn.executemany("INSERT INTO spans VALUES (?, ?, ?, ?, ?, ?)", rows)
    conn.execute("CREATE INDEX ix_spans_span_id ON spans (span_id)")
    conn.execute("CREATE INDEX ix_spans_trace_id ON spans (trace_id)")
    conn.commit()
    conn.close()
    return len(rows)


def score(path: str, source: str, chunk_size: int) -> dict:
    """In a fresh process: score the partition; cases/s and peak RSS."""
    from bench_pipeline import InstantJudge

    from ctxprec_ops.pipeline import PipelineConfig, score_partition

    fmt = "openinference" if source == "spans" else "rows"
    # quiet_gc: the collector tuning the CLI runs with, as bench_pipeline.py (PipelineConfig.quiet_gc)
    cfg = PipelineConfig(
        warehouse=f"sqlite:///{path}", judge=InstantJudge(), chunk_size=chunk_size, source_format=fmt, quiet_gc=True
    )
    t0, c0 = time.perf_counter(), time.process_time()
    summary = score_partition(cfg, DAY)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "source": source,
        "cases": summary.rows_total,
        "scored": summary.rows_scored,
        "mean": summary.mean_score,
        "seconds": seconds,
        "cases_per_s": summary.rows_total / seconds,
        "cases_per_cpu_s": summary.rows_total / cpu,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "load_avg": os.getloadavg()[0],
    }


def _child(*args: str) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _median(values: list[float]) -> float:
    v = sorted(values)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--spans", type=int, default=100_000, help="rows of the spans table (default 100,000)")
    p.add_argument("--spans-per-trace", type=int, default=3, help="spans per trace, at least 3 (default 3)")
    p.add_argument("--chunk-size", type=int, default=500)
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--_score", nargs=3, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a._score:
        print(json.dumps(score(a._score[0], a._score[1], int(a._score[2]))))
        return 0
    per = max(3, a.spans_per_trace)
    cases = a.spans // per
    with tempfile.TemporaryDirectory(prefix="bench-traces-") as tmp:
        flat_db, spans_db = str(Path(tmp) / "flat.db"), str(Path(tmp) / "spans.db")
        build_flat(flat_db, cases)
        n_spans = build_spans(spans_db, cases, per)
        print(f"{cases:,} cases: flat table of {cases:,} rows; spans table of {n_spans:,} spans ({per} per trace)")
        runs: dict[str, list[dict]] = {"flat": [], "spans": []}
        for _ in range(a.repeat):
            for source, db in (("flat", flat_db), ("spans", spans_db)):
                for f in Path(tmp).glob(f"{Path(db).stem}.db*"):
                    if f.name != Path(db).name:
                        f.unlink()  # a fresh output (no scores, WAL) for every run
                fresh = str(Path(tmp) / f"run-{source}.db")
                subprocess.run(["cp", db, fresh], check=True)
                r = _child("--_score", fresh, source, str(a.chunk_size))
                runs[source].append(r)
                print(
                    f"  {source:5}  {r['cases']:>7,} cases  {r['seconds']:6.2f} s  {r['cases_per_s']:8,.0f} cases/s  "
                    f"{r['cases_per_cpu_s']:8,.0f} cases/CPU-s  peak RSS {r['peak_rss_mb']:5.0f} MB  load {r['load_avg']:.1f}"
                )
                Path(fresh).unlink()
    flat = _median([r["cases_per_s"] for r in runs["flat"]])
    spans = _median([r["cases_per_s"] for r in runs["spans"]])
    flat_cpu = _median([r["cases_per_cpu_s"] for r in runs["flat"]])
    spans_cpu = _median([r["cases_per_cpu_s"] for r in runs["spans"]])
    same = {round(r["mean"], 12) for rs in runs.values() for r in rs}
    ratio, ratio_cpu = spans / flat, spans_cpu / flat_cpu
    print(f"median cases/s: flat {flat:,.0f}, spans {spans:,.0f}: spans/flat = {ratio:.2f}x (goal >= {GOAL}x)")
    print(f"median cases/CPU-s: flat {flat_cpu:,.0f}, spans {spans_cpu:,.0f}: spans/flat = {ratio_cpu:.2f}x")
    print(f"mean score identical across sources and runs: {len(same) == 1}")
    return 0 if ratio >= GOAL and len(same) == 1 else 1


if __name__ == "__main__":
    raise SystemExit(main())
