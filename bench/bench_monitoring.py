"""Monitoring at warehouse scale: time and peak RSS of ``check_partition``, ``load_trend`` and
``render_report`` on a SQLite warehouse of ``--days`` partitions x ``--rows`` scored rows.

Run from the repository root:  .venv/bin/python bench/bench_monitoring.py [--days 60] [--rows 20000]

The warehouse is built with the pipeline's own table definitions (``ensure_output_tables``) and
bulk-inserted through ``sqlite3.executemany``; each measurement runs in a fresh process so its
peak RSS (``ru_maxrss``) is its own; import time is reported apart. Targets (exit 1 when missed): check <= 10 s, report <= 30 s,
peak RSS <= 500 MB at the defaults (1.2 M scored rows).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

TARGETS = {"check": 10.0, "trend": 30.0, "report": 30.0}
TARGET_RSS_MB = 500


def build(path: Path, days: int, rows: int) -> str:
    import sqlalchemy as sa

    from ctxprec_ops.warehouse.schema import ensure_output_tables

    url = f"sqlite:///{path}"
    eng = sa.create_engine(url)
    ensure_output_tables(eng)
    eng.dispose()
    rnd = random.Random(7)
    start = dt.date(2026, 10, 1)
    verdicts = json.dumps([{"node": k, "relevant": k % 2 == 0, "reason": "shares the key terms"} for k in range(1, 6)])
    con = sqlite3.connect(path)
    for d in range(days):
        key = (start + dt.timedelta(days=d)).isoformat()
        mean = 0.6 if d == days - 1 else 0.72
        batch = []
        for i in range(rows):
            s = min(1.0, max(0.0, rnd.gauss(mean, 0.2)))
            batch.append((f"{key}-{i}", key, "contextual_precision", "retrieval_logs", s, s >= 0.5, 0.5, verdicts,
                          "reason", "judge",
                          "v1", 100, 10, 0.0001, f"run-{key}", f"{key} 23:00:00"))  # fmt: skip
        con.executemany(
            "INSERT INTO ctxprec_scores (log_id, partition_key, metric, source_table, score, success, threshold, "
            "verdicts, reason, judge_model, prompt_version, prompt_tokens, completion_tokens, cost, run_id, scored_at) "
            "VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
            batch,
        )
        con.commit()
    con.close()
    return url


def _child(what: str, url: str, end: str, out: str) -> None:
    import resource

    t0 = time.perf_counter()
    import scipy.stats  # noqa: F401  (imported lazily by the stats; counted as import time)

    from ctxprec_ops.monitoring import check_partition, load_trend, render_report

    imported = time.perf_counter() - t0
    t0 = time.perf_counter()
    if what == "check":
        r = check_partition(url, end)
        detail = f"alerts={[a.rule for a in r.alerts]} n={r.figures.summary.n} baseline_n={r.baseline.summary.n}"
    elif what == "trend":
        df = load_trend(url, days=30)
        detail = f"partitions={len(df)} alert_days={int((df['alerts'].str.len() > 0).sum())}"
    else:
        p = render_report(url, out, days=30)
        detail = f"html={p.stat().st_size / 1024:.0f} KiB"
    elapsed = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"what": what, "seconds": elapsed, "import": imported, "rss_mb": rss, "detail": detail}))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--days", type=int, default=60)
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--child", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        _child(*args.child)
        return 0
    ok = True
    with tempfile.TemporaryDirectory() as tmp:
        t0 = time.perf_counter()
        url = build(Path(tmp) / "wh.db", args.days, args.rows)
        end = (dt.date(2026, 10, 1) + dt.timedelta(days=args.days - 1)).isoformat()
        print(f"warehouse: {args.days} partitions x {args.rows:,} rows = {args.days * args.rows:,} scores "
              f"(built in {time.perf_counter() - t0:.1f} s)")  # fmt: skip
        for what in ("check", "trend", "report"):
            proc = subprocess.run(
                [sys.executable, __file__, "--child", what, url, end, str(Path(tmp) / "r.html")],
                capture_output=True, text=True, check=False,
            )  # fmt: skip
            if proc.returncode != 0:
                print(f"{what}: FAILED\n{proc.stderr[-2000:]}")
                ok = False
                continue
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            good = r["seconds"] <= TARGETS[what] and r["rss_mb"] <= TARGET_RSS_MB
            ok &= good
            print(f"{what:7s} {r['seconds']:6.2f} s (target <= {TARGETS[what]:.0f}; imports {r['import']:.1f} s)  peak RSS {r['rss_mb']:6.0f} MB "
                  f"(target <= {TARGET_RSS_MB})  {r['detail']}  {'ok' if good else 'MISSED'}")  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
