"""Pipeline throughput and memory on SQLite: rows/s and peak RSS of ``score_partition``.

Run from the repository root:  .venv/bin/python bench/bench_pipeline.py

For each size (default 100,000 and 1,000,000 rows) a fresh SQLite warehouse is built (bulk
insert through ``sqlite3.executemany`` in a separate process), then ``score_partition`` scores
**every row, all in one partition** (one UTC day: the worst case for a partition's memory) with
chunk size 500, in another fresh process whose peak RSS (``ru_maxrss``; for worker processes their
``VmHWM``, see ``ChildPeaks``) is reported. Each row has
a ~60-character question, a ~90-character expected output and 5 distinct nodes of ~200
characters (no two rows share a node, so the judgment cache cannot shortcut anything).

Judges (``--judge``):

- ``instant``: a ``JudgeModel`` subclass that answers at once through the full LLM path (prompt
  rendering, JSON answer, parsing, coverage check, judgment cache reads and writes);
- ``lexical``: the offline default judge (no prompt, no cache).

Targets: >= 5,000 rows/s, peak RSS <= 300 MB and not growing with the table size.
Besides wall-clock rows/s the script prints rows per CPU-second of the scoring process and the
load average, since other work on the machine slows the wall clock (the pipeline is one process).
Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DAY = "2026-11-28"
TARGET_ROWS_S = 5_000
TARGET_RSS_MB = 300

TOPICS = ["billing", "refunds", "shipping", "passwords", "invoices", "API keys", "webhooks", "exports"]


def build(path: str, rows: int) -> float:
    """Create ``retrieval_logs`` with ``rows`` rows in one UTC day; returns seconds."""
    t0 = time.perf_counter()
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute(
        "CREATE TABLE retrieval_logs (id INTEGER PRIMARY KEY, event_time TEXT NOT NULL, input TEXT, "
        "actual_output TEXT, expected_output TEXT, retrieval_context TEXT)"
    )
    conn.execute("CREATE INDEX ix_logs_time ON retrieval_logs (event_time)")

    def gen():
        for i in range(1, rows + 1):
            topic = TOPICS[i % len(TOPICS)]
            secs = i * 86_399 // max(rows, 1)
            ts = f"{DAY} {secs // 3600:02d}:{secs % 3600 // 60:02d}:{secs % 60:02d}"
            nodes = [
                f"Doc {i}-{k}: how {topic} work for account {i}. Step {k} explains the {topic} settings page, "
                f"the limits that apply, and who to contact when the {topic} process fails (ref {i * 7 + k})."
                for k in range(5)
            ]
            yield (
                i,
                ts,
                f"How do I change my {topic} settings for account {i}?",
                f"Open settings, then {topic}.",
                f"Go to the {topic} settings page and follow the steps for account {i}; support helps if it fails.",
                json.dumps(nodes),
            )

    conn.executemany("INSERT INTO retrieval_logs VALUES (?, ?, ?, ?, ?, ?)", gen())
    conn.commit()
    conn.close()
    return time.perf_counter() - t0


from ctxprec_ops.judges.base import JudgeModel  # noqa: E402  (after the sys.path tweak)

_BLOCK = re.compile(r'<node id="(\d+)">')


class InstantJudge(JudgeModel):
    """Answers immediately through the LLM path: even-numbered nodes are relevant.
    Defined at module level so worker processes can unpickle it."""

    def get_model_name(self) -> str:
        return "instant-bench-judge"

    def generate(self, prompt, schema=None):
        ids = [int(k) for k in _BLOCK.findall(prompt)]
        return json.dumps({"verdicts": [{"node": k, "relevant": k % 2 == 0, "reason": "bench"} for k in ids]})

    async def a_generate(self, prompt, schema=None):
        return self.generate(prompt, schema)


def _instant_judge() -> InstantJudge:
    return InstantJudge()


class ChildPeaks:
    """The high-water RSS (``VmHWM``) of each child process, polled from ``/proc`` (Linux).

    ``RUSAGE_CHILDREN.ru_maxrss`` cannot be used for spawned workers: Linux keeps ``ru_maxrss``
    across ``execve``, so a worker inherits the size of the parent at the moment it was forked
    (here: the coordinator right after planning), not its own peak.
    """

    def __init__(self, interval: float = 0.1) -> None:
        self.interval, self.peaks, self._stop = interval, {}, threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> "ChildPeaks":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        me = str(os.getpid())
        while not self._stop.wait(self.interval):
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    with open(f"/proc/{pid}/status") as f:
                        status = dict(line.split(":", 1) for line in f if ":" in line)
                except OSError:
                    continue
                if status.get("PPid", "").strip() == me and "VmHWM" in status:
                    hwm = int(status["VmHWM"].split()[0]) / 1024
                    self.peaks[pid] = max(self.peaks.get(pid, 0.0), hwm)

    @property
    def max_mb(self) -> float:
        return max(self.peaks.values(), default=0.0)


def score(path: str, judge: str, chunk_size: int, concurrency: int, workers: int = 1) -> dict:
    """Runs in a fresh process: score the partition, report rows/s and peak RSS."""
    from ctxprec_ops.pipeline import PipelineConfig, score_partition

    j = _instant_judge() if judge == "instant" else "lexical"
    cfg = PipelineConfig(warehouse=f"sqlite:///{path}", judge=j, chunk_size=chunk_size, concurrency=concurrency)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0, c0 = time.perf_counter(), time.process_time()
    with ChildPeaks() as child_peaks:
        summary = score_partition(cfg, DAY, workers=workers)
    seconds = time.perf_counter() - t0
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = time.process_time() - c0 + children.ru_utime + children.ru_stime
    return {
        "rows": summary.rows_total,
        "scored": summary.rows_scored,
        "failed": summary.rows_failed,
        "status": summary.status,
        "seconds": seconds,
        "rows_per_s": summary.rows_total / seconds if seconds else 0.0,
        "cpu_seconds": cpu,
        "rows_per_cpu_s": summary.rows_total / cpu if cpu else 0.0,
        "load_avg": os.getloadavg()[0],
        "rss_before_mb": rss_before,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "worker_peak_rss_mb": child_peaks.max_mb,
        "workers": workers,
    }


def _child(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    p.add_argument("--judge", choices=["instant", "lexical"], nargs="+", default=["instant", "lexical"])
    p.add_argument("--chunk-size", type=int, default=500)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument("--workers", type=int, nargs="+", default=[1],
                   help="worker processes for score_partition (e.g. --workers 1 2); the lexical judge "
                        "is picklable, the instant judge is defined here so it is too")
    p.add_argument("--dir", default=None, help="where to build the warehouses (default: a temp dir)")
    p.add_argument("--_build", nargs=2, help=argparse.SUPPRESS)
    p.add_argument("--_score", nargs=2, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a._build:
        print(json.dumps({"seconds": build(a._build[0], int(a._build[1]))}))
        return 0
    if a._score:
        print(json.dumps(score(a._score[0], a._score[1], a.chunk_size, a.concurrency, a.workers[0])))
        return 0

    ok = True
    results = []
    with tempfile.TemporaryDirectory(dir=a.dir) as tmp:
        for n in a.rows:
            for judge in a.judge:
              for workers in a.workers:
                db = os.path.join(tmp, f"bench_{n}_{judge}.db")
                built = _child(["--_build", db, str(n)])
                print(f"built {n:,} rows in {built['seconds']:.1f}s ({os.path.getsize(db) / 1e6:.0f} MB)", flush=True)
                r = _child(["--_score", db, judge, "--chunk-size", str(a.chunk_size),
                            "--concurrency", str(a.concurrency), "--workers", str(workers)])
                r.update(judge=judge, table_rows=n)
                results.append(r)
                peak = max(r["peak_rss_mb"], r.get("worker_peak_rss_mb", 0.0))
                print(
                    f"judge={judge:8s} workers={workers} rows={n:>9,}  scored={r['scored']:>9,}  failed={r['failed']}  "
                    f"time={r['seconds']:7.1f}s  rows/s={r['rows_per_s']:8,.0f}  "
                    f"rows/CPU-s={r['rows_per_cpu_s']:8,.0f}  load={r['load_avg']:.1f}  "
                    f"peak RSS={r['peak_rss_mb']:6.1f} MB (after imports {r['rss_before_mb']:.1f} MB"
                    + (f"; each worker <= {r['worker_peak_rss_mb']:.1f} MB)" if workers > 1 else ")"),
                    flush=True,
                )
                os.remove(db)
                if r["scored"] != n or r["rows_per_s"] < TARGET_ROWS_S or peak > TARGET_RSS_MB:
                    ok = False
    for judge, workers in {(r["judge"], r["workers"]) for r in results}:
        mine = [r for r in results if r["judge"] == judge and r["workers"] == workers]
        for a, b in zip(mine, mine[1:]):  # SQLite's page cache fills up to 32 MiB, then RSS is flat
            grew = b["peak_rss_mb"] - a["peak_rss_mb"]
            grew_w = b["worker_peak_rss_mb"] - a["worker_peak_rss_mb"] if workers > 1 else None
            print(f"judge={judge} workers={workers}: {a['table_rows']:,} -> {b['table_rows']:,} rows: peak RSS "
                  f"{grew:+.1f} MB" + (f", per worker {grew_w:+.1f} MB" if grew_w is not None else ""))
    print(f"targets: >= {TARGET_ROWS_S:,} rows/s, peak RSS <= {TARGET_RSS_MB} MB -> {'met' if ok else 'MISSED'}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
