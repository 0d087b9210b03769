"""``ctxprec audit position`` against the local OpenAI-compatible judge server (real HTTP): no
flips for a judge whose verdicts do not depend on order, exactly the expected flips for a judge
that misses every node shown third or later (``miss_from = 3``), the judgment cache bypassed, the
dry run's estimate, the spending cap, the stored audit and the report's card."""

from __future__ import annotations

import json
import re
from datetime import datetime

import pytest

from ctxprec_ops.cli import main as ctxprec
from ctxprec_ops.monitoring import render_report
from ctxprec_ops.monitoring.position_audit import audit_position, estimate_position_audit
from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.scoring.formula import contextual_precision
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import count, create_logs, log_row, query

DAY = "2026-11-28"
JUDGE = "gpt-4o-mini"
_BLOCK = re.compile(r'<node id="(\d+)">\n(.*?)\n</node>', re.DOTALL)


def _relevance(i: int) -> list[bool]:
    n = 4 + i % 4
    return [(i * 7 + k * 3) % 5 in (0, 2) for k in range(1, n + 1)]


def _rows() -> list[dict]:
    out = []
    for i in range(1, 31):
        nodes = [f"row {i} node {k} {'RELEVANT' if rel else 'IRRELEVANT'}" for k, rel in enumerate(_relevance(i), 1)]
        out.append(log_row(i, datetime(2026, 11, 28, i % 24), context=nodes))
    return out


@pytest.fixture
def url(tmp_path, openai_env) -> str:
    u = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(get_engine(u), _rows())
    return u


def _score(url: str) -> None:
    summary = score_partition(PipelineConfig(warehouse=url, judge=JUDGE, concurrency=4), DAY)
    assert summary.status == "succeeded" and summary.rows_scored == 30


def _audit_json(url: str, capsys, *extra: str) -> dict:
    code = ctxprec(["audit", "position", "--warehouse", url, "--partition", DAY, "--judge", JUDGE, "--json", *extra])
    out = capsys.readouterr().out
    assert code == 0, out
    return json.loads(out)


def test_no_flips_against_an_order_independent_judge_and_no_cache(url, openai_env, capsys):
    _score(url)
    judged = count(get_engine(url), "ctxprec_judgments")
    assert judged > 0
    openai_env.reset()  # every node is in the judgment cache now: an audit that used it would call nothing
    got = _audit_json(url, capsys, "--n", "20", "--seed", "4")
    assert {"cases", "flip_rate", "score_shift", "ci_low", "ci_high"} <= set(got)
    assert got["cases"] == 20 and got["flip_rate"] == 0.0 and got["flipped"] == 0
    assert got["score_shift"] == 0.0 and got["ci_low"] == 0.0 and got["ci_high"] == 0.0
    # one request per case, each row's nodes in reversed order, numbered 1..n as shown
    assert openai_env.calls == 20
    source = {str(r["id"]): r["retrieval_context"] for r in _rows()}
    for record in openai_env.requests:
        prompt = record["json"]["messages"][-1]["content"]
        blocks = _BLOCK.findall(prompt)
        texts = [t for _, t in blocks]
        row = re.match(r"row (\d+) ", texts[0]).group(1)  # type: ignore[union-attr]
        assert [int(k) for k, _ in blocks] == list(range(1, len(texts) + 1))
        assert texts == list(reversed(source[row]))
    assert count(get_engine(url), "ctxprec_judgments") == judged  # nothing written to the cache either
    stored = query(url, "SELECT kind, partition_key, judge_model, cases, flipped, flip_rate FROM ctxprec_audits")
    assert stored == [("position", DAY, JUDGE, 20, 0, 0.0)]


