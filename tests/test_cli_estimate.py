"""`ctxprec estimate`: no judge call, sane numbers, already-scored rows and cached nodes excluded."""

from __future__ import annotations

import json
import math

import pytest
import sqlalchemy as sa

from ctxprec_ops.cli import main
from ctxprec_ops.demo.sample import create_sample_warehouse
from ctxprec_ops.judge.pricing import price_of
from ctxprec_ops.pipeline import PipelineConfig
from ctxprec_ops.pipeline.estimate import estimate_partition

DAY = "2026-11-28"


@pytest.fixture
def warehouse(tmp_path, monkeypatch):
    for var in (
        "CTXPREC_WAREHOUSE_URL",
        "CTXPREC_JUDGE",
        "CTXPREC_SOURCE_TABLE",
        "CTXPREC_CHUNK_SIZE",
        "CTXPREC_PRICES",
    ):
        monkeypatch.delenv(var, raising=False)
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    info = create_sample_warehouse(
        url, days=2, rows_per_day=(40, 50), conversations_per_day=(6, 8), end_date=DAY, seed=21
    )
    return url, info


def _estimate(capsys, *args: str) -> dict:
    assert main(["estimate", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_estimate_makes_no_call_and_counts_sanely(warehouse, openai_env, capsys):
    url, info = warehouse
    server = openai_env
    est = _estimate(capsys, "--warehouse", url, "--partition", DAY, "--judge", "gpt-4o-mini", "--chunk-size", "7")
    assert server.calls == 0  # the judge endpoint was never contacted
    bad_today = info.malformed  # ids of malformed rows (both days)
    assert est["rows_total"] == info.retrieval_rows[DAY]
    assert est["rows_already_scored"] == 0
    assert 1 <= est["rows_invalid"] <= sum(len(v) for v in bad_today.values())
    assert est["rows_to_score"] == est["rows_total"] - est["rows_invalid"]
    # 3-8 nodes per retrieval: one call per row (groups of at most 20 nodes)
    assert est["judge_calls"] == est["rows_to_score"]
    assert 3 * est["rows_to_score"] <= est["nodes_total"] <= 8 * est["rows_to_score"]
    assert est["nodes_to_judge"] == est["nodes_total"] - est["nodes_cached"]
    # every prompt carries the template (> 1,000 characters) plus its nodes
    assert est["prompt_tokens"] > 250 * est["judge_calls"]
    assert est["completion_tokens"] == 10 * est["judge_calls"] + 40 * est["nodes_to_judge"]
    pin, pout = price_of("gpt-4o-mini")
    assert est["cost"] == pytest.approx((est["prompt_tokens"] * pin + est["completion_tokens"] * pout) / 1e6)
    assert 0 < est["cost"] < 0.1
    assert est["batch_cost"] == pytest.approx(est["cost"] / 2)  # side by side: the Batch API's half price
    # the chunk size changes how the partition is read, not the totals (bar in-chunk repeats)
    again = _estimate(capsys, "--warehouse", url, "--partition", DAY, "--judge", "gpt-4o-mini", "--chunk-size", "500")
    assert again["rows_total"] == est["rows_total"] and again["nodes_total"] == est["nodes_total"]


def test_estimate_then_score_close_and_rerun_is_free(warehouse, openai_env, capsys):
    """The estimate is in the right range of the real spend; after scoring nothing is left, and
    with the scores gone (cache kept) every node is a cache hit: zero calls."""
    url, _ = warehouse
    args = ["--warehouse", url, "--partition", DAY, "--judge", "gpt-4o-mini"]
    before = _estimate(capsys, *args)
    assert main(["score", *args, "--quiet", "--json"]) == 0
    run = json.loads(capsys.readouterr().out)
    assert run["judge_calls"] <= before["judge_calls"]
    real_prompt = run["prompt_tokens"]
    assert 0.7 * real_prompt <= before["prompt_tokens"] <= 1.4 * real_prompt

    after = _estimate(capsys, *args)
    assert after["rows_already_scored"] == run["rows_scored"]
    assert after["judge_calls"] == 0 and after["cost"] == 0

    engine = sa.create_engine(url)
    with engine.begin() as conn:
        conn.execute(sa.text("DELETE FROM ctxprec_scores"))
    engine.dispose()
    cached = _estimate(capsys, *args)
    assert cached["rows_already_scored"] == 0 and cached["rows_to_score"] == run["rows_scored"]
    assert cached["nodes_cached"] == cached["nodes_total"] > 0
    assert cached["judge_calls"] == 0


def test_conversations_and_unknown_price(warehouse, capsys, monkeypatch):
    url, info = warehouse
    est = _estimate(capsys, "--warehouse", url, "--partition", DAY, "--conversations", "--judge", "my-local-llama")
    assert est["metric"] == "turn_contextual_precision"
    assert est["rows_total"] == info.conversation_rows[DAY]
    assert est["judge_calls"] >= est["rows_to_score"] * 2 - 2  # >= 2 interaction units, most with retrieval
    assert est["cost"] is None  # no price known for that model
    monkeypatch.setenv("CTXPREC_PRICES", json.dumps({"my-local-llama": [1.0, 2.0]}))
    priced = _estimate(capsys, "--warehouse", url, "--partition", DAY, "--conversations", "--judge", "my-local-llama")
    assert priced["cost"] == pytest.approx((priced["prompt_tokens"] + 2 * priced["completion_tokens"]) / 1e6)


def test_table_output_and_errors(warehouse, capsys):
    url, _ = warehouse
    assert main(["estimate", "--warehouse", url, "--partition", DAY]) == 0
    out = capsys.readouterr().out
    assert "no judge call was made" in out and "judge calls" in out and "lexical" in out
    assert main(["estimate", "--warehouse", url, "--partition", "28/11/2026"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and err.startswith("ctxprec estimate: error:")
    assert main(["estimate", "--warehouse", url, "--partition", DAY, "--source-table", "nope"]) == 1
    assert "does not exist" in capsys.readouterr().err


def test_estimate_writes_nothing(warehouse):
    url, _ = warehouse
    est = estimate_partition(PipelineConfig(warehouse=url, judge="lexical"), DAY)
    assert est.offline_judge and est.cost == 0.0 and not math.isnan(est.prompt_tokens)
    engine = sa.create_engine(url)
    names = set(sa.inspect(engine).get_table_names())
    engine.dispose()
    assert not any(n.startswith("ctxprec_") for n in names)
