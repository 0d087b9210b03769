"""Partition throughput against a judge that allows N requests per minute.

Run from the repository root:  .venv/bin/python bench/bench_quota.py [--rpm 600] [--rows 600]

The local judge server enforces ``--rpm`` over a sliding 60-second window (HTTP 429 above it, as
a provider does) and answers after ``--latency`` s. ``score_partition`` scores ``--rows`` rows
with ``max_rpm = --rpm`` and ``concurrency = --concurrency``. Printed: rows/minute over the
whole run (planning, judging, warehouse writes), the same over the judging span at the server
(first to last request), the share of the cap each is, and the 429s the server sent.
Target: >= 95 % of the cap end to end, 0 429s. Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere in the repo

from ctxprec_ops.pipeline import PipelineConfig, score_partition  # noqa: E402
from ctxprec_ops.warehouse.engine import get_engine  # noqa: E402
from tests.fixtures.judge_server import JudgeServer  # noqa: E402
from tests.fixtures.warehouse_data import create_logs  # noqa: E402
from tests.helpers.planted import DAY, planted_rows  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rpm", type=float, default=600.0, help="the judge's cap, requests per minute")
    ap.add_argument("--rows", type=int, default=600, help="rows in the partition (one request each)")
    ap.add_argument("--latency", type=float, default=0.3, help="seconds per judge answer")
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--chunk-size", type=int, default=500)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp, JudgeServer() as server:
        url = f"sqlite:///{Path(tmp) / 'wh.db'}"
        rows, _ = planted_rows(args.rows)
        create_logs(get_engine(url), rows)
        server.latency = args.latency
        server.rpm_limit, server.rpm_window = args.rpm, 60.0
        cfg = PipelineConfig(
            warehouse=url,
            judge="judge-test-model",
            judge_base_url=server.base_url,
            judge_api_key="bench-key",
            chunk_size=args.chunk_size,
            concurrency=args.concurrency,
            max_rpm=args.rpm,
        )
        started, mono0 = time.perf_counter(), time.monotonic()
        summary = score_partition(cfg, DAY)
        elapsed, mono1 = time.perf_counter() - started, time.monotonic()
        arrived = sorted(r["arrived"] for r in server.requests)
        refused = server.outcomes["429_rpm"]

    end_to_end = summary.rows_scored / elapsed * 60
    span = arrived[-1] - arrived[0] if len(arrived) > 1 else float("nan")
    at_server = (len(arrived) - 1) / span * 60
    print(f"cap {args.rpm:.0f} rpm, {args.rows} rows, latency {args.latency}s, concurrency {args.concurrency}")
    print(
        f"  run: {elapsed:.1f}s, {summary.rows_scored} scored, {summary.rows_failed} failed, "
        f"{len(arrived)} requests, {refused} x 429"
    )
    print(
        f"  first request {arrived[0] - mono0:.1f}s after the start; {mono1 - arrived[-1]:.1f}s from the last "
        "request to the run's end"
    )
    print(f"  end to end: {end_to_end:.1f} rows/min = {end_to_end / args.rpm:.1%} of the cap")
    print(f"  at the server (first to last request): {at_server:.1f} req/min = {at_server / args.rpm:.1%} of the cap")
    ok = end_to_end >= 0.95 * args.rpm and refused == 0 and summary.rows_failed == 0
    print("target (>= 95% of the cap, no 429):", "met" if ok else "MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
