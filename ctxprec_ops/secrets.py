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
_OPENAI_KEY = re.compile(r"sk-(?P<key>[A-Za-z0-9_\-]{8,})")

#: what a URL shows of a credential: (pattern, the group masked)
_URL_PARTS = ((_URL_PASSWORD, "pw"), (_URL_PASSWORD_BLANK, "pw"), (_QUERY_SECRET, "value"))


def register_secret(value: str | None) -> None:
    """Remember a secret value (API key, password) so ``redact`` removes it wherever it shows up."""
    if value and len(value) >= 4:
        _extra_secrets.add(value)


def _spans(text: str, patterns: tuple[tuple[re.Pattern[str], str | int], ...]) -> list[tuple[int, int]]:
    spans = []
    for pattern, group in patterns:
        for m in pattern.finditer(text):
            if m.end(group) > m.start(group):
                spans.append(m.span(group))
    if "://" not in text:
        spans += [m.span("pw") for m in _BARE_CREDENTIALS.finditer(text)]
    return spans


def _masked(text: str, spans: list[tuple[int, int]]) -> str:
    """``text`` with each of ``spans`` (merged where they overlap or touch) as ``***``."""
    if not spans:
        return text
    out, at = [], 0
    for start, end in sorted(spans):
        if start < at:  # overlaps the span just masked: extend it
            at = max(at, end)
            continue
        out += [text[at:start], "***"]
        at = end
    out.append(text[at:])
    return "".join(out)


def redact_url(url: str) -> str:
    """``postgresql://u:pw@h/db`` -> ``postgresql://u:***@h/db`` (also ``u:pw@h/db``, a password
    with a blank, and the value of a query parameter named like a credential: ``?password=***``,
    ``?subscription-key=***``)."""
    return _masked(url, _spans(url, _URL_PARTS))


def redact(text: str) -> str:
    """Remove every known secret and anything shaped like a credential from ``text``. What to mask
    is found in the text as given, every pattern and every registered secret, and masked at once: a
    short registered secret inside a parameter's name ("pass" in "sslpassword") would otherwise
    hide the name from the query pattern, and a pattern masking part of a registered secret (up to
    an "&") would leave the rest unmatched."""
    if not text:
        return text
    spans = _spans(text, (*_URL_PARTS, (_OPENAI_KEY, "key"), (_BEARER, 2)))
    for secret in _extra_secrets:
        start = text.find(secret)
        while start != -1:
            spans.append((start, start + len(secret)))
            start = text.find(secret, start + 1)
    return _masked(text, spans)


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
