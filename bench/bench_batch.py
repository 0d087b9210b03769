"""Sync vs batch judge mode on the same partition: tokens and cost per case, requests, wall time.

Run from the repository root:  .venv/bin/python bench/bench_batch.py [--rows 2000]

No network: the judge endpoint is the repository's local OpenAI-compatible test server
(tests/fixtures/judge_server.py), which speaks both chat completions and the Batch API and
counts tokens as ~4 characters each. The model is named ``gpt-4o-mini`` so both runs are priced
from the built-in list price (batch mode: half of it, unless CTXPREC_PRICES says otherwise).
Each row has a ~60-character question, a ~90-character expected output and 5 distinct nodes of
~200 characters. The same rows go into two SQLite warehouses; one is scored in sync mode, the
other in batch mode; the script checks the scores are identical and prints the figures.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
import time
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DAY = "2026-11-28"
TOPICS = ["billing", "refunds", "shipping", "passwords", "invoices", "API keys", "webhooks", "exports"]


def rows(n: int, seed: int = 7) -> list[dict]:
    rng = random.Random(seed)
    t0 = datetime.fromisoformat(DAY)
    out = []
    for i in range(n):
        topic = rng.choice(TOPICS)
        nodes = []
        for k in range(5):
            word = "RELEVANT" if rng.random() < 0.4 else "unrelated"
            nodes.append(
                f"Passage {i}.{k} on {topic}: {word} "
                + " ".join(
                    rng.choice(["policy", "account", "customer", "window", "days", "support", "team", "settings"])
                    for _ in range(22)
                )
            )
        out.append(
            {
                "id": i + 1,
                "event_time": t0 + timedelta(seconds=i * 86_000 // max(n, 1)),
                "input": f"How do I handle {topic} for order {i} when the customer asks twice?",
                "actual_output": "Follow the policy.",
                "expected_output": f"The {topic} policy says to answer within 30 days and record the request.",
                "retrieval_context": nodes,
            }
        )
    return out


def main() -> int:
    import sqlalchemy as sa

    from ctxprec_ops.batch import BatchOptions, score_partition_batch
    from ctxprec_ops.judge.pricing import batch_price_of, price_of
    from ctxprec_ops.pipeline import PipelineConfig, score_partition
    from tests.fixtures.judge_server import JudgeServer
    from tests.fixtures.warehouse_data import create_logs

    ap = argparse.ArgumentParser()
    ap.add_argument("--rows", type=int, default=2000)
    args = ap.parse_args()
    data = rows(args.rows)
    tmp = Path(tempfile.mkdtemp(prefix="ctxprec-bench-batch-"))
    figures = {}
    with JudgeServer() as server:
        for mode in ("sync", "batch"):
            url = f"sqlite:///{tmp / (mode + '.db')}"
            create_logs(sa.create_engine(url), data)
            cfg = PipelineConfig(
                warehouse=url,
                judge="gpt-4o-mini",
                judge_base_url=server.base_url,
                judge_api_key="bench-key",
                judge_mode=mode,
                concurrency=16,
            )
            server.reset()
            t0 = time.perf_counter()
            if mode == "sync":
                s = score_partition(cfg, DAY)
            else:
                s = score_partition_batch(cfg, DAY, options=BatchOptions(poll_seconds=0.05, first_poll=0.01))
            seconds = time.perf_counter() - t0
            with sa.create_engine(url).connect() as conn:
                scores = dict(conn.execute(sa.text("SELECT log_id, score FROM ctxprec_scores")).all())
            figures[mode] = (s, seconds, server.calls, len(server.batch_created), server.file_uploads, scores)
    print(
        f"{args.rows} rows, 5 nodes each, judge gpt-4o-mini (list price {price_of('gpt-4o-mini')}, "
        f"batch price {batch_price_of('gpt-4o-mini')} USD per 1M in/out tokens)"
    )
    print(
        f"{'mode':6} {'status':9} {'scored':>7} {'prompt tok/case':>16} {'compl tok/case':>15} "
        f"{'USD/case':>11} {'USD/1M cases':>13} {'chat reqs':>9} {'batches':>7} {'seconds':>8}"
    )
    for mode, (s, seconds, calls, batches, _uploads, _) in figures.items():
        n = max(s.rows_scored, 1)
        per_case = (s.cost or 0.0) / n
        print(
            f"{mode:6} {s.status:9} {s.rows_scored:7d} {s.prompt_tokens / n:16.1f} {s.completion_tokens / n:15.1f} "
            f"{per_case:11.8f} {per_case * 1e6:13.2f} {calls:9d} {batches:7d} {seconds:8.2f}"
        )
    same = figures["sync"][5] == figures["batch"][5]
    ratio = (figures["batch"][0].cost or 0) / (figures["sync"][0].cost or 1)
    print(f"scores identical: {same}; batch cost / sync cost = {ratio:.3f}")
    return 0 if same and abs(ratio - 0.5) < 1e-9 else 1


if __name__ == "__main__":
    raise SystemExit(main())
