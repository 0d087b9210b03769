"""The judge cascade end to end against the local judge server: a "cheap" model that is wrong on a
known share of nodes (unsure of most of its wrong verdicts, sure of its right ones, a few
confidently wrong: ``tests/fixtures/cheap_judge.py``) and a "strong" model that answers the oracle.

What is checked: a judge without log-probabilities or samples is refused before any call; only the
nodes less sure than C reach the strong judge, grouped as the node-group rule allows (conversations
scored by the turn metric too); a threshold
chosen for a target agreement meets it on a partition it was not chosen on, and is reused by the
same judges, prompt and target only; cascade scores and single-judge scores never share a key, and
the judgment cache works per stage; batch mode runs the two stages as two batches with the sync
run's verdicts; people's labels are the calibration's reference when there are enough; the Python
API.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import replace
from datetime import datetime, timedelta
from typing import Any

import pytest
import sqlalchemy as sa

from ctxprec_ops import ContextualPrecisionMetric, LLMTestCase, evaluate
from ctxprec_ops.batch import BatchOptions, score_partition_batch
from ctxprec_ops.errors import JudgeConfigurationError
from ctxprec_ops.judge.models import JudgeModel, OpenAIJudge
from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.warehouse.engine import get_engine
from ctxprec_ops.warehouse.reflect import table_names
from tests.fixtures.cheap_judge import CheapModel
from tests.fixtures.judge_server import default_oracle
from tests.fixtures.warehouse_data import create_logs, log_row

DAY, HELD_OUT, LATER = "2026-11-27", "2026-11-28", "2026-11-29"
PRICES = {"cheap": (0.15, 0.6), "strong": (2.5, 10.0)}
FAST = BatchOptions(poll_seconds=0.01, first_poll=0.0)
_BLOCK = re.compile(r'<node id="(\d+)">\n(.*?)\n</node>', re.DOTALL)


def day_rows(day: str, n: int, first_id: int, nodes: int = 5) -> list[dict[str, Any]]:
    start = datetime.fromisoformat(day)
    return [
        log_row(
            first_id + i,
            start + timedelta(minutes=i),
            input=f"question {first_id + i} about the refund policy",
            context=[
                f"passage {first_id + i}.{k}: {'RELEVANT' if (i + k) % 3 == 0 else 'unrelated'} policy text"
                for k in range(nodes)
            ],
        )
        for i in range(n)
    ]


@pytest.fixture
def server(judge_server):
    judge_server.cheap_models["cheap"] = CheapModel(error_rate=0.15, seed=3)
    return judge_server


@pytest.fixture
def warehouse(tmp_path) -> str:
    url = f"sqlite:///{tmp_path / 'w.db'}"
    create_logs(get_engine(url), [*day_rows(DAY, 120, 1), *day_rows(HELD_OUT, 120, 1001), *day_rows(LATER, 40, 2001)])
    return url


def config(url: str, server, **kw: Any) -> PipelineConfig:
    base = dict(
        warehouse=url,
        judge="cheap",
        escalate_to="strong",
        judge_base_url=server.base_url,
        judge_api_key="k",
        prices=PRICES,
        concurrency=4,
    )
    return PipelineConfig(**{**base, **kw})


def stored(url: str, judge_model: str, day: str | None = None) -> dict[str, list[dict]]:
    where = "judge_model = :j" + (" AND partition_key = :d" if day else "")
    with get_engine(url).connect() as conn:
        rows = conn.execute(
            sa.text(f"SELECT log_id, verdicts FROM ctxprec_scores WHERE {where}"), {"j": judge_model, "d": day}
        )
        return {r.log_id: json.loads(r.verdicts) if isinstance(r.verdicts, str) else r.verdicts for r in rows}


def node_texts(url: str) -> dict[str, list[str]]:
    with get_engine(url).connect() as conn:
        rows = conn.execute(sa.text("SELECT id, retrieval_context FROM retrieval_logs"))
        return {
            str(r.id): json.loads(r.retrieval_context) if isinstance(r.retrieval_context, str) else r.retrieval_context
            for r in rows
        }


def requests_of(server, model: str) -> list[dict]:
    return [r for r in server.requests if r["json"].get("model") == model]


def asked_texts(record: dict) -> list[str]:
    content = record["json"]["messages"][-1]["content"]
    return [text for _, text in _BLOCK.findall(content)]


def agreement(url: str, judge_model: str, day: str) -> tuple[float, int]:
    """The share of a day's stored node verdicts that are the strong judge's (the oracle's)."""
    texts = node_texts(url)
    same = total = 0
    for log_id, verdicts in stored(url, judge_model, day).items():
        for v in verdicts:
            same += v["relevant"] == default_oracle(texts[log_id][v["node"] - 1], "")
            total += 1
    return same / total, total


# -- refused before any call ---------------------------------------------------------------------


class NoConfidenceJudge(JudgeModel):
    """A custom judge: one answer, no log-probabilities."""

    def get_model_name(self) -> str:
        return "my-judge"

    def generate(self, prompt, schema=None):
        ids = [int(k) for k, _ in _BLOCK.findall(prompt)]
        return json.dumps({"verdicts": [{"node": k, "relevant": True, "reason": "x"} for k in ids]})


def test_a_judge_without_logprobs_or_samples_is_refused_before_any_call(server, warehouse):
    with pytest.raises(JudgeConfigurationError, match="'lexical' cannot be the cheap stage of a cascade"):
        ContextualPrecisionMetric(model="lexical", escalate_to="strong", escalate_below=0.8)
    with pytest.raises(JudgeConfigurationError, match="no token log-probabilities and judge_samples is 1"):
        ContextualPrecisionMetric(model=NoConfidenceJudge(), escalate_to="strong", escalate_below=0.8)
    sampled = ContextualPrecisionMetric(model=NoConfidenceJudge(), escalate_to="strong", escalate_below=0.8, samples=3)
    assert sampled.cascade is not None and sampled.cascade.confidence == "samples"
    with pytest.raises(JudgeConfigurationError, match="cannot be the cheap stage"):
        score_partition(config(warehouse, server, judge="lexical", escalate_below=0.8), DAY)
    assert server.calls == 0
    assert "ctxprec_scores" not in table_names(get_engine(warehouse))  # refused before anything was written
    with pytest.raises(ValueError, match="needs one of escalate_below .* and target_agreement"):
        config(warehouse, server, escalate_below=0.8, target_agreement=0.9)
    with pytest.raises(ValueError, match="escalate_below needs escalate_to"):
        config(warehouse, server, escalate_to=None, escalate_below=0.8)


# -- escalation ----------------------------------------------------------------------------------


def test_only_the_unsure_nodes_go_to_the_strong_judge_in_as_few_calls_as_allowed(server, warehouse):
    cheap = server.cheap_models["cheap"]
    cfg = config(warehouse, server, escalate_below=0.85, max_nodes_per_call=2, sample_rate=0.25)
    run = score_partition(cfg, DAY)
    assert run.status == "succeeded" and run.judge_model == "cheap>strong[below=0.85]"
    texts = node_texts(warehouse)
    verdicts = stored(warehouse, run.judge_model)
    assert len(verdicts) == run.rows_scored > 10
    expected = {t for log_id in verdicts for t in texts[log_id] if cheap.draw(t)[1] < 0.85}
    strong_calls = requests_of(server, "strong")
    asked = [t for r in strong_calls for t in asked_texts(r)]
    assert sorted(asked) == sorted(expected) and expected  # only them, each once
    per_case = Counter(next(i for i, ts in texts.items() if t in ts) for t in asked)
    calls = Counter(next(i for i, ts in texts.items() if asked_texts(r)[0] in ts) for r in strong_calls)
    assert calls == {case: math.ceil(n / 2) for case, n in per_case.items()}  # groups of max_nodes_per_call
    assert all(not r["json"].get("logprobs") for r in strong_calls)
    assert all(r["json"].get("logprobs") is True for r in requests_of(server, "cheap"))
    for log_id, nodes in verdicts.items():
        for v in nodes:
            text = texts[log_id][v["node"] - 1]
            wrong, p = cheap.draw(text)
            assert v["cheap_confidence"] == pytest.approx(p)
            if p < 0.85:
                assert v["decided_by"] == "strong" and v["relevant"] == default_oracle(text, "")
                assert v["cheap_relevant"] == (default_oracle(text, "") != wrong)
            else:
                assert v["decided_by"] == "cheap" and "cheap_relevant" not in v
    assert run.nodes_judged == sum(len(n) for n in verdicts.values())
    assert run.nodes_escalated == len(expected) and run.escalation_rate == pytest.approx(
        len(expected) / run.nodes_judged
    )
    assert run.cheap_cost > 0 and run.strong_cost > 0
    assert run.cheap_cost + run.strong_cost == pytest.approx(run.cost)
    with get_engine(warehouse).connect() as conn:
        row = conn.execute(
            sa.text("SELECT nodes_escalated, escalation_rate, strong_cost, escalate_below FROM ctxprec_runs")
        ).one()
    assert tuple(row) == pytest.approx((run.nodes_escalated, run.escalation_rate, run.strong_cost, 0.85))


def test_conversations_scored_by_the_turn_metric_escalate_the_same_way(server, tmp_path):
    from tests.test_pipeline_conversations import DAY as CONVERSATION_DAY
    from tests.test_pipeline_conversations import convo, make

    url = f"sqlite:///{tmp_path / 'c.db'}"
    make(get_engine(url), [convo(i) for i in range(1, 21)])
    cfg = config(url, server, metric="turn_contextual_precision", window_size=2, escalate_below=0.85)
    run = score_partition(cfg, CONVERSATION_DAY)
    assert (run.status, run.rows_scored, run.judge_model) == ("succeeded", 20, "cheap>strong[below=0.85]")
    cheap = server.cheap_models["cheap"]
    asked = [t for r in requests_of(server, "strong") for t in asked_texts(r)]
    assert asked and all(cheap.draw(t)[1] < 0.85 for t in asked)  # only the unsure nodes went up
    verdicts = [v for vs in stored(url, run.judge_model).values() for v in vs]
    assert {v["decided_by"] for v in verdicts} == {"cheap", "strong"}
    assert all((v["decided_by"] == "strong") == (v["cheap_confidence"] < 0.85) for v in verdicts)
    assert 0 < run.nodes_escalated < run.nodes_judged and run.strong_cost > 0


# -- a target agreement ----------------------------------------------------------------------------


def test_the_cascade_meets_its_target_agreement_on_a_held_out_partition(server, warehouse):
    cfg = config(warehouse, server, target_agreement=0.95, calibration_nodes=300)
    notes: list[str] = []
    first = score_partition(cfg, DAY, progress=lambda e: notes.append(e.message) if e.kind == "cascade" else None)
    assert "calibrated on 300 nodes against the strong judge" in notes[0] and "a sample of 2026-11-27" in notes[0]
    with get_engine(warehouse).connect() as conn:
        (cal,) = conn.execute(sa.text("SELECT * FROM ctxprec_cascades")).mappings().all()
    assert (cal["nodes"], cal["reference"], cal["target_agreement"]) == (300, "strong", 0.95)
    assert cal["agreement_low"] >= 0.95 and cal["cheap_agreement"] < 0.9  # the cheap judge alone falls short
    assert first.escalate_below == pytest.approx(cal["escalate_below"])
    assert first.calibration_agreement == pytest.approx(cal["agreement"])

    before = len(server.requests)
    held = score_partition(cfg, HELD_OUT, progress=lambda e: notes.append(e.message) if e.kind == "cascade" else None)
    assert "reused" in notes[-1] and held.escalate_below == pytest.approx(cal["escalate_below"])
    measured, nodes = agreement(warehouse, held.judge_model, HELD_OUT)
    texts = node_texts(warehouse)
    held_texts = [t for log_id in stored(warehouse, held.judge_model, HELD_OUT) for t in texts[log_id]]
    cheap_alone = 1 - sum(map(server.cheap_models["cheap"].wrong, held_texts)) / len(held_texts)
    assert nodes == 600 and measured >= 0.95 > cheap_alone
    assert held.escalation_rate < 0.4  # the strong judge saw less than 40 % of the nodes
    asked = Counter(r["json"]["model"] for r in server.requests[before:])
    rows_escalated = sum(
        any(v["decided_by"] == "strong" for v in vs) for vs in stored(warehouse, held.judge_model, HELD_OUT).values()
    )
    assert asked == {
        "cheap": 120,
        "strong": rows_escalated,
    }  # no calibration: one cheap call a row, one strong call an escalating row
    with get_engine(warehouse).connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM ctxprec_cascades")).scalar() == 1

    again = score_partition(replace(cfg, recalibrate=True), LATER)
    assert again.status == "succeeded" and "(a sample of 2026-11-29)" in (again.error_message or "")
    with get_engine(warehouse).connect() as conn:
        assert conn.execute(sa.text("SELECT count(*) FROM ctxprec_cascades")).scalar() == 2


def test_a_stored_calibration_is_reused_only_by_the_same_judges_and_prompt(server, warehouse):
    cfg = config(
        warehouse,
        server,
        target_agreement=0.9,
        calibration_nodes=60,
        sample_rate=0.3,
        prices={**PRICES, "strong-2": PRICES["strong"]},
    )
    notes: list[str] = []

    def run(c: PipelineConfig, day: str) -> str:
        score_partition(c, day, progress=lambda e: notes.append(e.message) if e.kind == "cascade" else None)
        with get_engine(warehouse).connect() as conn:
            n = conn.execute(sa.text("SELECT count(*) FROM ctxprec_cascades")).scalar()
        return f"{'reused' if 'reused' in notes[-1] else 'calibrated'} {n}"

    assert run(cfg, DAY) == "calibrated 1"
    assert run(cfg, HELD_OUT) == "reused 1"
    assert run(replace(cfg, escalate_to="strong-2"), HELD_OUT) == "calibrated 2"  # another strong judge
    assert run(replace(cfg, judge="strong-2", escalate_to="strong"), HELD_OUT) == "calibrated 3"  # another cheap one
    assert run(replace(cfg, target_agreement=0.85), LATER) == "calibrated 4"  # another target
    with get_engine(warehouse).begin() as conn:  # the prompt of every stored calibration changed since
        conn.execute(sa.text("UPDATE ctxprec_cascades SET prompt_version = 'v0-an-older-prompt'"))
    assert run(cfg, LATER) == "calibrated 5"
    assert run(cfg, LATER) == "reused 5"


# -- keys and the cache --------------------------------------------------------------------------------


def test_cascade_scores_never_mix_with_single_judge_scores_and_each_stage_is_cached(server, warehouse):
    cfg = config(warehouse, server, escalate_to=None, sample_rate=0.2)
    single = score_partition(cfg, DAY)
    strong_only = score_partition(replace(cfg, judge="strong"), DAY)
    before = len(server.requests)
    fixed = score_partition(replace(cfg, escalate_to="strong", escalate_below=0.85), DAY)
    first = server.requests[before:]
    assert {r["json"]["model"] for r in first} == {"cheap"}  # the strong stage: all cached by the strong-only run
    assert all(r["json"].get("logprobs") for r in first)  # the cheap-only run's verdicts had no confidence
    before = len(server.requests)
    targeted = score_partition(replace(cfg, escalate_to="strong", target_agreement=0.9, calibration_nodes=60), DAY)
    higher = score_partition(replace(cfg, escalate_to="strong", escalate_below=0.99), DAY)
    assert len(server.requests) == before  # both stages cached: nothing asked again, the calibration included
    runs = [single, strong_only, fixed, targeted, higher]
    names = [r.judge_model for r in runs]
    assert names == [
        "cheap",
        "strong",
        "cheap>strong[below=0.85]",
        "cheap>strong[agreement=0.9]",
        "cheap>strong[below=0.99]",
    ]
    with get_engine(warehouse).connect() as conn:
        counts = dict(
            conn.execute(sa.text("SELECT judge_model, count(*) FROM ctxprec_scores GROUP BY judge_model")).all()
        )
    assert counts == {name: single.rows_scored for name in names}
    assert all("decided_by" not in v for vs in stored(warehouse, "cheap").values() for v in vs)
    escalated = [
        sum(v["decided_by"] == "strong" for vs in stored(warehouse, n).values() for v in vs) for n in names[2:]
    ]
    assert escalated[0] < escalated[2]  # a higher threshold escalates more


# -- batch mode ------------------------------------------------------------------------------------------


def test_batch_mode_runs_each_stage_as_a_batch_and_resumes(server, tmp_path):
    data = day_rows(DAY, 30, 1)
    sync_url, batch_url = f"sqlite:///{tmp_path / 'sync.db'}", f"sqlite:///{tmp_path / 'batch.db'}"
    for url in (sync_url, batch_url):
        create_logs(get_engine(url), data)
    sync = score_partition(config(sync_url, server, escalate_below=0.85, max_nodes_per_call=3), DAY)
    chat = server.calls
    server.batch_hold = True  # the provider keeps the batches running until released
    cfg = config(batch_url, server, escalate_below=0.85, max_nodes_per_call=3, judge_mode="batch")
    done = score_partition(cfg, DAY, wait=False)
    run_id, seen = done.run_id, []
    server.batch_hold = False
    for _ in range(50):  # a scheduler polling a waiting run (Airflow's deferrable operator does)
        if done.status != "waiting":
            break
        assert done.waiting is not None
        seen.append(tuple(done.waiting.ids))
        done = score_partition(cfg, DAY, wait=False, run_id=run_id, resume=done.waiting.resume)
    assert len(dict.fromkeys(seen)) == 2  # the cheap stage's batch, then the escalation batch
    assert server.calls == chat  # no chat call: both stages came through batches
    assert (done.status, done.rows_scored, done.nodes_escalated) == (
        sync.status,
        sync.rows_scored,
        sync.nodes_escalated,
    )
    assert stored(batch_url, done.judge_model) == stored(sync_url, sync.judge_model)
    assert done.cost == pytest.approx(sync.cost / 2) and done.strong_cost == pytest.approx(sync.strong_cost / 2)
    with get_engine(batch_url).connect() as conn:
        batches = conn.execute(
            sa.text("SELECT model, requests, status FROM ctxprec_batches ORDER BY submitted_at")
        ).all()
    assert [(b.model, b.status) for b in batches] == [("cheap", "completed"), ("strong", "completed")]
    assert batches[1].requests == len({r for r in _escalated_requests(sync_url, sync.judge_model)})


def _escalated_requests(url: str, name: str) -> list[tuple[str, int]]:
    """(row, group) of each strong-judge call a sync run made (groups of 3 escalated nodes)."""
    out = []
    for log_id, verdicts in stored(url, name).items():
        n = sum(v["decided_by"] == "strong" for v in verdicts)
        out += [(log_id, g) for g in range(math.ceil(n / 3))]
    return out


def test_batch_mode_with_a_target_calibrates_with_ordinary_calls(server, tmp_path):
    url = f"sqlite:///{tmp_path / 'b.db'}"
    create_logs(get_engine(url), day_rows(DAY, 40, 1))
    run = score_partition_batch(
        config(url, server, target_agreement=0.9, calibration_nodes=80, judge_mode="batch"), DAY, options=FAST
    )
    assert run.status == "succeeded" and run.escalate_below is not None
    assert server.calls > 0 and len(server.batch_created) >= 1  # the sample: sync calls; the run: batches
    assert run.rows_scored == 40
    with get_engine(url).connect() as conn:
        (cal_cost,) = conn.execute(sa.text("SELECT cheap_cost + strong_cost FROM ctxprec_cascades")).one()
    assert cal_cost > 0 and run.cost > cal_cost

    # the same run invoked again after each wait (a deferrable operator): the calibration's spend,
    # made by the first invocation, is in the run's figures at the end
    url = f"sqlite:///{tmp_path / 'w.db'}"
    create_logs(get_engine(url), day_rows(DAY, 40, 1))
    cfg = config(url, server, target_agreement=0.9, calibration_nodes=80, judge_mode="batch")
    done = score_partition(cfg, DAY, wait=False)
    for _ in range(50):
        if done.status != "waiting":
            break
        assert done.waiting is not None
        done = score_partition(cfg, DAY, wait=False, run_id=done.run_id, resume=done.waiting.resume)
    assert done.status == "succeeded" and done.escalate_below == run.escalate_below
    assert (done.judge_calls, done.cost, done.strong_cost) == (
        run.judge_calls,
        pytest.approx(run.cost),
        pytest.approx(run.strong_cost),
    )


# -- labels as the reference ----------------------------------------------------------------------------


def test_peoples_labels_are_the_reference_when_there_are_enough(server, warehouse):
    from ctxprec_ops.calibration.label_table import import_labels
    from ctxprec_ops.calibration.labels import LabelSet, labels_digest

    score_partition(config(warehouse, server, escalate_to=None), DAY)  # the labelled rows are scored rows
    texts = node_texts(warehouse)
    labels = {str(i): {k + 1: default_oracle(t, "") for k, t in enumerate(texts[str(i)])} for i in range(1, 41)}
    import_labels(warehouse, LabelSet("test", labels, labels_digest(labels)))
    run = score_partition(config(warehouse, server, target_agreement=0.9, calibration_nodes=150), HELD_OUT)
    with get_engine(warehouse).connect() as conn:
        (cal,) = conn.execute(sa.text("SELECT reference, partition_key, nodes FROM ctxprec_cascades")).all()
    assert tuple(cal) == ("labels:default", "labels", 150)
    assert "label set default" in (run.error_message or "")


# -- the Python API ----------------------------------------------------------------------------------------


def test_the_python_api_calibrates_in_evaluate_and_measure_needs_a_threshold(server):
    cheap = OpenAIJudge("cheap", base_url=server.base_url, api_key="k")
    strong = OpenAIJudge("strong", base_url=server.base_url, api_key="k")
    cases = [
        LLMTestCase(
            input=r["input"],
            expected_output=r["expected_output"],
            retrieval_context=r["retrieval_context"],
            id=str(r["id"]),
        )
        for r in day_rows(DAY, 60, 1)
    ]
    metric = ContextualPrecisionMetric(model=cheap, escalate_to=strong, target_agreement=0.95, calibration_nodes=200)
    assert metric.evaluation_model == "cheap>strong[agreement=0.95]"
    with pytest.raises(JudgeConfigurationError, match="not chosen yet: calibrate first"):
        metric.measure(cases[0])
    result = evaluate(cases, [metric], show_progress=False)
    cal = metric.cascade.calibration
    assert cal is not None and cal.nodes == 200 and cal.agreement_low >= 0.95
    assert not any(r.error for r in result.results)
    nodes = sum(r.nodes_judged for r in result.results)
    escalated = sum(r.nodes_escalated for r in result.results)
    assert nodes == 300 and 0 < escalated < 0.4 * nodes
    same = sum(
        v.relevant == default_oracle(t, "")
        for c, r in zip(cases, result.results)
        for v, t in zip(r.verdicts, c.retrieval_context)
    )
    assert same / nodes >= 0.95
    fixed = ContextualPrecisionMetric(model=cheap, escalate_to=strong, escalate_below=cal.escalate_below)
    assert fixed.measure(cases[0]) == result.results[0].score  # the same verdicts: both stages' answers
    assert fixed.verdicts[0].decided_by in ("cheap", "strong")
