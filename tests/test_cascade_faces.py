"""The judge cascade through every face: the CLI (``score``, ``estimate``, ``report``), a real
Airflow 3 ``dag.test()`` of the nightly DAG (the plan task calibrates once, the mapped chunk tasks
reuse its threshold, the aggregate task records the figures) and a real Dagster ``materialize()``
configured by the judge resource's fields."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ctxprec_ops.cli import main
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.cheap_judge import CheapModel
from tests.fixtures.warehouse_data import create_logs, query
from tests.test_cascade import DAY, PRICES, day_rows


@pytest.fixture
def cheap_env(openai_env, monkeypatch):
    openai_env.cheap_models["cheap"] = CheapModel(error_rate=0.15, seed=3)
    monkeypatch.setenv("CTXPREC_PRICES", json.dumps({k: list(v) for k, v in PRICES.items()}))
    return openai_env


def test_cli_score_estimate_and_report(cheap_env, tmp_path, capsys):
    url = f"sqlite:///{tmp_path / 'w.db'}"
    create_logs(get_engine(url), day_rows(DAY, 60, 1))
    flags = ["--judge", "cheap", "--escalate-to", "strong", "--target-agreement", "0.9", "--calibration-nodes", "120"]
    assert main(["estimate", "--warehouse", url, "--partition", DAY, *flags, "--json"]) == 0
    before = json.loads(capsys.readouterr().out)["cascade"]
    assert before["calibration_nodes"] == 120 and before["calibration_cost"] > 0  # a calibration is due
    assert before["escalation_rate"] is None  # nothing to go by yet: every node priced (an upper bound)

    assert main(["score", "--warehouse", url, "--partition", DAY, *flags, "--json"]) == 0
    captured = capsys.readouterr()
    summary = json.loads(captured.out)
    assert summary["judge_model"] == "cheap>strong[agreement=0.9]" and summary["status"] == "succeeded"
    assert "cascade: escalate below C=" in captured.err and "calibrated on 120 nodes" in captured.err
    assert 0 < summary["nodes_escalated"] < summary["nodes_judged"] == 300
    assert summary["calibration_agreement"] >= 0.9 and summary["strong_cost"] > 0

    assert main(["estimate", "--warehouse", url, "--partition", "2026-11-28", *flags, "--json"]) == 0
    after = json.loads(capsys.readouterr().out)["cascade"]
    assert after["calibration_cost"] == 0 and after["escalation_rate_source"].startswith("the stored calibration")

    report = tmp_path / "r.html"
    assert main(["report", "--warehouse", url, "--out", str(report), "--end", DAY]) == 0
    html = report.read_text()
    assert 'id="cascade-table"' in html and "cheap → strong" in html
    assert f'<tr data-partition="{DAY}"><td class="day">{DAY}</td><td class="num">300</td>' in html
    assert "(strong)" in html  # the worst cases say which judge decided a node


def test_airflow_nightly_dag_calibrates_once_and_maps_chunks(
    airflow_env: Any, judge_server_session: Any, tmp_path: Path
):
    pytest.importorskip("airflow")
    from tests.test_airflow_dags import DAG_ID, sqlite_env

    server = judge_server_session
    server.reset()
    server.model_name = "cheap"
    server.cheap_models["cheap"] = CheapModel(error_rate=0.15, seed=3)
    db = tmp_path / "warehouse.db"
    url = f"sqlite:///{db}"
    create_logs(get_engine(url), day_rows(DAY, 30, 1))
    env = sqlite_env(
        db,
        server,
        CTXPREC_CHUNK_SIZE="10",
        CTXPREC_ESCALATE_TO="strong",
        CTXPREC_TARGET_AGREEMENT="0.9",
        CTXPREC_CALIBRATION_NODES="80",
        CTXPREC_PRICES=json.dumps({k: list(v) for k, v in PRICES.items()}),
    )
    try:
        result = airflow_env.dag_test(DAG_ID, DAY, {}, env)
    finally:
        server.reset()
    assert result.state == "success", result.output[-4000:]
    assert len(result.tis("score_chunk")) == 3
    assert "calibrated on 80 nodes" in result.output
    assert query(url, "SELECT count(*), max(nodes) FROM ctxprec_cascades") == [(1, 80)]  # the plan task's, reused
    ((name, judged, escalated, below, agreement),) = query(
        url,
        "SELECT judge_model, nodes_judged, nodes_escalated, escalate_below, calibration_agreement FROM ctxprec_runs "
        "WHERE status = 'succeeded'",
    )
    assert name == "cheap>strong[agreement=0.9]" and judged == 150 and 0 < escalated < judged
    assert below is not None and agreement >= 0.9


def test_dagster_materialize_with_the_judge_resources_cascade_fields(judge_server, tmp_path):
    pytest.importorskip("dagster")
    from dagster import DagsterInstance, materialize

    from ctxprec_ops.dagster.resources import AlertThresholdsResource, JudgeResource, WarehouseResource
    from dagster_defs.definitions import log_tables, scores_assets

    judge_server.cheap_models["cheap"] = CheapModel(error_rate=0.15, seed=3)
    url = f"sqlite:///{tmp_path / 'w.db'}"
    create_logs(get_engine(url), day_rows(DAY, 20, 1))
    judge = JudgeResource(
        model="cheap",
        base_url=judge_server.base_url,
        api_key="test-key",
        escalate_to="strong",
        escalate_below=0.85,
        prices={k: list(v) for k, v in PRICES.items()},
    )
    resources = {"warehouse": WarehouseResource(url=url), "judge": judge, "thresholds": AlertThresholdsResource()}
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [log_tables[0], scores_assets["contextual_precision"]],
            instance=instance,
            partition_key=DAY,
            resources=resources,
            raise_on_error=False,
        )
    assert result.success
    ((name, rows),) = query(url, "SELECT judge_model, count(*) FROM ctxprec_scores GROUP BY judge_model")
    assert (name, rows) == ("cheap>strong[below=0.85]", 20)
    ((escalated, cheap, strong),) = query(url, "SELECT nodes_escalated, cheap_cost, strong_cost FROM ctxprec_runs")
    assert escalated > 0 and cheap > 0 and strong > 0
    asked = {r["json"]["model"] for r in judge_server.requests}
    assert asked == {"cheap", "strong"}
