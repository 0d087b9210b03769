"""``ContextualPrecisionComponent`` for real: scaffolded the way ``dg scaffold defs`` does it, declared
in a ``defs.yaml`` (a custom table and column mapping, the judge, thresholds, automation, schedule,
alerts), loaded by Dagster's component machinery and materialized for one partition against a
SQLite warehouse and the local OpenAI-compatible judge server."""

import json
from datetime import datetime, timedelta

import pytest
import sqlalchemy as sa
import yaml
from dagster import AssetKey, DagsterInstance, materialize
from dagster.components.testing import create_defs_folder_sandbox

from ctxprec_ops.dagster import ContextualPrecisionComponent
from ctxprec_ops.scoring.formula import contextual_precision
from tests.fixtures.warehouse_data import query

DAY = "2026-11-28"
R, N = "RELEVANT: refunds within 30 days.", "unrelated weather notes"
CONTEXTS = [[R, N], [N, R, R], [R, R, N], [N, N, R]]
JUDGE_KEY = "sk-component-test-0123456789"


def seed_rag_logs(url: str) -> list[float]:
    """A log table with its own names: ``rag_logs`` (uid, ts, question, answer, reference, contexts)."""
    engine = sa.create_engine(url)
    meta = sa.MetaData()
    table = sa.Table(
        "rag_logs",
        meta,
        sa.Column("uid", sa.String(32), primary_key=True),
        sa.Column("ts", sa.DateTime()),
        sa.Column("question", sa.Text),
        sa.Column("answer", sa.Text),
        sa.Column("reference", sa.Text),
        sa.Column("contexts", sa.JSON),
    )
    meta.create_all(engine)
    t0 = datetime.fromisoformat(DAY)
    rows = [
        {
            "uid": f"r{i}",
            "ts": t0 + timedelta(hours=3 * i),
            "question": f"How long is the refund window? #{i}",
            "answer": "30 days",
            "reference": "Refunds are accepted within 30 days.",
            "contexts": ctx,
        }
        for i, ctx in enumerate(CONTEXTS)
    ]
    rows.append({**rows[0], "uid": "next-day", "ts": t0 + timedelta(days=1, hours=1)})
    with engine.begin() as conn:
        conn.execute(table.insert(), rows)
    engine.dispose()
    return [contextual_precision([n == R for n in ctx]) for ctx in CONTEXTS]


def test_the_scaffolded_defs_yaml_loads_with_its_defaults(monkeypatch, tmp_path):
    monkeypatch.setenv("CTXPREC_WAREHOUSE_URL", f"sqlite:///{tmp_path / 'w.db'}")
    with create_defs_folder_sandbox() as sandbox:
        path = sandbox.scaffold_component(component_cls=ContextualPrecisionComponent, defs_path="rag_eval")
        declared = yaml.safe_load((path / "defs.yaml").read_text())
        assert declared["type"] == "ctxprec_ops.dagster.component.ContextualPrecisionComponent"
        assert declared["attributes"]["automation"]["kind"] == "eager"
        assert declared["attributes"]["warehouse"] == {"url_env": "CTXPREC_WAREHOUSE_URL"}
        with sandbox.load_component_and_build_defs(defs_path=path) as (component, defs):
            assert isinstance(component, ContextualPrecisionComponent)
            graph = defs.resolve_asset_graph()
            scores = graph.get(AssetKey("contextual_precision_scores"))
            assert scores.parent_keys == {AssetKey("retrieval_logs")}
            assert scores.automation_condition is not None and scores.partitions_def.get_first_partition_key() == (
                "2025-01-01"
            )
            assert {k.name for k in graph.asset_check_keys} == {"threshold", "regression", "volume"}
            assert [s.name for s in defs.sensors] == ["contextual_precision_scores_automation"]
            assert sorted(defs.resources) == [
                "contextual_precision_scores__judge",
                "contextual_precision_scores__thresholds",
                "contextual_precision_scores__warehouse",
            ]


