"""``Settings`` -> the alert sinks (``CTXPREC_ALERT_WEBHOOK``, ``CTXPREC_ALERT_EMAIL_TO``, the
``CTXPREC_SMTP_*`` settings): what ``ctxprec check`` delivers an alert to."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..monitoring.sinks import AlertSink, SmtpSettings
    from .settings import Settings

__all__ = ["alert_sinks", "smtp_settings"]


def smtp_settings(s: Settings, recipients: Sequence[str] | None = None) -> SmtpSettings | None:
    """How to send alert e-mail to ``recipients`` (default: ``CTXPREC_ALERT_EMAIL_TO``); None
    when there is nobody to send it to."""
    from ..monitoring.sinks import SmtpSettings

    to = list(recipients or s.alert_email_to)
    if not to:
        return None
    return SmtpSettings(
        host=s.smtp_host,
        recipients=to,
        sender=s.smtp_from,
        port=s.smtp_port,
        user=s.smtp_user,
        password=s.smtp_password,
        starttls=s.smtp_starttls,
        use_ssl=s.smtp_ssl,
    )


def alert_sinks(s: Settings, webhook: str | None = None, email_to: Sequence[str] | None = None) -> list[AlertSink]:
    """The log sink plus the webhook / e-mail sinks: ``webhook`` / ``email_to`` when given, else
    the configured ones."""
    from ..monitoring.sinks import alert_sinks as sinks

    return sinks(webhook or s.alert_webhook, smtp_settings(s, email_to))
