"""Arize Phoenix as a source of retriever spans (its REST API, read in pages).

``load_phoenix_day`` reads the project's RETRIEVER, RERANKER and LLM spans that started on the UTC
day (``GET /v1/projects/{project}/spans``, ``start_time``/``end_time``, ``span_kind``, in pages
of ``next_cursor``) and stores them in a spans table of the warehouse (``span_store``): the run
path then scores them as any OpenInference spans table — the same planning, chunks, claims,
ledger and retries, and a re-run of the day reads Phoenix again and adds only the spans it did
not have. Phoenix returns a span's kind as a field, not as an attribute: it is put back as
``openinference.span.kind`` so the OpenInference convention reads it.

The staging table is named after the project (``phoenix_<project>``), so the project is part of
every score's key (``source_table``) and two projects never share scores.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from sqlalchemy.engine import Engine

from ..errors import CtxPrecError
from ..secrets import redact, redact_url, register_secret
from ..warehouse.source import Partition
from .span_store import SpanLoad, store_span_rows

__all__ = [
    "PhoenixTarget",
    "PhoenixError",
    "DEFAULT_PROJECT",
    "DEFAULT_DOCUMENT_ANNOTATION",
    "DEFAULT_SPAN_ANNOTATION",
    "staging_table",
    "iter_phoenix_spans",
    "load_phoenix_day",
]

DEFAULT_PROJECT = "default"
#: the annotation names written back (Phoenix computes nDCG, precision, MRR and hit rate from
#: document annotations whose annotator kind is ``LLM``)
DEFAULT_DOCUMENT_ANNOTATION = "ctxprec_relevance"
DEFAULT_SPAN_ANNOTATION = "contextual_precision"
#: the span kinds a run needs: the cases (retriever, reranker) and the answers (LLM)
KINDS = ("RETRIEVER", "RERANKER", "LLM")
#: spans per page (the API's maximum is 1000)
PAGE = 500


class PhoenixError(CtxPrecError):
    """Phoenix could not be read (unreachable, refused, unknown project)."""

    error_type = "phoenix"
    retryable = True


@dataclass(frozen=True)
class PhoenixTarget:
    """A Phoenix server and project: where spans are read from and verdicts written back to."""

    url: str
    project: str = DEFAULT_PROJECT
    api_key: str | None = field(default=None, repr=False)
    timeout: float = 30.0
    document_annotation: str = DEFAULT_DOCUMENT_ANNOTATION
    span_annotation: str = DEFAULT_SPAN_ANNOTATION

    def __post_init__(self) -> None:
        if not re.match(r"^https?://", self.url or ""):
            raise ValueError(f"the Phoenix URL must start with http:// or https://, got {redact(self.url)!r}")
        if not (self.project or "").strip():
            raise ValueError("the Phoenix project name is empty")
        for name in (self.document_annotation, self.span_annotation):
            if not (name or "").strip():
                raise ValueError("a Phoenix annotation name is empty")
        register_secret(self.api_key)

    @property
    def staging_table(self) -> str:
        return staging_table(self.project)

    @property
    def name(self) -> str:
        """``phoenix:<url>/<project>``: where write-backs go (the key of ``ctxprec_writebacks``)."""
        return f"phoenix:{self.url.rstrip('/')}/{self.project}"

    def client(self) -> Any:
        import httpx

        headers = {"Authorization": f"Bearer {self.api_key}"} if self.api_key else {}
        return httpx.Client(base_url=self.url.rstrip("/"), headers=headers, timeout=self.timeout)


def staging_table(project: str) -> str:
    """The spans table a Phoenix project's spans are loaded into: ``phoenix_<project>`` in lower
    case letters, digits and underscores (a digest is added when the name had to change, so
    ``rag-app`` and ``rag_app`` stay apart)."""
    slug = re.sub(r"[^a-z0-9_]", "_", project.lower()).strip("_") or "project"
    if slug != project:
        slug = f"{slug[:40]}_{hashlib.sha256(project.encode()).hexdigest()[:6]}"
    return f"phoenix_{slug[:50]}"


def _instant(text: Any) -> datetime | None:
    if not isinstance(text, str):
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if value.tzinfo is not None:
        value = value.astimezone(UTC).replace(tzinfo=None)
    return value


def _row(span: dict[str, Any]) -> dict[str, Any]:
    """A Phoenix span (REST shape) as a spans-table row."""
    context = span.get("context") or {}
    attrs = dict(span.get("attributes") or {})
    kind = span.get("span_kind")
    if isinstance(kind, str) and "openinference.span.kind" not in attrs:
        attrs["openinference.span.kind"] = kind
    return {
        "trace_id": context.get("trace_id"),
        "span_id": context.get("span_id"),
        "parent_id": span.get("parent_id"),
        "name": span.get("name"),
        "start_time": _instant(span.get("start_time")),
        "attributes": json.dumps(attrs, ensure_ascii=False),
    }


def _get(client: Any, path: str, params: dict[str, Any], target: PhoenixTarget) -> dict[str, Any]:
    import httpx

    try:
        response = client.get(path, params=params)
    except httpx.HTTPError as exc:
        raise PhoenixError(
            f"Phoenix at {redact_url(target.url)} did not answer: {type(exc).__name__}: {redact(str(exc))}"
        ) from None
    if response.status_code == 404:
        raise PhoenixError(f"Phoenix at {redact_url(target.url)} has no project {target.project!r}")
    if response.status_code in (401, 403):
        error = PhoenixError(f"Phoenix at {redact_url(target.url)} refused the API key (HTTP {response.status_code})")
        error.retryable = False
        raise error
    if response.status_code >= 400:
        raise PhoenixError(
            f"Phoenix at {redact_url(target.url)} answered HTTP {response.status_code}: {redact(response.text)[:200]}"
        )
    body: dict[str, Any] = response.json()
    return body


def iter_phoenix_spans(target: PhoenixTarget, start: datetime, end: datetime) -> Iterator[dict[str, Any]]:
    """The project's case and answer spans that started in ``[start, end)``, as spans-table rows,
    read one page at a time (memory: one page)."""
    path = f"/v1/projects/{quote(target.project, safe='')}/spans"
    params: dict[str, Any] = {
        "limit": PAGE,
        "start_time": start.isoformat(),
        "end_time": end.isoformat(),
        "span_kind": list(KINDS),
    }
    with target.client() as client:
        while True:
            body = _get(client, path, params, target)
            for span in body.get("data") or []:
                yield _row(span)
            cursor = body.get("next_cursor")
            if not cursor:
                return
            params["cursor"] = cursor


def load_phoenix_day(
    engine: Engine, target: PhoenixTarget, partition: Partition, *, table: str | None = None, schema: str | None = None
) -> SpanLoad:
    """Load the spans of the UTC day ``partition`` into the staging table (idempotent)."""
    rows = iter_phoenix_spans(target, partition.start, partition.end)
    return store_span_rows(engine, rows, table or target.staging_table, schema)
