"""Alert delivery: python logging, a Slack-compatible webhook, e-mail over SMTP.

Every message is the result's ``summary()`` passed through ``redact``; webhook URLs (Slack
webhook URLs are credentials) and SMTP passwords are registered as secrets and never printed.
``deliver`` never raises: a broken sink is reported, it does not hide the alert.

Every delivery has an overall deadline (``deadline``, default ``DEFAULT_DELIVERY_DEADLINE`` = 5 s,
retries and their waits included): a receiver that trickles its answer a few bytes at a time, or
an SMTP server that stalls mid-conversation, never trips a per-read timeout, so the whole delivery
is cut when the deadline passes and reported as late (``DeliveryError``) — ``ctxprec check``, the
Airflow notifier and the Dagster alert sensors, which share these sinks, never hang on one.

The sinks are built from explicit values (``alert_sinks``); the faces take them from the
``CTXPREC_ALERT_*`` / ``CTXPREC_SMTP_*`` settings (``ctxprec_ops.config.Settings.alert_sinks``).
"""

from __future__ import annotations

import asyncio
import logging
import smtplib
import socket
import ssl
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from email.message import EmailMessage
from typing import Any, Protocol
from urllib.parse import urlsplit

import httpx

from .._async import run_sync
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
    "DEFAULT_DELIVERY_DEADLINE",
    "deliver",
    "alert_sinks",
    "slack_payload",
]

log = logging.getLogger("ctxprec.alerts")

#: seconds one delivery (all its attempts and waits) may take before it is cut and reported late
DEFAULT_DELIVERY_DEADLINE = 5.0


def _check_deadline(value: float) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"the delivery deadline must be a positive number of seconds, got {value!r}")
    return float(value)


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
    then twice that, ...; a 4xx answer is not (the request itself is wrong). ``timeout`` bounds
    each network operation, ``deadline`` the whole delivery (attempts and waits): past it the
    request is cut and the delivery reported late; a retry whose wait would pass it is not made."""

    url: str
    timeout: float = 10.0
    name: str = "webhook"
    retries: int = 2
    backoff: float = 0.5
    deadline: float = DEFAULT_DELIVERY_DEADLINE

    def __post_init__(self) -> None:
        if urlsplit(self.url).scheme not in ("http", "https"):
            raise ValueError("the alert webhook must be an http(s) URL")
        register_secret(self.url)  # the URL path is the credential of most webhooks
        self.deadline = _check_deadline(self.deadline)

    def send(self, result: CheckResult) -> None:
        self.post(slack_payload(result))

    def post(self, payload: Mapping[str, Any], headers: Mapping[str, str] | None = None) -> int:
        """POST ``payload`` as JSON; returns the number of attempts it took, raises ``DeliveryError``
        (also when the deadline passed). Blocks at most ``deadline`` seconds, also inside a running
        event loop (it then runs on a worker thread)."""
        return run_sync(lambda: self._post(dict(payload), dict(headers or {})))

    async def _post(self, payload: dict[str, Any], headers: dict[str, str]) -> int:
        where = _host_only(self.url)
        loop = asyncio.get_running_loop()
        end = loop.time() + self.deadline
        problem = ""
        async with httpx.AsyncClient(timeout=self.timeout) as client:
            for attempt in range(1, max(self.retries, 0) + 2):
                if attempt > 1:
                    wait = self.backoff * 2 ** (attempt - 2)
                    if loop.time() + wait >= end:
                        problem += f" (no time left for attempt {attempt} within the {self.deadline:g} s deadline)"
                        break
                    await asyncio.sleep(wait)
                try:
                    async with asyncio.timeout(max(end - loop.time(), 0.0)):
                        resp = await client.post(self.url, json=payload, headers=headers)
                except TimeoutError:
                    raise DeliveryError(
                        f"webhook POST to {where} timed out: no complete answer within the "
                        f"{self.deadline:g} s delivery deadline (attempt {attempt})"
                    ) from None
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
    #: seconds the whole exchange (connect to QUIT) may take before it is cut and reported late
    deadline: float = DEFAULT_DELIVERY_DEADLINE

    def __post_init__(self) -> None:
        if not self.host:
            raise ValueError("SMTP host is required for e-mail alerts")
        if not self.recipients:
            raise ValueError("at least one e-mail recipient is required")
        if isinstance(self.starttls, bool):
            self.starttls = "true" if self.starttls else "false"
        if self.starttls not in ("auto", "true", "false"):
            raise ValueError(f"starttls must be auto, true or false, got {self.starttls!r}")
        self.deadline = _check_deadline(self.deadline)
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
        """One SMTP exchange, cut when ``settings.deadline`` passes: a watchdog shuts the socket
        down, which ends any read or write smtplib is blocked in (its timeout is per operation)."""
        s = self.settings
        where = f"{s.host}:{s.port}"
        per_op = min(s.timeout, s.deadline)
        client: smtplib.SMTP = (
            smtplib.SMTP_SSL(timeout=per_op, context=ssl.create_default_context())
            if s.use_ssl
            else smtplib.SMTP(timeout=per_op)
        )
        late = threading.Event()

        def cut() -> None:
            late.set()
            sock = getattr(client, "sock", None)
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

        watchdog = threading.Timer(s.deadline, cut)
        watchdog.daemon = True
        watchdog.start()
        try:
            client.connect(s.host, s.port)
            with client:
                client.ehlo()
                if not s.use_ssl and (s.starttls == "true" or (s.starttls == "auto" and client.has_extn("starttls"))):
                    client.starttls(context=ssl.create_default_context())
                    client.ehlo()
                if s.user:
                    client.login(s.user, s.password or "")
                client.send_message(self.message(result))
        except (smtplib.SMTPException, OSError) as exc:
            if late.is_set():
                raise DeliveryError(
                    f"e-mail via {where} timed out: the SMTP exchange did not finish within the "
                    f"{s.deadline:g} s delivery deadline"
                ) from None
            raise DeliveryError(redact(f"e-mail via {where} failed: {type(exc).__name__}: {exc}")) from None
        finally:
            watchdog.cancel()
            client.close()


def alert_sinks(
    webhook: str | None = None, smtp: SmtpSettings | None = None, *, deadline: float = DEFAULT_DELIVERY_DEADLINE
) -> list[AlertSink]:
    """The log sink, plus a webhook sink posting to ``webhook`` and an e-mail sink sending with
    ``smtp``, when given; each webhook delivery is cut after ``deadline`` seconds (``smtp``
    carries its own)."""
    sinks: list[AlertSink] = [LogSink()]
    if webhook:
        sinks.append(WebhookSink(webhook, deadline=deadline))
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
