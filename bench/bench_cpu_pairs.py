"""This tree against another checkout, in pairs: rows per CPU-second of ``score_partition`` with
the instant judge, the same judge for both (this tree's ``bench_pipeline.InstantJudge``).

Run from the repository root, with a checkout of the code to compare with (e.g.
``git worktree add /tmp/before 774143f``)::

    .venv/bin/python bench/bench_cpu_pairs.py --other /tmp/before --rows 100000 --pairs 3

One SQLite warehouse is built (``bench_pipeline.py``'s rows, one partition); each run copies it and
scores it in a fresh process (one worker, chunks of 500), the other checkout first, then this
one, ``--pairs`` times. A run's CPU is its process's user + system time around
``score_partition`` (the one-time set-up, ``prepare``, done before). The machine is shared: a
pair's two runs follow each other, so compare within pairs; the ratios and their median are
printed. The judge is this tree's, whichever code it runs on (its answer costs the same on both
sides; the other checkout's ``ctxprec_ops`` is imported first, so ``bench_pipeline``'s own path
insertion does not replace it).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def run_one(code: str, db: str) -> dict:
    """In a fresh process: score ``db``'s partition with ``code``'s ``ctxprec_ops``."""
    sys.path.insert(0, code)
    import ctxprec_ops  # noqa: F401  (the checkout's package, before bench_pipeline adds this tree)

    sys.path.insert(0, str(ROOT / "bench"))
    import bench_pipeline as bp

    from ctxprec_ops.pipeline import PipelineConfig, score_partition

    cfg = PipelineConfig(
        warehouse=f"sqlite:///{db}", judge=bp.InstantJudge(), chunk_size=500, concurrency=16, quiet_gc=True
    )
    try:
        from ctxprec_ops.pipeline.context import prepare

        prepare(cfg)
    except ImportError:  # older code prepares inside score_partition
        pass
    r0, w0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    summary = score_partition(cfg, bp.DAY, workers=1)
    r1, wall = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter() - w0
    cpu = (r1.ru_utime - r0.ru_utime) + (r1.ru_stime - r0.ru_stime)
    return {
        "code": str(Path(sys.modules["ctxprec_ops.pipeline"].__file__).parents[2]),  # the code that ran
        "rows": summary.rows_scored,
        "cpu_s": cpu,
        "wall_s": wall,
        "rows_per_cpu_s": summary.rows_scored / cpu,
        "rows_per_s": summary.rows_scored / wall,
        "load": os.getloadavg()[0],
    }


def _child(code: str, source: str, tmp: str) -> dict:
    db = os.path.join(tmp, "run.db")
    shutil.copy(source, db)
    try:
        out = subprocess.run(
            [sys.executable, __file__, "--_run", code, db], check=True, capture_output=True, text=True
        ).stdout
    finally:
        for f in (db, db + "-wal", db + "-shm"):
            if os.path.exists(f):
                os.remove(f)
    return json.loads(out.strip().splitlines()[-1])


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--other", help="the checkout to compare with (its root directory)")
    p.add_argument("--rows", type=int, default=100_000)
    p.add_argument("--pairs", type=int, default=3)
    p.add_argument("--_run", nargs=2, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a._run:
        print(json.dumps(run_one(*a._run)))
        return 0
    if not a.other or not (Path(a.other) / "ctxprec_ops").is_dir():
        p.error("--other must be a checkout's root directory (it holds ctxprec_ops/)")
    sys.path.insert(0, str(ROOT / "bench"))
    import bench_pipeline as bp

    with tempfile.TemporaryDirectory() as tmp:
        source = os.path.join(tmp, "source.db")
        bp.build(source, a.rows)
        ratios = []
        for i in range(a.pairs):
            before = _child(str(Path(a.other).resolve()), source, tmp)
            after = _child(str(ROOT), source, tmp)
            ratios.append(after["rows_per_cpu_s"] / before["rows_per_cpu_s"])
            for label, r in (("other", before), ("this ", after)):
                print(
                    f"pair {i + 1} {label} ({r['code']}): {r['rows']:,} rows  {r['rows_per_cpu_s']:7,.0f} rows/CPU-s  "
                    f"{r['rows_per_s']:7,.0f} rows/s  (CPU {r['cpu_s']:.1f} s, wall {r['wall_s']:.1f} s, "
                    f"load {r['load']:.1f})",
                    flush=True,
                )
            print(f"pair {i + 1}: this / other = {ratios[-1]:.2f}x rows per CPU-second", flush=True)
        print(f"median of {len(ratios)} pairs: {bp._median(ratios):.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
