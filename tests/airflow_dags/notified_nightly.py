"""A test DAG: the nightly DAG with notifiers on its alert task — the ctxprec webhook notifier and
the SMTP provider's ``SmtpNotifier``, whose subject and body are the notice the alert task left
in XCom (docs/airflow.md shows the same for Slack)."""

from airflow.providers.smtp.notifications.smtp import SmtpNotifier

from ctxprec_ops.airflow import CtxPrecWebhookNotifier, nightly_dag

NOTICE = "ti.xcom_pull(task_ids=ti.task_id, key='ctxprec_notice')"

dag = nightly_dag(
    "ctxprec_notified_nightly",
    alert_notifiers=[
        CtxPrecWebhookNotifier(retries=2, backoff=0.2),
        SmtpNotifier(
            to="oncall@example.com",
            from_email="ctxprec@example.com",
            smtp_conn_id="ctxprec_smtp",
            subject="{{ " + NOTICE + "['title'] }}",
            html_content="<pre>{{ " + NOTICE + "['summary'] }}</pre>",
        ),
    ],
)