def test_finds_the_flips_of_a_judge_that_misses_nodes_shown_third_or_later(url, openai_env, capsys):
    openai_env.miss_from = 3  # position-blind: only the first two nodes shown can be relevant
    _score(url)
    got = _audit_json(url, capsys, "--n", "30")
    flips: dict[int, list[int]] = {}
    shifts = []
    for i in range(1, 31):
        rel = _relevance(i)
        n = len(rel)
        original = [r and k < 3 for k, r in enumerate(rel, 1)]
        reversed_ = [r and n + 1 - k < 3 for k, r in enumerate(rel, 1)]
        for k, (a, b) in enumerate(zip(original, reversed_), 1):
            cell = flips.setdefault(k, [0, 0])
            cell[0] += 1
            cell[1] += int(a != b)
        shifts.append(contextual_precision(reversed_) - contextual_precision(original))
    nodes, flipped = sum(c[0] for c in flips.values()), sum(c[1] for c in flips.values())
    assert got["cases"] == 30 and (got["nodes"], got["flipped"]) == (nodes, flipped) and flipped > 0
    assert got["flip_rate"] == pytest.approx(flipped / nodes)
    assert got["by_rank"] == [{"rank": k, "nodes": c[0], "flipped": c[1]} for k, c in sorted(flips.items())]
    assert got["score_shift"] == pytest.approx(sum(shifts) / len(shifts))
    assert got["ci_low"] <= got["score_shift"] <= got["ci_high"]
    assert not got["ci_low"] <= 0 <= got["ci_high"]  # a real order effect: the interval excludes 0
    assert ctxprec(["audit", "position", "--warehouse", url, "--partition", DAY, "--n", "30", "--judge", JUDGE]) == 0
    text = capsys.readouterr().out
    assert f"{flipped} of {nodes} verdicts flipped" in text and "verdicts flipped by original rank" in text
    html = render_report(url, url.split("///")[1].replace("wh.db", "r.html")).read_text(encoding="utf-8")
    assert 'id="audit-table"' in html and f"{flipped} / {nodes}" in html


def test_the_dry_run_estimates_without_calling_or_writing(url, openai_env, capsys):
    _score(url)
    openai_env.reset()
    est = _audit_json(url, capsys, "--n", "12", "--dry-run")
    assert est["dry_run"] is True and est["cases"] == 12 and est["judge_calls"] == 12
    assert est["prompt_tokens"] > 0 and est["completion_tokens"] > 0 and est["cost"] > 0
    assert openai_env.calls == 0
    assert "ctxprec_audits" not in [r[0] for r in query(url, "SELECT name FROM sqlite_master WHERE type = 'table'")]
    audit = audit_position(url, DAY, 12, judge=JUDGE)
    assert audit.judge_calls == est["judge_calls"] and audit.cases == 12
    assert 0.5 < est["prompt_tokens"] / audit.prompt_tokens < 1.5  # the server counts characters / 4


def test_the_spending_cap_counts_the_audit_calls(url, openai_env, capsys):
    _score(url)
    openai_env.reset()
    assert ctxprec(["audit", "position", "--warehouse", url, "--partition", DAY, "--n", "10", "--judge", JUDGE,
                    "--max-cost", "0"]) == 1  # fmt: skip
    assert "no case could be audited (budget_exhausted" in capsys.readouterr().err
    assert openai_env.calls == 0
    whole = estimate_position_audit(url, DAY, 20, judge=JUDGE)
    cap = whole.cost * 0.4
    audit = audit_position(url, DAY, 20, judge=JUDGE, max_cost=cap, concurrency=1)
    assert 0 < audit.cases < 20 and len(audit.failed) == 20 - audit.cases
    assert all(v.startswith("budget_exhausted") for v in audit.failed.values())
    assert audit.cost is not None and audit.cost <= cap


def test_a_judge_without_scores_is_a_clear_error(url, capsys):
    _score(url)
    assert ctxprec(["audit", "position", "--warehouse", url, "--partition", DAY, "--n", "5", "--judge", "lexical"]) == 1
    err = capsys.readouterr().err
    assert "no contextual_precision scores of judge lexical" in err and "score the partition with that judge" in err
