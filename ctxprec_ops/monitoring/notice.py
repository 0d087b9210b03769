"""One alert message for every channel: the CLI's webhook sink, the Airflow notifier and the Dagster
alert sensors all post the JSON built here, so one receiver handles them all.

The payload is Slack-compatible (``text`` plus ``blocks``, which Slack, Mattermost and Teams
workflows render) and carries the same facts machine-readable under ``ctxprec``::

    {"text": "...", "blocks": [...],
     "ctxprec": {"version": 1, "source": "airflow", "event": "alert", "title": "...",
                 "partition_key": "2026-11-28", "metric": "contextual_precision",
                 "alerts": [{"rule": ..., "severity": ..., "message": ..., ...}],
                 "details": {"dag_id": ..., "run_id": ...}, "summary": "..."}}

``event``: ``alert`` (monitoring rules fired), ``task_failed`` / ``run_failed`` (the orchestrator's
run failed for another reason) or ``check_failed`` (a Dagster asset check failed). Every text goes
through ``redact``: a message never carries a key, a password or a webhook URL.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import TYPE_CHECKING, Any

from ..secrets import redact

if TYPE_CHECKING:
    from .check import CheckResult

__all__ = ["PAYLOAD_VERSION", "AlertNotice", "notice_from_check", "subject", "webhook_payload"]

PAYLOAD_VERSION = 1
_SCALARS = (str, int, float, bool, type(None))


def subject(result: CheckResult) -> str:
    """``[ctxprec] ALERT <partition> <metric>: N alert(s) (rules)`` or ``[ctxprec] OK ...``."""
    if result.fired:
        rules = ", ".join(sorted({a.rule for a in result.alerts}))
        return redact(
            f"[ctxprec] ALERT {result.partition_key} {result.metric}: {len(result.alerts)} alert(s) ({rules})"
        )
    return redact(f"[ctxprec] OK {result.partition_key} {result.metric}")


def _clean(value: Any) -> Any:
    if isinstance(value, str):
        return redact(value)
    if isinstance(value, Mapping):
        return {str(k): _clean(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_clean(v) for v in value]
    return value if isinstance(value, _SCALARS) else redact(str(value))


@dataclass(frozen=True)
class AlertNotice:
    """What happened, where, and the text to show — independent of the channel."""

    source: str  # cli | airflow | dagster
    event: str  # alert | task_failed | run_failed | check_failed
    title: str
    summary: str = ""
    headline: str = ""
    partition_key: str | None = None
    metric: str | None = None
    #: one object per fired rule (``Alert.to_dict()``: rule, severity, message, value, limit, kind,
    #: and ``segment`` where the alert names one)
    alerts: list[dict[str, Any]] = field(default_factory=list)
    #: where it happened: DAG/task/run ids, Dagster run id, asset, check name ... (scalars only)
    details: dict[str, Any] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-safe and redacted (what an XCom or a payload carries)."""
        return {"version": PAYLOAD_VERSION, **_clean(asdict(self))}

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> AlertNotice:
        names = {f for f in cls.__dataclass_fields__}
        return cls(**{k: v for k, v in d.items() if k in names})

    def with_details(self, source: str | None = None, **details: Any) -> AlertNotice:
        """A copy with more ``details`` (None values dropped), and another ``source``."""
        merged = {**self.details, **{k: v for k, v in details.items() if v is not None}}
        return AlertNotice(**{**asdict(self), "details": merged, "source": source or self.source})


def notice_from_check(result: CheckResult, *, source: str = "cli", **details: Any) -> AlertNotice:
    """The notice of a partition check (``event="alert"`` when rules fired)."""
    return AlertNotice(
        source=source,
        event="alert" if result.fired else "ok",
        title=subject(result),
        summary=result.summary(),
        headline=redact(result.headline()),
        partition_key=result.partition_key,
        metric=result.metric,
        alerts=[a.to_dict() for a in result.alerts],
        details={k: v for k, v in details.items() if v is not None},
    )


def _alert_line(a: Mapping[str, Any]) -> str:
    icon = ":red_circle:" if a.get("severity") == "error" else ":warning:"
    where = f" segment {a['segment']}" if a.get("segment") not in (None, "") else ""
    return f"{icon} `{a.get('rule')}`{where} {a.get('message')}"


def webhook_payload(notice: AlertNotice) -> dict[str, Any]:
    """The JSON every ctxprec webhook POST sends (see the module docstring)."""
    title = redact(notice.title)
    body = redact(notice.summary)
    text = f"{title}\n{body}" if body else title
    blocks: list[dict[str, Any]] = [{"type": "header", "text": {"type": "plain_text", "text": title[:150]}}]
    if notice.headline:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": f"*{redact(notice.headline)}*"[:3000]}})
    for a in notice.alerts[:20]:
        blocks.append({"type": "section", "text": {"type": "mrkdwn", "text": redact(_alert_line(a))[:3000]}})
    if notice.details:
        facts = ", ".join(f"{k}={v}" for k, v in notice.details.items())
        blocks.append({"type": "context", "elements": [{"type": "mrkdwn", "text": redact(facts)[:3000]}]})
    return {"text": text, "blocks": blocks, "ctxprec": notice.to_dict()}