def test_a_yaml_declared_evaluation_materializes_a_partition(monkeypatch, tmp_path, judge_server):
    url = f"sqlite:///{tmp_path / 'warehouse.db'}"
    expected = seed_rag_logs(url)
    monkeypatch.setenv("EVAL_WAREHOUSE_URL", url)
    monkeypatch.setenv("EVAL_JUDGE_KEY", JUDGE_KEY)
    judge_server.api_key = JUDGE_KEY
    attributes = {
        "metric": "contextual_precision",
        "asset_name": "rag_precision_scores",
        "source_table": "rag_logs",
        "columns": {
            "id": "uid",
            "event_time": "ts",
            "input": "question",
            "actual_output": "answer",
            "expected_output": "reference",
            "retrieval_context": "contexts",
        },
        "start_date": "2026-11-01",
        "warehouse": {"url_env": "EVAL_WAREHOUSE_URL"},
        "judge": {
            "model": judge_server.model_name,
            "base_url": judge_server.base_url,
            "api_key_env": "EVAL_JUDGE_KEY",
            "concurrency": 4,
            "max_retries": 1,
        },
        "thresholds": {"threshold": 0.6, "min_mean": 0.95, "blocking": False},
        "automation": {"kind": "cron", "cron": "0 2 * * *"},
        "schedule": {"enabled": True},
        "alerts": {"enabled": True},
    }
    with create_defs_folder_sandbox() as sandbox:
        path = sandbox.scaffold_component(
            component_cls=ContextualPrecisionComponent,
            defs_path="rag_eval",
            defs_yaml_contents={"type": "ctxprec_ops.dagster.ContextualPrecisionComponent", "attributes": attributes},
        )
        with sandbox.load_component_and_build_defs(defs_path=path) as (component, defs):
            assert component.columns["retrieval_context"] == "contexts" and component.automation.kind == "cron"
            assert {s.name for s in defs.sensors} == {
                "rag_precision_scores_automation",
                "rag_precision_scores_run_failure_alert",
                "rag_precision_scores_check_failure_alert",
            }
            assert [s.name for s in defs.schedules] == ["rag_precision_scores_nightly"]
            graph = defs.resolve_asset_graph()
            assert graph.get(AssetKey("rag_precision_scores")).parent_keys == {AssetKey("rag_logs")}
            with DagsterInstance.ephemeral() as instance:
                result = materialize(
                    [*defs.assets, *defs.asset_checks],
                    instance=instance,
                    partition_key=DAY,
                    resources=defs.resources,
                    selection=[AssetKey("rag_precision_scores")],
                )
                assert result.success
                (mat,) = result.asset_materializations_for_node("rag_precision_scores")
                md = mat.metadata
                checks = {e.check_name: e for e in result.get_asset_check_evaluations()}

    scores = dict(query(url, "SELECT log_id, score FROM ctxprec_scores WHERE partition_key = :p", p=DAY))
    assert scores == pytest.approx({f"r{i}": s for i, s in enumerate(expected)})
    assert md["dagster/row_count"].value == len(CONTEXTS) and md["source_table"].value == "rag_logs"
    assert md["mean_score"].value == pytest.approx(sum(expected) / len(expected))
    assert "| rows scored / total | 4 / 4 |" in md["summary"].value
    lineage = md["dagster/column_lineage"].value.deps_by_column
    assert [d.column_name for d in lineage["log_id"]] == ["uid"]
    assert {d.column_name for d in lineage["score"]} >= {"question", "reference", "contexts"}
    assert all(d.asset_key == AssetKey("rag_logs") for d in lineage["score"])
    # checks of that partition: the mean is below min_mean 0.95, not blocking
    assert not checks["threshold"].passed and checks["threshold"].metadata["partition_key"].value == DAY
    assert checks["threshold"].metadata["min_mean"].value == 0.95
    assert JUDGE_KEY not in json.dumps({k: str(v) for k, v in md.items()})
