"""Alert delivery: python logging, a Slack-compatible webhook, e-mail over SMTP.

Every message is the result's ``summary()`` passed through ``redact``; webhook URLs (Slack
webhook URLs are credentials) and SMTP passwords are registered as secrets and never printed.
``deliver`` never raises: a broken sink is reported, it does not hide the alert.

The sinks are built from explicit values (``alert_sinks``); the faces take them from the
``CTXPREC_ALERT_*`` / ``CTXPREC_SMTP_*`` settings (``ctxprec_ops.config.Settings.alert_sinks``).
"""

from __future__ import annotations

import logging
import smtplib
import ssl
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx

from ..secrets import redact, register_secret
from .check import CheckResult
from .notice import notice_from_check, subject, webhook_payload

__all__ = [
    "AlertSink",
    "LogSink",
    "WebhookSink",
    "SmtpSettings",
    "EmailSink",
    "DeliveryError",
    "deliver",
    "alert_sinks",
    "slack_payload",
    "subject",
]

log = logging.getLogger("ctxprec.alerts")


class DeliveryError(RuntimeError):
    """A sink could not deliver (message already redacted)."""


class AlertSink(Protocol):
    name: str

    def send(self, result: CheckResult) -> None: ...


@dataclass
class LogSink:
    """Log the summary: ERROR for threshold breaches, WARNING for other alerts, INFO when clean."""

    logger: logging.Logger = field(default_factory=lambda: log)
    name: str = "log"

    def send(self, result: CheckResult) -> None:
        level = logging.ERROR if result.errors else logging.WARNING if result.fired else logging.INFO
        self.logger.log(level, "%s\n%s", subject(result), result.summary())


def slack_payload(result: CheckResult) -> dict:
    """``{"text": ..., "blocks": [...], "ctxprec": {...}}``: plain text for any Slack-compatible
    receiver, blocks, and the machine-readable notice (``monitoring.notice``, shared with the
    Airflow notifier and the Dagster alert sensors)."""
    return webhook_payload(notice_from_check(result))


def _host_only(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or '?'}" + (f":{parts.port}" if parts.port else "")


@dataclass
class WebhookSink:
    """POST Slack-compatible JSON to ``url`` (Slack, Mattermost, Teams workflows, any receiver).

    A 5xx answer or a transport error is retried ``retries`` times, waiting ``backoff`` seconds,
    then twice that, ...; a 4xx answer is not (the request itself is wrong)."""

    url: str
    timeout: float = 10.0
    name: str = "webhook"
    retries: int = 2
    backoff: float = 0.5

    def __post_init__(self) -> None:
        if urlsplit(self.url).scheme not in ("http", "https"):
            raise ValueError("the alert webhook must be an http(s) URL")
        register_secret(self.url)  # the URL path is the credential of most webhooks

    def send(self, result: CheckResult) -> None:
        self.post(slack_payload(result))

    def post(self, payload: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> int:
        """POST ``payload`` as JSON; returns the number of attempts it took, raises ``DeliveryError``."""
        where = _host_only(self.url)
        problem = ""
        for attempt in range(1, max(self.retries, 0) + 2):
            if attempt > 1:
                time.sleep(self.backoff * 2 ** (attempt - 2))
            try:
                resp = httpx.post(self.url, json=dict(payload), headers=dict(headers or {}), timeout=self.timeout)
            except httpx.HTTPError as exc:
                problem = redact(f"webhook POST to {where} failed: {type(exc).__name__}")
                continue
            if resp.status_code < 300:
                return attempt
            problem = f"webhook POST to {where} failed: HTTP {resp.status_code}"
            if resp.status_code < 500:
                break
        raise DeliveryError(problem)


@dataclass
class SmtpSettings:
    """Where and how to send alert e-mail. ``starttls``: ``auto`` (if offered), ``true``, ``false``."""

    host: str
    recipients: Sequence[str]
    sender: str = "ctxprec@localhost"
    port: int = 587
    user: str | None = None
    password: str | None = field(default=None, repr=False)
    starttls: str = "auto"
    use_ssl: bool = False
    timeout: float = 10.0

    def __post_init__(self) -> None:
        if not self.host:
            raise ValueError("SMTP host is required for e-mail alerts")
        if not self.recipients:
            raise ValueError("at least one e-mail recipient is required")
        if isinstance(self.starttls, bool):
            self.starttls = "true" if self.starttls else "false"
        if self.starttls not in ("auto", "true", "false"):
            raise ValueError(f"starttls must be auto, true or false, got {self.starttls!r}")
        register_secret(self.password)


@dataclass
class EmailSink:
    """Send the summary as a plain-text e-mail."""

    settings: SmtpSettings
    name: str = "email"

    def message(self, result: CheckResult) -> EmailMessage:
        msg = EmailMessage()
        msg["Subject"] = subject(result)
        msg["From"] = self.settings.sender
        msg["To"] = ", ".join(self.settings.recipients)
        msg.set_content(result.summary() + "\n")
        return msg

    def send(self, result: CheckResult) -> None:
        s = self.settings
        where = f"{s.host}:{s.port}"
        try:
            if s.use_ssl:
                client: smtplib.SMTP = smtplib.SMTP_SSL(
                    s.host, s.port, timeout=s.timeout, context=ssl.create_default_context()
                )
            else:
                client = smtplib.SMTP(s.host, s.port, timeout=s.timeout)
            with client:
                client.ehlo()
                if not s.use_ssl and (s.starttls == "true" or (s.starttls == "auto" and client.has_extn("starttls"))):
                    client.starttls(context=ssl.create_default_context())
                    client.ehlo()
                if s.user:
                    client.login(s.user, s.password or "")
                client.send_message(self.message(result))
        except (smtplib.SMTPException, OSError) as exc:
            raise DeliveryError(redact(f"e-mail via {where} failed: {type(exc).__name__}: {exc}")) from None


def alert_sinks(webhook: str | None = None, smtp: SmtpSettings | None = None) -> list[AlertSink]:
    """The log sink, plus a webhook sink posting to ``webhook`` and an e-mail sink sending with
    ``smtp``, when given."""
    sinks: list[AlertSink] = [LogSink()]
    if webhook:
        sinks.append(WebhookSink(webhook))
    if smtp is not None:
        sinks.append(EmailSink(smtp))
    return sinks


def deliver(result: CheckResult, sinks: Sequence[AlertSink], *, only_when_fired: bool = True) -> list[str]:
    """Send ``result`` to every sink; return the (redacted) errors of the sinks that failed."""
    if only_when_fired and not result.fired:
        return []
    errors = []
    for sink in sinks:
        try:
            sink.send(result)
        except Exception as exc:  # one broken sink must not stop the others
            msg = (
                str(exc) if isinstance(exc, DeliveryError) else f"{sink.name} sink failed: {type(exc).__name__}: {exc}"
            )
            errors.append(redact(msg))
            log.error("alert delivery failed: %s", redact(msg))
    return errors
