"""Alerts that reach people, through Airflow's notifier interface, for real: the nightly DAG under
``dag.test()`` fails its alert task; ``CtxPrecWebhookNotifier`` POSTs the ctxprec JSON to a local
HTTP receiver (retrying a 5xx, not a 4xx), and the SMTP provider's ``SmtpNotifier`` on the same
alert task sends the notice to a local SMTP server."""

from __future__ import annotations

import json
from email import message_from_bytes
from pathlib import Path

from tests.fixtures.airflow_env import AirflowEnv
from tests.helpers.webhook_receiver import Receiver, webhook_receiver  # noqa: F401 (fixture)
from tests.test_airflow_dags import DAG_ID, DAY, GOOD, JUDGE_KEY, assert_no_secrets, seed_day, sqlite_env
from tests.test_monitoring_sinks import smtp_server  # noqa: F401 (fixture)

TOKEN = "hook-t0ken-9f8e7d6c"
NOTIFIER = "ctxprec_ops.airflow.notifiers:CtxPrecWebhookNotifier"


def webhook_conn(receiver: Receiver) -> str:
    return json.dumps({"conn_type": "http", "host": receiver.url(), "password": TOKEN})


def _leaks(text: str) -> bool:
    return TOKEN in text or "T0SECRETPATH" in text or JUDGE_KEY in text


def test_a_fired_alert_is_posted_to_the_webhook_and_a_5xx_is_retried(
    airflow_env: AirflowEnv,
    tmp_path: Path,
    judge_server,
    webhook_receiver: Receiver,  # noqa: F811
) -> None:
    db = tmp_path / "warehouse.db"
    seed_day(f"sqlite:///{db}", DAY, 8, GOOD)
    webhook_receiver.statuses = [503, 200]
    env = sqlite_env(
        db,
        judge_server,
        CTXPREC_AIRFLOW_ON_FAILURE=NOTIFIER,
        AIRFLOW_CONN_CTXPREC_ALERT_WEBHOOK=webhook_conn(webhook_receiver),
    )
    result = airflow_env.dag_test(DAG_ID, f"{DAY}T00:00:00", conf={"min_mean": 0.99}, env=env)
    assert result.state == "failed" and result.state_of("alert") == "failed"
    assert result.state_of("aggregate") == "success"  # the scores are written; only the alert failed

    assert len(webhook_receiver.posts) == 2, result.output[-3000:]  # the 503, then the retry
    post = webhook_receiver.posts[-1]
    assert post["path"] == "/hooks/T0SECRETPATH" and post["headers"]["Authorization"] == f"Bearer {TOKEN}"
    body = post["json"]
    notice = body["ctxprec"]
    assert notice["source"] == "airflow" and notice["event"] == "alert" and notice["version"] == 1
    assert notice["partition_key"] == DAY and notice["metric"] == "contextual_precision"
    assert [a["rule"] for a in notice["alerts"]] == ["min_mean"] and notice["alerts"][0]["severity"] == "error"
    assert notice["details"]["dag_id"] == DAG_ID and notice["details"]["task_id"] == "alert"
    assert body["text"].startswith(f"[ctxprec] ALERT {DAY} contextual_precision: 1 alert(s) (min_mean)")
    assert body["blocks"][0]["type"] == "header" and any("`min_mean`" in str(b) for b in body["blocks"])
    assert not _leaks(post["raw"])
    assert "ctxprec alert notice sent to the webhook (2 attempt(s))" in result.output
    assert_no_secrets(result, TOKEN, "T0SECRETPATH", JUDGE_KEY)


def test_other_failures_are_posted_as_task_failed_and_a_4xx_is_not_retried(
    airflow_env: AirflowEnv,
    tmp_path: Path,
    judge_server,
    webhook_receiver: Receiver,  # noqa: F811
) -> None:
    db = tmp_path / "warehouse.db"  # no retrieval_logs table: plan_chunks fails (not retried)
    webhook_receiver.statuses = [404]
    env = sqlite_env(
        db,
        judge_server,
        CTXPREC_AIRFLOW_ON_FAILURE=NOTIFIER,
        AIRFLOW_CONN_CTXPREC_ALERT_WEBHOOK=webhook_conn(webhook_receiver),
    )
    result = airflow_env.dag_test(DAG_ID, f"{DAY}T00:00:00", env=env)
    assert result.state == "failed" and result.state_of("plan_chunks") == "failed"
    (post,) = webhook_receiver.posts  # 404: the request is wrong, no retry
    notice = post["json"]["ctxprec"]
    assert notice["event"] == "task_failed" and notice["details"]["task_id"] == "plan_chunks"
    assert (
        notice["partition_key"] == DAY and "ctxprec task failed: dag=contextual_precision_nightly" in notice["summary"]
    )
    assert "webhook POST to http://127.0.0.1" in result.output and "HTTP 404" in result.output
    assert not _leaks(post["raw"])
    assert_no_secrets(result, TOKEN, "T0SECRETPATH")


def test_notifiers_on_the_alert_task_webhook_and_the_smtp_providers(
    airflow_dags_env: AirflowEnv,
    tmp_path: Path,
    judge_server,
    webhook_receiver: Receiver,  # noqa: F811
    smtp_server,  # noqa: F811
) -> None:
    db = tmp_path / "warehouse.db"
    seed_day(f"sqlite:///{db}", DAY, 6, GOOD)
    smtp_conn = {
        "conn_type": "smtp",
        "host": "127.0.0.1",
        "port": smtp_server.server_address[1],
        "extra": {"disable_tls": True, "disable_ssl": True, "retry_limit": 0},
    }
    env = sqlite_env(
        db,
        judge_server,
        AIRFLOW_CONN_CTXPREC_ALERT_WEBHOOK=webhook_conn(webhook_receiver),
        AIRFLOW_CONN_CTXPREC_SMTP=json.dumps(smtp_conn),
    )
    result = airflow_dags_env.dag_test("ctxprec_notified_nightly", f"{DAY}T00:00:00", conf={"min_mean": 0.99}, env=env)
    assert result.state == "failed" and result.state_of("alert") == "failed"
    (post,) = webhook_receiver.posts
    assert post["json"]["ctxprec"]["event"] == "alert"
    (mail,) = smtp_server.messages
    assert mail["to"] == ["<oncall@example.com>"]
    message = message_from_bytes(mail["data"])
    assert message["Subject"].startswith(f"[ctxprec] ALERT {DAY} contextual_precision: 1 alert(s)")
    html = next(p for p in message.walk() if p.get_content_type() == "text/html").get_payload(decode=True).decode()
    assert "below min_mean 0.990" in html and JUDGE_KEY not in html
