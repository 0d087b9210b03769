"""Keep secrets out of logs, tables, reports and exceptions.

``redact`` masks what looks like a credential (a URL's password, a bearer token, an OpenAI key) and
every value registered with ``register_secret``: the settings register theirs when they are read
(the API keys, the SMTP password, the alert webhook), a judge its key when its client is made.
"""

from __future__ import annotations

import re
from collections.abc import Container, Iterable, Iterator
from typing import Any

__all__ = ["redact", "redact_url", "register_secret", "redacted_fields"]

_extra_secrets: set[str] = set()
# the password runs to the *last* "@" of the token, so one containing "/", ":" or an unencoded
# "@" is masked whole
_URL_PASSWORD = re.compile(r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.\-]*://)(?P<user>[^:/@\s]*):(?P<pw>\S+?)@(?!\S*@)")
# "user:password@host/db" typed without a scheme (an unparseable URL, echoed in its error)
_BARE_CREDENTIALS = re.compile(r"^(?P<user>[^:/@\s]+):(?P<pw>\S+?)@(?!\S*@)")
_BEARER = re.compile(r"(?i)(bearer\s+|api[_-]?key[\"']?\s*[:=]\s*[\"']?)([A-Za-z0-9_\-\.]{8,})")
# a password with a blank in it (typed unencoded in a URL that then does not parse): up to the "@",
# without a "/" (a path is no password)
_URL_PASSWORD_BLANK = re.compile(
    r"(?P<scheme>[a-zA-Z][a-zA-Z0-9+.\-]*://)(?P<user>[^:/@\s]*):(?P<pw>[^/@\n]*\s[^/@\n]*)@"
)
# a credential in a URL's query string (a driver's ?password=, Azure's ?subscription-key= and
# ?code=, a signed URL's ?sig=): the value of any parameter whose name says it is one
_QUERY_SECRET = re.compile(
    r"(?i)(?P<name>[?&;](?:[\w.\-]*(?:pass|pwd|secret|token|key|sig|auth|credential|code)[\w.\-]*)=)(?P<value>[^&#\s\"'<>]+)"
)
_OPENAI_KEY = re.compile(r"sk-[A-Za-z0-9_\-]{8,}")


def register_secret(value: str | None) -> None:
    """Remember a secret value (API key, password) so ``redact`` removes it wherever it shows up."""
    if value and len(value) >= 4:
        _extra_secrets.add(value)


def redact_url(url: str) -> str:
    """``postgresql://u:pw@h/db`` -> ``postgresql://u:***@h/db`` (also ``u:pw@h/db``, a password
    with a blank, and the value of a query parameter named like a credential: ``?password=***``,
    ``?subscription-key=***``)."""
    url = _URL_PASSWORD.sub(lambda m: f"{m.group('scheme')}{m.group('user')}:***@", url)
    url = _URL_PASSWORD_BLANK.sub(lambda m: f"{m.group('scheme')}{m.group('user')}:***@", url)
    if "://" not in url:
        url = _BARE_CREDENTIALS.sub(lambda m: f"{m.group('user')}:***@", url)
    return _QUERY_SECRET.sub(lambda m: m.group("name") + "***", url)


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


def redacted_fields(
    fields: Iterable[tuple[str | None, Any]], secret: Container[str] = ()
) -> Iterator[tuple[str | None, Any]]:
    """``(name, value)`` pairs as a ``repr`` shows them (pydantic's ``__repr_args__``): the values
    of the ``secret`` fields masked whole, every text redacted. A configuration object reaches
    logs whole (an orchestrator's, a traceback's locals) with its URLs and keys."""
    for name, value in fields:
        if name in secret and value:
            yield name, "***"
        elif isinstance(value, str):
            yield name, redact(value)
        else:
            yield name, value
