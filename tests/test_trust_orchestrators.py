"""The label-corrected mean in both orchestrators, run for real: Dagster's ``materialize()`` (the
materialization metadata and the threshold check with ``use_corrected``) and Airflow's nightly DAG
under ``dag.test()`` (the alert task's result and its ``use_corrected`` param), each against the
local OpenAI-compatible judge server.

The judge server calls a node relevant iff its text says RELEVANT; the gold labels (imported
before the run: labels belong to a row of the input table, not to a score) also call the first
node of every row relevant, so the judge under-calls and its mean is too low."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ctxprec_ops.calibration.label_table import import_labels
from ctxprec_ops.calibration.labels import parse_labels
from ctxprec_ops.scoring.formula import contextual_precision
from tests.fixtures.airflow_env import AirflowEnv
from tests.test_airflow_dags import DAG_ID, LOW, seed_day, sqlite_env

DAY = "2026-11-28"


def _gold(patterns: list[tuple[bool, ...]], ids: list[int]) -> dict[int, list[bool]]:
    return {rid: [True, *patterns[i % len(patterns)][1:]] for i, rid in enumerate(ids)}


def _import(url: str, gold: dict[int, list[bool]]) -> None:
    lines = ["log_id,node,relevant"] + [
        f"{rid},{k},{int(rel)}" for rid, labels in gold.items() for k, rel in enumerate(labels, start=1)
    ]
    report = import_labels(url, parse_labels("\n".join(lines), "gold.csv"))
    assert report.new == sum(len(v) for v in gold.values()) and len(report.unscored) == len(gold)


def test_airflow_alert_task_shows_and_can_use_the_corrected_mean(
    airflow_env: AirflowEnv, judge_server_session, tmp_path: Path
) -> None:
    server = judge_server_session
    server.reset()
    db = tmp_path / "warehouse.db"
    url = f"sqlite:///{db}"
    expected = seed_day(url, DAY, 20, LOW)
    gold = _gold(LOW, list(range(1, 21)))
    _import(url, gold)
    raw = sum(expected) / 20
    truth = sum(contextual_precision(g) for g in gold.values()) / 20
    assert raw < 0.6 < truth
    try:
        plain, corrected = airflow_env.dag_tests(
            [
                (DAG_ID, DAY, {"min_mean": 0.6}),
                (DAG_ID, None, {"min_mean": 0.6, "partition_key": DAY, "use_corrected": True}),
            ],
            sqlite_env(db, server),
        )
    finally:
        server.reset()
    assert plain.state == "failed" and plain.state_of("alert") == "failed", plain.output[-3000:]
    assert "min_mean" in plain.output and "labels: corrected mean" in plain.output
    assert corrected.state == "success", corrected.output[-3000:]
    result = corrected.xcom("alert")
    assert result["fired"] is False and result["rules"]["use_corrected"] is True
    c = result["corrected"]
    # every row labelled: the corrected mean is the gold mean itself, with a zero-width interval
    assert c["labelled_rows"] == 20 and c["mean"] == pytest.approx(truth) and c["ci_low"] == pytest.approx(truth)
    assert any("checked against the corrected mean" in n for n in result["notes"])


def test_dagster_metadata_and_threshold_check_show_the_corrected_mean(tmp_path, judge_server) -> None:
    from dagster import DagsterInstance

    from dagster_defs.definitions import score_checks, scores_assets
    from tests.test_dagster_materialize import GOOD, R, checks_of, metadata_of, run, seed

    url = f"sqlite:///{tmp_path / 'warehouse.db'}"
    contexts = GOOD * 4
    seed(url, DAY, contexts)
    gold = {i: [True, *[n == R for n in ctx[1:]]] for i, ctx in enumerate(contexts)}
    lines = ["log_id,node,relevant"] + [
        f"{DAY}-{i},{k},{int(rel)}" for i, labels in gold.items() for k, rel in enumerate(labels, start=1)
    ]
    import_labels(url, parse_labels("\n".join(lines), "gold.csv"))
    raw = sum(contextual_precision([n == R for n in c]) for c in contexts) / len(contexts)
    truth = sum(contextual_precision(g) for g in gold.values()) / len(gold)
    limit = (raw + truth) / 2
    assets = [scores_assets["contextual_precision"], score_checks[0]]
    with DagsterInstance.ephemeral() as instance:
        plain = run(assets, url, judge_server, DAY, instance=instance, min_mean=limit)
        used = run(assets, url, judge_server, DAY, instance=instance, min_mean=limit, use_corrected=True)
    md = metadata_of(plain, "contextual_precision_scores")
    assert md["labelled_rows"] == len(contexts) and md["corrected_mean"] == pytest.approx(truth)
    assert md["corrected_ci_low"] == pytest.approx(truth) and md["mean_score"] == pytest.approx(raw)
    assert "corrected mean (labels)" in md["summary"]
    assert checks_of(plain)["threshold"].passed is False
    check = checks_of(used)["threshold"]
    assert check.passed is True
    meta = {k: v.value for k, v in check.metadata.items()}
    assert meta["use_corrected"] is True and meta["corrected_mean"] == pytest.approx(truth)
    assert json.dumps(meta, default=str)  # plain values only
