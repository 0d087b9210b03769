"""Instructions per row of ``score_partition`` with the instant judge, counted by valgrind's
callgrind (immune to the machine's load, unlike every time figure).

Run from the repository root:  .venv/bin/python bench/bench_cpu_instructions.py

For each size (default 1,000 and 3,000 rows, the rows of ``bench_pipeline.py``: one SQLite file per
size, one partition, chunk size 500, concurrency 16) a fresh process scores the partition under
``valgrind --tool=callgrind --instr-atstart=no``; instrumentation is switched on just before
``score_partition`` and off right after it (``callgrind_control -i on|off``), so imports and the
build are not counted. Instructions per row = the difference between the two sizes divided by the
difference in rows: the per-partition costs (planning, lazy imports, finalize) cancel out.
``--keep DIR`` keeps the callgrind output files for ``callgrind_annotate``; ``--request-path``
counts the instant judge without ``answers_inline`` (its calls take a remote judge's path);
``--labels`` counts ``label_contextual_precision`` instead (no judge), on the rows of
``bench_label_precision.py`` (default 2,000 and 6,000 rows). Needs ``valgrind``.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))


def score(target: str, request_path: bool, labels: bool) -> None:
    """In the process valgrind runs: score the partition with instrumentation on around it."""
    import bench_label_precision as bl
    import bench_pipeline as bp

    from ctxprec_ops.pipeline import PipelineConfig, score_partition

    if labels:
        cfg = PipelineConfig(
            warehouse=f"sqlite:///{target}", metric="label_contextual_precision", chunk_size=500, quiet_gc=True
        )
        day = bl.DAY
    else:
        cfg = PipelineConfig(
            warehouse=f"sqlite:///{target}",
            judge=bp._instant_judge(request_path),
            chunk_size=500,
            concurrency=16,
            quiet_gc=True,
        )
        day = bp.DAY
    pid = str(os.getpid())
    subprocess.run(["callgrind_control", "-i", "on", pid], check=True, capture_output=True)
    summary = score_partition(cfg, day, workers=1)
    subprocess.run(["callgrind_control", "-i", "off", pid], check=True, capture_output=True)
    print(f"scored {summary.rows_scored} of {summary.rows_total} rows, {summary.rows_failed} failed", flush=True)


def count(tmp: str, rows: int, keep: str | None, request_path: bool = False, labels: bool = False) -> int:
    """Instructions of one run of ``rows`` rows."""
    import bench_label_precision as bl
    import bench_pipeline as bp

    db = os.path.join(tmp, f"cpu_{rows}.db")
    (bl if labels else bp).build(db, rows)
    out = os.path.join(keep or tmp, f"callgrind.out.{rows}")
    proc = subprocess.run(
        [
            "valgrind",
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={out}",
            sys.executable,
            __file__,
            "--_score",
            db,
            *(["--request-path"] if request_path else []),
            *(["--labels"] if labels else []),
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    found = re.search(r"Collected : (\d+)", proc.stderr)
    if found is None:
        raise RuntimeError(f"no instruction count in valgrind's output:\n{proc.stderr[-2000:]}")
    print(f"{rows:>7,} rows: {int(found.group(1)):>16,} instructions  ({proc.stdout.strip()})", flush=True)
    return int(found.group(1))


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, nargs=2, default=None, metavar=("SMALL", "LARGE"))
    p.add_argument("--keep", default=None, help="directory to keep the callgrind output files in")
    p.add_argument(
        "--request-path",
        action="store_true",
        help="the instant judge without answers_inline: its calls take a remote judge's path",
    )
    p.add_argument("--labels", action="store_true", help="label_contextual_precision (no judge) instead")
    p.add_argument("--_score", help=argparse.SUPPRESS)
    a = p.parse_args()
    if a._score:
        score(a._score, a.request_path, a.labels)
        return 0
    if shutil.which("valgrind") is None or shutil.which("callgrind_control") is None:
        print("valgrind (callgrind) is not installed", file=sys.stderr)
        return 2
    small, large = a.rows or ([2_000, 6_000] if a.labels else [1_000, 3_000])
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        lo = count(tmp, small, a.keep, a.request_path, a.labels)
        hi = count(tmp, large, a.keep, a.request_path, a.labels)
    print(f"instructions per row: {(hi - lo) / (large - small):,.0f}  ({time.perf_counter() - t0:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
