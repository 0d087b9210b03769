"""``CtxPrecWebhookNotifier``: an Airflow notifier (``BaseNotifier``) that POSTs the ctxprec alert JSON.

Use it where Airflow takes notifiers — ``on_failure_callback`` of the DAG, of a task, or of the
``alert`` task only (``nightly_dag(alert_notifiers=[...])``) — or name it without editing a DAG file:
``CTXPREC_AIRFLOW_ON_FAILURE=ctxprec_ops.airflow.notifiers:CtxPrecWebhookNotifier``.

- **Where to**: the Airflow connection ``webhook_conn_id`` (default ``ctxprec_alert_webhook``):
  ``host`` is the full URL (``https://hooks.slack.com/services/...``), or ``schema`` + ``host`` +
  ``port`` + extra ``endpoint``; a ``password`` is sent as ``Authorization: Bearer …`` and extra
  ``headers`` are added. The URL and password are masked: they never reach a log or the message.
- **What**: the payload of ``ctxprec_ops.monitoring.notice`` — the same JSON the CLI's webhook sink
  and the Dagster alert sensors post. When the ``alert`` task failed on fired rules, the notice it
  left in XCom (``ctxprec_notice``: partition, metric, each alert); for any other failure, a
  ``task_failed`` notice naming the DAG, task, partition, try and the redacted error.
- **Retries**: a 5xx answer or a transport error is retried (``retries``, exponential backoff);
  a 4xx is not. A notifier never raises: a failed delivery is logged, it does not hide the alert.
"""

from __future__ import annotations

import asyncio
from typing import Any

from airflow.sdk import BaseNotifier

from ..monitoring.notice import AlertNotice, webhook_payload
from ..monitoring.sinks import DEFAULT_DELIVERY_DEADLINE, WebhookSink
from ..secrets import redact
from .callbacks import failure_message
from .hooks import mask, optional_connection

__all__ = ["CtxPrecWebhookNotifier", "DEFAULT_WEBHOOK_CONN_ID", "NOTICE_XCOM_KEY", "notice_for"]

DEFAULT_WEBHOOK_CONN_ID = "ctxprec_alert_webhook"
#: the XCom key under which the alert task leaves its notice (``AlertNotice.to_dict()``)
NOTICE_XCOM_KEY = "ctxprec_notice"


def _details(context: Any) -> dict[str, Any]:
    ti = context.get("ti") or context.get("task_instance")
    map_index = getattr(ti, "map_index", -1)
    return {
        "dag_id": getattr(ti, "dag_id", None) or getattr(context.get("dag"), "dag_id", None),
        "task_id": getattr(ti, "task_id", None),
        "map_index": map_index if isinstance(map_index, int) and map_index >= 0 else None,
        "run_id": context.get("run_id"),
        "try_number": getattr(ti, "try_number", None),
    }


def _stored_notice(context: Any) -> AlertNotice | None:
    """The notice the failed task left in XCom, if it is one of ours."""
    ti = context.get("ti") or context.get("task_instance")
    if ti is None or not hasattr(ti, "xcom_pull"):
        return None
    try:
        stored = ti.xcom_pull(task_ids=ti.task_id, key=NOTICE_XCOM_KEY)
    except Exception:  # no XCom access here (e.g. a DAG-level callback): build it from the context
        return None
    if isinstance(stored, list):  # a mapped pull: this instance's value
        stored = stored[0] if stored else None
    return AlertNotice.from_dict(stored) if isinstance(stored, dict) else None


def notice_for(context: Any) -> AlertNotice:
    """The notice of a failed task: its stored alert notice, else a ``task_failed`` one."""
    details = _details(context)
    stored = _stored_notice(context)
    if stored is not None and stored.event == "alert":
        return stored.with_details(source="airflow", **details)
    task = context.get("task")
    params = context.get("params") or {}
    partition = (params.get("partition_key") if hasattr(params, "get") else None) or context.get("ds")
    return AlertNotice(
        source="airflow",
        event="task_failed",
        title=redact(f"[ctxprec] FAILED {details['dag_id']}.{details['task_id']} {partition or ''}".rstrip()),
        summary=failure_message(context),
        partition_key=str(partition) if partition else None,
        metric=getattr(task, "metric", None),
        details={k: v for k, v in details.items() if v is not None},
    )


class CtxPrecWebhookNotifier(BaseNotifier):
    """POST the ctxprec alert JSON to the webhook of an Airflow connection (see the module doc)."""

    template_fields = ("webhook_conn_id",)

    def __init__(
        self,
        webhook_conn_id: str = DEFAULT_WEBHOOK_CONN_ID,
        *,
        timeout: float = 10.0,
        retries: int = 3,
        backoff: float = 1.0,
        deadline: float = DEFAULT_DELIVERY_DEADLINE,
    ) -> None:
        super().__init__()
        self.webhook_conn_id = webhook_conn_id
        self.timeout = timeout
        self.retries = retries
        self.backoff = backoff
        self.deadline = deadline

    def endpoint(self) -> tuple[str, dict[str, str]]:
        """The URL and headers from the connection (both masked from every log)."""
        conn = optional_connection(self.webhook_conn_id)
        if conn is None:
            raise ValueError(f"no Airflow connection {self.webhook_conn_id!r} for the ctxprec alert webhook")
        extra = conn.extra_dejson or {}
        host = conn.host or ""
        if "://" in host:
            url = host
        else:
            if not host:
                raise ValueError(f"connection {self.webhook_conn_id!r} has no host (the webhook URL)")
            port = f":{conn.port}" if conn.port else ""
            endpoint = str(extra.get("endpoint") or "").lstrip("/")
            url = f"{conn.schema or 'https'}://{host}{port}/{endpoint}"
        headers = {str(k): str(v) for k, v in dict(extra.get("headers") or {}).items()}
        if conn.password:
            mask(conn.password)
            headers["Authorization"] = f"Bearer {conn.password}"
        mask(url)
        return url, headers

    def notify(self, context: Any) -> None:
        try:
            url, headers = self.endpoint()
            sink = WebhookSink(
                url, timeout=self.timeout, retries=self.retries, backoff=self.backoff, deadline=self.deadline
            )
            notice = notice_for(context)
            attempts = sink.post(webhook_payload(notice), headers)
            self.log.info("ctxprec %s notice sent to the webhook (%d attempt(s))", notice.event, attempts)
        except Exception as exc:  # never mask the task's own failure
            self.log.error("ctxprec webhook notifier failed: %s", redact(f"{type(exc).__name__}: {exc}"))

    async def async_notify(self, context: Any) -> None:
        await asyncio.to_thread(self.notify, context)
