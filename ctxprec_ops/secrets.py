"""Keep secrets out of logs, tables, reports and exceptions.

``redact`` masks what looks like a credential (a URL's password, a bearer token, an OpenAI key) and
every value registered with ``register_secret``: the settings register theirs when they are read
(the API keys, the SMTP password, the alert webhook), a judge its key when its client is made.
"""

from __future__ import annotations

import re

__all__ = ["redact", "redact_url", "register_secret"]

_extra_secrets: set[str] = set()
# the password runs to the *last* "@" of the token, so one containing "/", ":" or an unencoded
# "@" is masked whole
_URL_PASSWORD = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.\-]*://)(?P<user>[^:/@\s]*):(?P<pw>\S+?)@(?!\S*@)")
# "user:password@host/db" typed without a scheme (an unparseable URL, echoed in its error)
_BARE_CREDENTIALS = re.compile(r"^(?P<user>[^:/@\s]+):(?P<pw>\S+?)@(?!\S*@)")
_BEARER = re.compile(r"(?i)(bearer\s+|api[_-]?key[\"']?\s*[:=]\s*[\"']?)([A-Za-z0-9_\-\.]{8,})")
_OPENAI_KEY = re.compile(r"sk-[A-Za-z0-9_\-]{8,}")


def register_secret(value: str | None) -> None:
    """Remember a secret value (API key, password) so ``redact`` removes it wherever it shows up."""
    if value and len(value) >= 4:
        _extra_secrets.add(value)


def redact_url(url: str) -> str:
    """``postgresql://u:pw@h/db`` -> ``postgresql://u:***@h/db`` (also ``u:pw@h/db``)."""
    url = _URL_PASSWORD.sub(lambda m: f"{m.group('scheme')}{m.group('user')}:***@", url)
    if "://" not in url:
        url = _BARE_CREDENTIALS.sub(lambda m: f"{m.group('user')}:***@", url)
    return url


def redact(text: str) -> str:
    """Remove every known secret and anything shaped like a credential from ``text``."""
    if not text:
        return text
    for secret in sorted(_extra_secrets, key=len, reverse=True):
        text = text.replace(secret, "***")
    text = redact_url(text)
    text = _OPENAI_KEY.sub("sk-***", text)
    text = _BEARER.sub(lambda m: m.group(1) + "***", text)
    return text
