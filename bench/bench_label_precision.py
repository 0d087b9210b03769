"""Label contextual precision throughput: rows/s of ``score_partition`` with no judge.

Run from the repository root:  .venv/bin/python bench/bench_label_precision.py

Builds a SQLite ``retrieval_logs`` table of ``--rows`` rows (default 200,000) in one UTC day, each
with ``retrieved_ids`` (5-10 ranked chunk ids, JSON text) and ``relevant_ids`` (1-4 ids, some not
retrieved), then scores the partition with ``metric="label_contextual_precision"`` in a fresh
process: read the chunk, parse and validate the ids, compute precision / recall / reciprocal rank /
NDCG@k, upsert ``ctxprec_scores`` and ``ctxprec_label_figures``, finalize the run. Also times the
computation alone (row -> case -> result, no warehouse) on the same rows, and SQLite alone
inserting the rows the run stored (``write_floor``, executemany or multi-row INSERTs, whichever is
faster): the ceiling any pipeline has on this machine.

``--backend postgresql`` (with ``--embedded-postgres``, or ``--warehouse-url
postgresql://user:password@host/db`` for a server of your own) scores the same rows in a fresh
PostgreSQL database per chunk size instead (``event_time`` a ``timestamp``, the id lists ``text``,
loaded with ``COPY``): the server does the inserts in its own processes, so besides rows/s the
bench prints rows per CPU-second of the scoring process alone (the client: what one core of the
pipeline does) and the server's CPU seconds (embedded server only). No write floor there.

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
from typing import Any

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
    if "://" in path:
        return _build_postgres(path, n)
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE retrieval_logs (id INTEGER PRIMARY KEY, event_time TEXT NOT NULL, "
        "retrieved_ids TEXT, relevant_ids TEXT)"
    )
    conn.execute("CREATE INDEX ix_logs_time ON retrieval_logs (event_time)")
    conn.executemany("INSERT INTO retrieval_logs VALUES (?, ?, ?, ?)", _rows(n))
    conn.commit()
    conn.close()


def _build_postgres(url: str, n: int) -> None:
    """The same rows in a PostgreSQL database (``COPY``; ``event_time`` a ``timestamp``)."""
    import psycopg
    from bench_pipeline import _libpq

    with psycopg.connect(_libpq(url)) as conn:
        conn.execute(
            "CREATE TABLE retrieval_logs (id bigint PRIMARY KEY, event_time timestamp NOT NULL, "
            "retrieved_ids text, relevant_ids text)"
        )
        conn.execute("CREATE INDEX ix_logs_time ON retrieval_logs (event_time)")
        with conn.cursor().copy("COPY retrieval_logs FROM STDIN") as copy:
            for row in _rows(n):
                copy.write_row(row)


def score(path: str, chunk_size: int) -> dict:
    from ctxprec_ops.pipeline import PipelineConfig, score_partition
    from ctxprec_ops.pipeline.context import prepare

    url = path if "://" in path else f"sqlite:///{path}"
    cfg = PipelineConfig(warehouse=url, metric="label_contextual_precision", chunk_size=chunk_size)
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


def read_floor(path: str) -> float:
    """Rows per CPU-second of SQLite alone reading the partition's rows (the columns the metric
    needs, the day's range on ``event_time``, in id order) into tuples: nothing parsed or checked."""
    conn = sqlite3.connect(path)
    best = 0.0
    for _ in range(3):
        c0 = time.process_time()
        rows = conn.execute(
            "SELECT id, retrieved_ids, relevant_ids FROM retrieval_logs WHERE event_time >= ? AND event_time < ? "
            "ORDER BY id",
            (DAY, f"{DAY}~"),
        ).fetchall()
        best = max(best, len(rows) / max(time.process_time() - c0, 1e-9))
    conn.close()
    return best


def compute_only(n: int) -> float:
    from ctxprec_ops.metrics.label_precision import LabelContextualPrecisionMetric
    from ctxprec_ops.pipeline.label_rows import row_to_labelled

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
    p.add_argument("--backend", choices=["sqlite", "postgresql"], default="sqlite")
    p.add_argument("--warehouse-url", help="PostgreSQL server for --backend postgresql (a database per case)")
    p.add_argument("--embedded-postgres", action="store_true", help="start a PostgreSQL server for the bench")
    p.add_argument("--_score", nargs=2, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a._score:
        print(json.dumps(score(a._score[0], int(a._score[1]))))
        return 0
    if a.backend == "postgresql" and not (a.warehouse_url or a.embedded_postgres):
        p.error("--backend postgresql needs --warehouse-url postgresql://... or --embedded-postgres")
    computed = compute_only(min(a.rows, 100_000))
    print(f"computation alone (row -> case -> figures): {computed:,.0f} rows/s")
    ok = True
    with tempfile.TemporaryDirectory() as d:
        pg = None
        if a.backend == "postgresql":
            from bench_pipeline import PostgresDatabases  # the bench folder is the script's own

            pg = PostgresDatabases(a.warehouse_url, d)
        try:
            for cs in a.chunk_size:
                target = pg.create(f"bench_labels_{cs}") if pg is not None else str(Path(d) / f"labels_{cs}.db")
                try:
                    ok &= _one_case(target, cs, a.rows, pg, computed)
                finally:
                    if pg is not None:
                        pg.drop(f"bench_labels_{cs}")
        finally:
            if pg is not None:
                pg.close()
    return 0 if ok else 1


def _one_case(target: str, chunk_size: int, rows: int, pg: Any, computed: float) -> bool:
    """Build, score in a fresh process and print one chunk size's figures; whether the target was met."""
    build(target, rows)
    server_cpu = pg.server_cpu_seconds() if pg is not None else None
    out = subprocess.run(
        [sys.executable, __file__, "--_score", target, str(chunk_size)], check=True, capture_output=True, text=True
    )
    r = json.loads(out.stdout.strip().splitlines()[-1])
    hit = r["rows_per_s"] >= TARGET_ROWS_S
    cpu_of = "the scoring process's CPU" if pg is not None else "CPU"
    print(
        f"score_partition ({'PostgreSQL' if pg is not None else 'SQLite'}), {r['rows']:,} rows, chunk size "
        f"{chunk_size}: {r['rows_per_s']:,.0f} rows/s ({r['rows_per_cpu_s']:,.0f} rows per second of {cpu_of}, "
        f"load {r['load_avg']:.1f}), {r['scored']:,} scored, {r['failed']} failed, mean {r['mean']:.4f} "
        f"-> {'OK' if hit else 'MISSED'} (target {TARGET_ROWS_S:,} rows/s)"
    )
    if pg is None:
        read, floor = read_floor(target), write_floor(target, chunk_size)
        print(
            f"  SQLite alone inserting those rows (ready tuples, same tables and indexes): {floor:,.0f} rows/CPU-s; "
            f"reading them (tuples, nothing parsed): {read:,.0f} rows/CPU-s"
        )
        # one core does all three, one after another: their times per row add up
        ceiling = 1 / (1 / read + 1 / computed + 1 / floor)
        print(
            f"  reading + computing + writing with no other cost at all: {ceiling:,.0f} rows/CPU-s — "
            "the most any pipeline gets on one core of this machine"
        )
    elif server_cpu is not None:
        used = pg.server_cpu_seconds() - server_cpu
        print(
            f"  the PostgreSQL server's CPU for the run: {used:.1f} s ({r['rows'] / used:,.0f} rows per server CPU-s)"
        )
    return hit


if __name__ == "__main__":
    sys.exit(main())
