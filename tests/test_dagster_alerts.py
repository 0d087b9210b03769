"""The Dagster alert sensors for real: ``materialize()`` a partition whose ``threshold`` check fails
(blocking: the run fails; not blocking: a check fails in a successful run), then the run-failure /
check-failure sensors evaluated on that run post the ctxprec alert JSON — the payload of the Airflow
notifier — to a local HTTP receiver (a 5xx retried)."""

import os

os.environ.setdefault("CTXPREC_DAGSTER_RETRY_DELAY", "0.2")  # before dagster_defs builds its RetryPolicy

from dagster import DagsterEventType, DagsterInstance, SkipReason, build_run_status_sensor_context, materialize

from ctxprec_ops.dagster import build_alert_sensors, build_score_checks, build_scores_asset
from dagster_defs.definitions import log_tables
from tests.helpers.webhook_receiver import Receiver, webhook_receiver  # noqa: F401 (fixture)
from tests.test_dagster_materialize import GOOD, resources, seed

DAY = "2026-11-28"
SECRET_PATH = "/hooks/T0SECRETPATH"


def _run(tmp_path, judge_server, instance, *, blocking: bool, **thresholds):
    url = f"sqlite:///{tmp_path / 'warehouse.db'}"
    seed(url, DAY, GOOD)
    asset = build_scores_asset("contextual_precision", automation=None)
    checks = build_score_checks(asset, "contextual_precision", blocking=blocking)
    result = materialize(
        [*log_tables, asset, checks],
        instance=instance,
        partition_key=DAY,
        resources=resources(url, judge_server, **thresholds),
        raise_on_error=False,
    )
    return asset, result


def _context(instance, result, sensor_name: str, event_type: DagsterEventType):
    (record,) = instance.all_logs(result.run_id, of_type=event_type)
    return build_run_status_sensor_context(
        sensor_name=sensor_name,
        dagster_instance=instance,
        dagster_run=instance.get_run_by_id(result.run_id),
        dagster_event=record.dagster_event,
    )


def test_a_blocking_check_failure_posts_run_failed(tmp_path, judge_server, webhook_receiver: Receiver, monkeypatch):  # noqa: F811
    monkeypatch.setenv("CTXPREC_ALERT_WEBHOOK", webhook_receiver.url(SECRET_PATH))
    webhook_receiver.statuses = [502, 200]
    with DagsterInstance.ephemeral() as instance:
        asset, result = _run(tmp_path, judge_server, instance, blocking=True, min_mean=0.99)
        assert not result.success
        run_failed, _ = build_alert_sensors([asset.key])
        assert run_failed.name == "ctxprec_run_failure_alert"
        context = _context(instance, result, run_failed.name, DagsterEventType.RUN_FAILURE).for_run_failure()
        assert run_failed(context) is None
    assert len(webhook_receiver.posts) == 2 and webhook_receiver.posts[-1]["path"] == SECRET_PATH  # 502 retried
    body = webhook_receiver.posts[-1]["json"]
    notice = body["ctxprec"]
    assert notice["source"] == "dagster" and notice["event"] == "run_failed" and notice["version"] == 1
    assert notice["partition_key"] == DAY and notice["metric"] == "contextual_precision"
    assert [(a["rule"], a["severity"]) for a in notice["alerts"]] == [("threshold", "error")]
    assert "below min_mean 0.990" in notice["alerts"][0]["message"]
    assert notice["details"]["run_id"] == result.run_id
    assert body["text"].startswith("[ctxprec] FAILED dagster run") and body["blocks"][0]["type"] == "header"
    assert "T0SECRETPATH" not in webhook_receiver.posts[-1]["raw"]


def test_a_failed_check_in_a_successful_run_posts_check_failed(
    tmp_path,
    judge_server,
    webhook_receiver: Receiver,  # noqa: F811
    monkeypatch,
):
    monkeypatch.setenv("CTXPREC_ALERT_WEBHOOK", webhook_receiver.url(SECRET_PATH))
    with DagsterInstance.ephemeral() as instance:
        asset, result = _run(tmp_path, judge_server, instance, blocking=False, min_mean=0.99)
        assert result.success
        _, check_failed = build_alert_sensors([asset.key])
        context = _context(instance, result, check_failed.name, DagsterEventType.RUN_SUCCESS)
        assert check_failed(context) is None
    (post,) = webhook_receiver.posts
    notice = post["json"]["ctxprec"]
    assert notice["event"] == "check_failed" and notice["partition_key"] == DAY
    assert [a["rule"] for a in notice["alerts"]] == ["threshold"]
    assert post["json"]["text"].startswith(f"[ctxprec] CHECK FAILED {DAY} contextual_precision: 1 check(s) (threshold)")


def test_a_clean_run_posts_nothing(tmp_path, judge_server, webhook_receiver: Receiver, monkeypatch):  # noqa: F811
    monkeypatch.setenv("CTXPREC_ALERT_WEBHOOK", webhook_receiver.url(SECRET_PATH))
    with DagsterInstance.ephemeral() as instance:
        asset, result = _run(tmp_path, judge_server, instance, blocking=False)
        assert result.success
        _, check_failed = build_alert_sensors([asset.key])
        context = _context(instance, result, check_failed.name, DagsterEventType.RUN_SUCCESS)
        assert isinstance(check_failed(context), SkipReason)
    assert webhook_receiver.posts == []


def test_checks_and_notices_name_the_segment_an_alert_carries(tmp_path, judge_server):
    """An alert with a ``segment`` (as ``check --by`` reports them) is named in the check's lines
    and in the webhook payload; an alert without one names none."""
    from dataclasses import replace

    from ctxprec_ops.dagster.checks import segment_lines
    from ctxprec_ops.monitoring import check_partition
    from ctxprec_ops.monitoring.notice import notice_from_check, webhook_payload

    url = f"sqlite:///{tmp_path / 'warehouse.db'}"
    with DagsterInstance.ephemeral() as instance:
        _run(tmp_path, judge_server, instance, blocking=False)
    result = check_partition(url, DAY, min_mean=0.99)
    (alert,) = result.alerts
    assert segment_lines(result, "threshold") == []
    segmented = replace(result, alerts=[replace(alert, segment="tenant=acme")])
    assert segment_lines(segmented, "threshold") == [f"segment tenant=acme: {alert.message}"]
    payload = webhook_payload(notice_from_check(segmented, source="dagster"))
    assert payload["ctxprec"]["alerts"][0]["segment"] == "tenant=acme"
    assert any("segment tenant=acme" in str(b) for b in payload["blocks"])
