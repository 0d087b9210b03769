"""Label contextual precision throughput: rows/s of ``score_partition`` with no judge (SQLite).

Run from the repository root:  .venv/bin/python bench/bench_label_precision.py

Builds a SQLite ``retrieval_logs`` table of ``--rows`` rows (default 200,000) in one UTC day, each
with ``retrieved_ids`` (5-10 ranked chunk ids, JSON text) and ``relevant_ids`` (1-4 ids, some not
retrieved), then scores the partition with ``metric="label_contextual_precision"`` in a fresh
process: read the chunk, parse and validate the ids, compute precision / recall / reciprocal rank /
NDCG@k, upsert ``ctxprec_scores`` and ``ctxprec_label_figures``, finalize the run. Also times the
computation alone (row -> case -> result, no warehouse) on the same rows, and SQLite alone
inserting the rows the run stored (``write_floor``, executemany or multi-row INSERTs, whichever is
faster): the ceiling any pipeline has on this machine.

Target: >= 50,000 rows/s on one core (``workers=1``). Prints rows/s, rows per CPU-second and the
load average (the machine is shared). Exit status 1 when the target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DAY = "2026-11-28"
TARGET_ROWS_S = 50_000


def _rows(n: int, seed: int = 7):
    rng = random.Random(seed)
    for i in range(1, n + 1):
        k = rng.randint(5, 10)
        retrieved = [f"doc-{rng.randrange(1_000_000)}-{j}" for j in range(k)]
        relevant = rng.sample(retrieved, rng.randint(0, 3)) + ([f"doc-missing-{i}"] if rng.random() < 0.5 else [])
        secs = i * 86_399 // n
        ts = f"{DAY} {secs // 3600:02d}:{secs % 3600 // 60:02d}:{secs % 60:02d}"
        yield i, ts, json.dumps(retrieved), json.dumps(relevant)


def build(path: str, n: int) -> None:
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE retrieval_logs (id INTEGER PRIMARY KEY, event_time TEXT NOT NULL, "
        "retrieved_ids TEXT, relevant_ids TEXT)"
    )
    conn.execute("CREATE INDEX ix_logs_time ON retrieval_logs (event_time)")
    conn.executemany("INSERT INTO retrieval_logs VALUES (?, ?, ?, ?)", _rows(n))
    conn.commit()
    conn.close()


def score(path: str, chunk_size: int) -> dict:
    from ctxprec_ops.pipeline import PipelineConfig, score_partition
    from ctxprec_ops.pipeline.context import prepare

    cfg = PipelineConfig(warehouse=f"sqlite:///{path}", metric="label_contextual_precision", chunk_size=chunk_size)
    prepare(cfg)  # one-time set-up (imports, output tables, reflection) is not per-row work
    import numpy  # noqa: F401  # finalize's figures import these lazily: a one-time cost
    import scipy.special  # noqa: F401  # (compiled from source when PYTHONDONTWRITEBYTECODE is set)

    t0, c0 = time.perf_counter(), time.process_time()
    s = score_partition(cfg, DAY)
    seconds, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {
        "rows": s.rows_total,
        "scored": s.rows_scored,
        "failed": s.rows_failed,
        "mean": s.mean_score,
        "seconds": seconds,
        "rows_per_s": s.rows_total / seconds,
        "rows_per_cpu_s": s.rows_total / cpu,
        "load_avg": os.getloadavg()[0],
    }


def write_floor(path: str, chunk_size: int) -> float:
    """Rows per CPU-second of SQLite alone writing the label rows a run stored: the ``ctxprec_scores``
    and ``ctxprec_label_figures`` rows read back from ``path`` and inserted again, as ready tuples,
    into empty copies of both tables (same columns and indexes), one commit per chunk — no reading,
    computing or building rows. Two ways, the faster one counts: one ``executemany`` per table, and
    multi-row ``INSERT ... VALUES (...), (...)`` statements of up to 500 rows. The pipeline cannot
    beat it."""
    conn = sqlite3.connect(path)
    tables = {"ctxprec_scores": [], "ctxprec_label_figures": []}
    ddl = []
    for name in tables:
        tables[name] = conn.execute(f"SELECT * FROM {name}").fetchall()
        ddl += [
            sql
            for (sql,) in conn.execute("SELECT sql FROM sqlite_master WHERE tbl_name = ? AND sql IS NOT NULL", (name,))
        ]
    n = len(tables["ctxprec_scores"])

    def one_row(name: str, rows: list) -> None:
        conn.executemany(f"INSERT INTO floor_{name} VALUES ({', '.join('?' * len(rows[0]))})", rows)

    def multi_row(name: str, rows: list) -> None:
        one = "(" + ", ".join("?" * len(rows[0])) + ")"
        for j in range(0, len(rows), 500):
            part = rows[j : j + 500]
            conn.execute(
                f"INSERT INTO floor_{name} VALUES " + ", ".join([one] * len(part)), [v for r in part for v in r]
            )

    best = 0.0
    for insert in (one_row, multi_row):
        for sql in ddl:
            for name in tables:
                sql = sql.replace(name, f"floor_{name}")
            conn.execute(sql)
        conn.commit()
        c0 = time.process_time()
        for i in range(0, n, chunk_size):
            for name, rows in tables.items():
                insert(name, rows[i : i + chunk_size])
            conn.commit()
        best = max(best, n / (time.process_time() - c0))
        for name in tables:
            conn.execute(f"DROP TABLE floor_{name}")
        conn.commit()
    conn.close()
    return best


def compute_only(n: int) -> float:
    from ctxprec_ops.metrics.label_precision import LabelContextualPrecisionMetric
    from ctxprec_ops.warehouse.label_rows import row_to_labelled

    rows = [{"id": i, "retrieved_ids": r, "relevant_ids": rel} for i, _, r, rel in _rows(n)]
    metric = LabelContextualPrecisionMetric()
    # the pipeline's chunk path (compute_row: plain values, verdicts as JSON text) where it exists
    compute = getattr(metric, "compute_row", metric.compute)
    t0 = time.perf_counter()
    for row in rows:
        compute(row_to_labelled(row))
    return n / (time.perf_counter() - t0)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, default=200_000)
    p.add_argument("--chunk-size", type=int, nargs="+", default=[500, 5000])
    p.add_argument("--_score", nargs=2, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a._score:
        print(json.dumps(score(a._score[0], int(a._score[1]))))
        return 0
    print(f"computation alone (row -> case -> figures): {compute_only(min(a.rows, 100_000)):,.0f} rows/s")
    ok = True
    with tempfile.TemporaryDirectory() as d:
        for cs in a.chunk_size:
            path = str(Path(d) / f"labels_{cs}.db")
            build(path, a.rows)
            out = subprocess.run(
                [sys.executable, __file__, "--_score", path, str(cs)], check=True, capture_output=True, text=True
            )
            r = json.loads(out.stdout.strip().splitlines()[-1])
            floor = write_floor(path, cs)
            hit = r["rows_per_s"] >= TARGET_ROWS_S
            ok &= hit
            print(
                f"score_partition, {r['rows']:,} rows, chunk size {cs}: {r['rows_per_s']:,.0f} rows/s "
                f"({r['rows_per_cpu_s']:,.0f} rows/CPU-s, load {r['load_avg']:.1f}), {r['scored']:,} scored, "
                f"{r['failed']} failed, mean {r['mean']:.4f} -> {'OK' if hit else 'MISSED'} "
                f"(target {TARGET_ROWS_S:,} rows/s)"
            )
            print(
                f"  SQLite alone inserting those rows (ready tuples, same tables and indexes): "
                f"{floor:,.0f} rows/CPU-s — the ceiling for this machine"
            )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
