"""Segments in the orchestrators, run for real: the Dagster asset's metadata carries per-segment
means and its regression check fails naming the segment (``materialize()``); the Airflow alert
task fails with a message naming it (the operator executed against the same warehouse)."""

from __future__ import annotations

import pytest

from tests.segment_data import BAD_DAY, DAYS, SEGMENTS, build

pytest.importorskip("dagster")


@pytest.fixture(scope="module")
def scored_before(tmp_path_factory) -> str:
    """The known-answer warehouse with every day but the bad one scored (with segments)."""
    return build(f"sqlite:///{tmp_path_factory.mktemp('orch') / 'wh.db'}", days=DAYS[:-1])


def test_dagster_metadata_has_segment_means_and_the_check_names_the_segment(scored_before):
    from dagster import AssetCheckSeverity, DagsterInstance, materialize

    from ctxprec_ops.dagster.resources import AlertThresholdsResource, JudgeResource, WarehouseResource
    from dagster_defs.definitions import log_tables, score_checks, scores_assets

    asset = scores_assets["contextual_precision"]
    with DagsterInstance.ephemeral() as instance:
        result = materialize(
            [*log_tables, asset, score_checks[0]],
            instance=instance,
            partition_key=BAD_DAY,
            resources={
                "warehouse": WarehouseResource(url=scored_before, segments=list(SEGMENTS)),
                "judge": JudgeResource(model="lexical"),
                "thresholds": AlertThresholdsResource(),
            },
            raise_on_error=False,
        )
    assert result.success  # regression is a WARN check
    (mat,) = result.asset_materializations_for_node("contextual_precision_scores")
    md = {k: v.value for k, v in mat.metadata.items()}
    tenants = {item["label"]: item for item in md["segments/tenant"]}
    assert tenants["globex"]["rows"] == 120 and tenants["(null)"]["rows"] == 50
    assert md["mean[tenant=globex]"] == pytest.approx(tenants["globex"]["mean"])
    assert md["mean[tenant=globex]"] < md["mean[tenant=acme]"]
    checks = {e.check_name: e for e in result.get_asset_check_evaluations()}
    reg = checks["regression"]
    assert not reg.passed and reg.severity == AssetCheckSeverity.WARN
    assert "tenant=globex (120 rows)" in reg.description
    assert "tenant=acme" not in reg.description and "tenant=initech" not in reg.description


def test_airflow_alert_task_fails_naming_the_segment(scored_before, airflow_env):
    out = airflow_env.run_python(
        f"""
out = {{}}
from airflow.sdk.exceptions import AirflowFailException
from ctxprec_ops.airflow.operators import ContextualPrecisionAlertOperator
from ctxprec_ops.pipeline import PipelineConfig, score_partition
score_partition(PipelineConfig(warehouse={scored_before!r}, segments={list(SEGMENTS)!r}), {BAD_DAY!r})
op = ContextualPrecisionAlertOperator(task_id="alert", partition_key={BAD_DAY!r}, warehouse_conn_id=None,
                                      warehouse_url={scored_before!r}, by='["tenant"]')
try:
    op.execute({{}})
    out["failed"] = None
except AirflowFailException as exc:
    out["failed"] = str(exc)
ok = ContextualPrecisionAlertOperator(task_id="ok", partition_key={DAYS[-2]!r}, warehouse_conn_id=None,
                                      warehouse_url={scored_before!r}, by="tenant")
out["ok"] = ok.execute({{}})["fired"]
emit(out)
"""
    )
    assert out["failed"] is not None and out["failed"].startswith(f"ctxprec alert on {BAD_DAY}")
    assert "tenant=globex (120 rows)" in out["failed"] and "Holm-adjusted" in out["failed"]
    assert "tenant=acme" not in out["failed"]
    assert out["ok"] is False
