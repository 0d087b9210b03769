"""A judge cascade on a workload where the cheap judge errs on 15 % of nodes: agreement with the
strong judge, the share of nodes the strong judge saw, and the cost relative to strong-only.

Run from the repository root:  .venv/bin/python bench/bench_cascade.py

The judges are the test suite's local OpenAI-compatible server (``tests/fixtures/judge_server.py``,
real HTTP, real ``openai`` client) under OpenAI's model names, so costs are the list prices of
``gpt-4o-mini`` (cheap) and ``gpt-4o`` (strong): the strong judge answers the oracle; the cheap one
is wrong on ``--error-rate`` of the nodes, unsure of most of its wrong verdicts (value token
probability 0.5-0.8), sure of its right ones (0.9-0.999), except ``--confidently-wrong`` of the
wrong ones and 5 % of the right ones (``tests/fixtures/cheap_judge.py``).

Per seed, two partitions of ``--rows`` rows x 5 nodes: the full pipeline (``score_partition``,
SQLite) scores day 1 with ``--target-agreement`` (the threshold is calibrated on a sample of
``--calibration-nodes`` nodes of day 1 and stored), then day 2 — a held-out day: the stored
threshold is reused. Day 2 is also scored strong-only in a warehouse of its own (no cache to
share). Figures for day 2 (a steady-state day) and for days 1+2 (the calibration included):

- agreement: the share of the cascade's node verdicts equal to the strong-only run's;
- strong nodes: the nodes sent to the strong judge (escalations, and the calibration sample) per node;
- cost: the cascade's judge spend over the strong-only spend of the same nodes.

Goal: agreement >= 95 % at <= 40 % of the strong judge's nodes and <= 0.5x its cost. Exits 1 when
a goal is missed on any seed.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere in the repo

import sqlalchemy as sa  # noqa: E402

from ctxprec_ops.pipeline import PipelineConfig, score_partition  # noqa: E402
from ctxprec_ops.warehouse.engine import get_engine  # noqa: E402
from tests.fixtures.cheap_judge import CheapModel  # noqa: E402
from tests.fixtures.judge_server import JudgeServer  # noqa: E402
from tests.fixtures.warehouse_data import create_logs, log_row  # noqa: E402

CHEAP, STRONG = "gpt-4o-mini", "gpt-4o"
DAYS = ("2026-11-27", "2026-11-28")
_BLOCK = re.compile(r'<node id="(\d+)">\n(.*?)\n</node>', re.DOTALL)
WORDS = (
    "refund policy shipping warranty invoice account password billing subscription delivery returns "
    "exchange support hours address order tracking discount coupon payment card"
).split()


def rows(day: str, n: int, first_id: int, seed: int) -> list[dict[str, Any]]:
    """``n`` rows of 5 nodes of ~300 characters; about a third of the nodes are relevant."""
    start = datetime.fromisoformat(day)
    out = []
    for i in range(n):
        rid = first_id + i
        nodes = []
        for k in range(5):
            relevant = (rid * 7 + k * 3 + seed) % 3 == 0
            filler = " ".join(WORDS[(rid + k * j) % len(WORDS)] for j in range(40))
            nodes.append(f"passage {rid}.{k} ({'RELEVANT' if relevant else 'unrelated'}): {filler}")
        question = f"Question {rid}: how does the {WORDS[rid % len(WORDS)]} work for my order?"
        out.append(log_row(rid, start + timedelta(seconds=40 * i), input=question, context=nodes))
    return out


def config(url: str, server: JudgeServer, **kw: Any) -> PipelineConfig:
    base: dict[str, Any] = dict(judge=CHEAP, judge_base_url=server.base_url, judge_api_key="bench", concurrency=16)
    return PipelineConfig(warehouse=url, **{**base, **kw})


def verdicts(url: str, day: str) -> dict[tuple[str, int], bool]:
    with get_engine(url).connect() as conn:
        got = conn.execute(sa.text("SELECT log_id, verdicts FROM ctxprec_scores WHERE partition_key = :d"), {"d": day})
        return {
            (r.log_id, v["node"]): v["relevant"]
            for r in got
            for v in (json.loads(r.verdicts) if isinstance(r.verdicts, str) else r.verdicts)
        }


def strong_nodes(server: JudgeServer, since: int) -> int:
    """Nodes shown to the strong judge in the requests since ``since``."""
    return sum(
        len(_BLOCK.findall(r["json"]["messages"][-1]["content"]))
        for r in server.requests[since:]
        if r["json"].get("model") == STRONG
    )


def one_seed(server: JudgeServer, seed: int, args: argparse.Namespace, tmp: Path) -> dict[str, float]:
    server.reset()
    cheap = CheapModel(error_rate=args.error_rate, confidently_wrong=args.confidently_wrong, seed=seed)
    server.cheap_models[CHEAP] = cheap
    data = {day: rows(day, args.rows, 1 + 10_000 * d, seed) for d, day in enumerate(DAYS)}
    nodes_per_day = 5 * args.rows
    cascade_url, strong_url = f"sqlite:///{tmp / f'cascade-{seed}.db'}", f"sqlite:///{tmp / f'strong-{seed}.db'}"
    create_logs(get_engine(cascade_url), [r for day in DAYS for r in data[day]])
    create_logs(get_engine(strong_url), [r for day in DAYS for r in data[day]])
    cfg = config(
        cascade_url,
        server,
        escalate_to=STRONG,
        target_agreement=args.target_agreement,
        calibration_nodes=args.calibration_nodes,
    )
    mark = len(server.requests)
    first = score_partition(cfg, DAYS[0])
    strong_first = strong_nodes(server, mark)
    mark = len(server.requests)
    held = score_partition(cfg, DAYS[1])
    strong_held = strong_nodes(server, mark)
    only = [score_partition(config(strong_url, server, judge=STRONG), day) for day in DAYS]
    agree = []
    for day in DAYS:
        mine, ref = verdicts(cascade_url, day), verdicts(strong_url, day)
        assert mine.keys() == ref.keys() and len(ref) == nodes_per_day
        agree.append(sum(mine[k] == ref[k] for k in ref) / len(ref))
    texts = [t for day in DAYS for r in data[day] for t in r["retrieval_context"]]
    cal = first.escalate_below
    assert first.cost is not None and held.cost is not None and only[0].cost and only[1].cost
    return {
        "cheap_error": sum(map(cheap.wrong, texts)) / len(texts),
        "C": cal if cal is not None else float("nan"),
        "held_agreement": agree[1],
        "held_strong_share": strong_held / nodes_per_day,
        "held_escalation": held.escalation_rate or 0.0,
        "held_cost_ratio": held.cost / only[1].cost,
        "both_agreement": (agree[0] + agree[1]) / 2,
        "both_strong_share": (strong_first + strong_held) / (2 * nodes_per_day),
        "both_cost_ratio": (first.cost + held.cost) / (only[0].cost + only[1].cost),
        "strong_only_cost": only[1].cost,
        "held_cost": held.cost,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rows", type=int, default=1000, help="rows per partition (5 nodes each)")
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--error-rate", type=float, default=0.15)
    ap.add_argument("--confidently-wrong", type=float, default=0.1)
    ap.add_argument("--target-agreement", type=float, default=0.95)
    ap.add_argument("--calibration-nodes", type=int, default=300)
    args = ap.parse_args()
    results = []
    with JudgeServer() as server, tempfile.TemporaryDirectory() as tmp:
        for seed in range(1, args.seeds + 1):
            results.append(one_seed(server, seed, args, Path(tmp)))
    print(
        f"{args.rows} rows x 5 nodes per day; cheap {CHEAP} (wrong on {args.error_rate:.0%}, {args.confidently_wrong:.0%} of "
        f"those confidently), strong {STRONG}; target agreement {args.target_agreement:.0%}, calibration "
        f"{args.calibration_nodes} nodes"
    )
    print(
        f"{'seed':>4} {'cheap err':>9} {'C':>6} | held-out day: {'agree':>6} {'strong nodes':>12} {'cost x':>6} "
        f"| days 1+2 (calibration incl.): {'agree':>6} {'strong nodes':>12} {'cost x':>6}"
    )
    ok = True
    for seed, r in enumerate(results, start=1):
        ok &= r["held_agreement"] >= 0.95 and r["held_strong_share"] <= 0.40 and r["held_cost_ratio"] <= 0.5
        ok &= r["both_agreement"] >= 0.95 and r["both_strong_share"] <= 0.40 and r["both_cost_ratio"] <= 0.5
        print(
            f"{seed:>4} {r['cheap_error']:>9.1%} {r['C']:>6.3f} | {'':>14}{r['held_agreement']:>6.1%} "
            f"{r['held_strong_share']:>12.1%} {r['held_cost_ratio']:>6.2f} | {'':>30}{r['both_agreement']:>6.1%} "
            f"{r['both_strong_share']:>12.1%} {r['both_cost_ratio']:>6.2f}"
        )
    last = results[-1]
    print(
        f"held-out day of the last seed: cascade ${last['held_cost']:.4f} vs strong-only ${last['strong_only_cost']:.4f}; "
        f"goals (agreement >= 95%, strong nodes <= 40%, cost <= 0.5x): {'met' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
