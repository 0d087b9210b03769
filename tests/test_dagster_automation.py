"""Declarative automation of the scores assets, evaluated for real with
``evaluate_automation_conditions`` on a Dagster instance: the default ``eager`` condition requests
the latest day when the log table reports new data, a materialization of that day satisfies it;
the ``cron`` condition; the freshness policy; the automation sensor; the scores table's schema."""

import os
from datetime import UTC, datetime, timedelta

os.environ.setdefault("CTXPREC_DAGSTER_RETRY_DELAY", "0.2")  # before dagster_defs builds its RetryPolicy

import pytest
from dagster import (
    AssetKey,
    AssetMaterialization,
    AutomationCondition,
    DagsterInstance,
    DefaultSensorStatus,
    Definitions,
    evaluate_automation_conditions,
    materialize,
)

from ctxprec_ops.dagster import AutomationSettings, automation_condition, build_scores_asset, resources_for
from dagster_defs.definitions import defs, log_tables, scores_assets
from tests.test_dagster_materialize import GOOD, resources, seed

DAY = "2026-11-28"
AFTER_DAY = datetime(2026, 11, 29, 0, 30, tzinfo=UTC)
CP = AssetKey("contextual_precision_scores")


def _requested(result) -> dict[str, list[str]]:
    return {
        key.to_user_string(): sorted(result.get_requested_partitions(key))
        for key in scores_assets_keys()
        if result.get_requested_partitions(key)
    }


def scores_assets_keys() -> list[AssetKey]:
    return [a.key for a in scores_assets.values()]


def test_the_default_definitions_automate_the_nightly_kinds_with_a_stopped_sensor():
    graph = defs.resolve_asset_graph()
    for name in ("contextual_precision_scores", "turn_contextual_precision_scores"):
        assert graph.get(AssetKey(name)).automation_condition == AutomationCondition.eager()
    assert graph.get(AssetKey("label_contextual_precision_scores")).automation_condition is None  # opt-in kind
    sensor = defs.get_sensor_def("ctxprec_automation")
    assert sensor.default_status == DefaultSensorStatus.STOPPED
    schema = graph.get(CP).metadata["dagster/column_schema"]
    assert {"log_id", "partition_key", "score", "verdicts", "judge_model", "cost"} <= {c.name for c in schema.columns}


def test_new_source_data_requests_the_latest_day_and_its_materialization_satisfies_it(tmp_path, judge_server):
    url = f"sqlite:///{tmp_path / 'warehouse.db'}"
    seed(url, DAY, GOOD)
    assets = Definitions(assets=[*log_tables, *scores_assets.values()], resources=resources(url, judge_server))
    with DagsterInstance.ephemeral() as instance:
        first = evaluate_automation_conditions(defs=assets, instance=instance, evaluation_time=AFTER_DAY)
        assert _requested(first) == {}  # nothing reported by the log table yet
        # the loader reports that it wrote retrieval_logs
        instance.report_runless_asset_event(AssetMaterialization("retrieval_logs"))
        second = evaluate_automation_conditions(
            defs=assets, instance=instance, evaluation_time=AFTER_DAY + timedelta(minutes=1), cursor=first.cursor
        )
        # the latest day of the assets reading retrieval_logs that are automated (not labels, not turns)
        assert _requested(second) == {"contextual_precision_scores": [DAY]}
        result = materialize(
            [*log_tables, scores_assets["contextual_precision"]],
            instance=instance,
            partition_key=DAY,
            resources=resources(url, judge_server),
        )
        assert result.success
        third = evaluate_automation_conditions(
            defs=assets, instance=instance, evaluation_time=AFTER_DAY + timedelta(minutes=2), cursor=second.cursor
        )
        assert _requested(third) == {}  # handled: no second run of the day


def test_the_cron_condition_requests_the_latest_day_after_each_tick():
    asset = build_scores_asset(
        "contextual_precision", automation=automation_condition(AutomationSettings(kind="cron", cron="0 2 * * *"))
    )
    with DagsterInstance.ephemeral() as instance:
        cursor, requested = None, []
        for when in (datetime(2026, 11, 29, 1, 0), datetime(2026, 11, 29, 2, 5), datetime(2026, 11, 29, 3, 0)):
            result = evaluate_automation_conditions(
                defs=Definitions(assets=[*log_tables, asset], resources=resources_for("local")),
                instance=instance,
                evaluation_time=when.replace(tzinfo=UTC),
                cursor=cursor,
            )
            cursor = result.cursor
            requested.append(sorted(result.get_requested_partitions(asset.key)))
    assert requested == [[], [DAY], []]  # once, after the 02:00 tick, no source event needed


def test_freshness_and_automation_come_from_the_environment(monkeypatch):
    monkeypatch.setenv("CTXPREC_DAGSTER_FRESHNESS_HOURS", "26")
    monkeypatch.setenv("CTXPREC_DAGSTER_AUTOMATION", "on_cron")
    asset = build_scores_asset("contextual_precision")
    spec = next(iter(asset.specs))
    assert spec.freshness_policy.fail_window.to_timedelta() == timedelta(hours=26)
    assert spec.automation_condition == AutomationCondition.on_cron("0 0 * * *", "UTC")
    monkeypatch.setenv("CTXPREC_DAGSTER_AUTOMATION", "none")
    assert next(iter(build_scores_asset("contextual_precision").specs)).automation_condition is None
    monkeypatch.setenv("CTXPREC_DAGSTER_AUTOMATION", "hourly")
    with pytest.raises(ValueError, match="CTXPREC_DAGSTER_AUTOMATION must be one of eager, cron, on_cron, none"):
        build_scores_asset("contextual_precision")
