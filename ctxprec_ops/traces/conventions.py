"""What the two tracing conventions call a retriever, a reranker and an LLM span, and where they
keep the query, the ranked documents and the answer.

- **OpenInference** (Phoenix / Arize; LlamaIndex, LangChain, Haystack instrumentations):
  ``openinference.span.kind`` = ``RETRIEVER`` / ``RERANKER`` / ``LLM``; the query in
  ``input.value`` (``reranker.query`` for a reranker); documents in
  ``retrieval.documents.{i}.document.{content,id,score,metadata}`` (a reranker's output order in
  ``reranker.output_documents.{i}.document.*``); the answer in
  ``llm.output_messages.{i}.message.content`` (else ``output.value`` when it is plain text).
- **OTel GenAI** (``gen_ai.*``): ``gen_ai.operation.name`` = ``retrieval`` (span name
  ``retrieval [data source]``), the query in ``gen_ai.retrieval.query.text``, the documents in
  ``gen_ai.retrieval.documents`` (structured, or a JSON string; objects with ``id``, ``score`` and,
  when captured, ``content``); an inference span (``chat``, ``text_completion``,
  ``generate_content``) holds the answer in ``gen_ai.output.messages`` (``parts`` of type
  ``text``), or in the older ``gen_ai.completion.{i}.content``. The convention defines no
  reranker span.
"""

from __future__ import annotations

from collections.abc import Mapping
from functools import lru_cache
from operator import itemgetter
from typing import Any, NamedTuple

from .attributes import group, json_value

__all__ = ["Node", "SpanProblem", "Convention", "OpenInference", "OtelGenAI", "CONVENTIONS", "STAGES"]

STAGES = ("retrieve", "rerank")


class SpanProblem(ValueError):
    """Why a retriever (or reranker) span cannot become a case: one line, no row data."""


class Node(NamedTuple):
    """One retrieved document, in rank order: its text and what the trace says about it."""

    content: str | None
    id: Any = None
    score: Any = None
    metadata: Any = None

    def record(self, rank: int) -> dict[str, Any]:
        """What a score row keeps of it (``documents`` column): rank, id, score, metadata."""
        out: dict[str, Any] = {"node": rank}
        if self.id is not None:
            out["id"] = self.id
        if self.score is not None:
            out["score"] = self.score
        if self.metadata not in (None, {}, ""):
            out["metadata"] = self.metadata
        return out


def _text(value: Any) -> str | None:
    if value is None:
        return None
    return value if isinstance(value, str) else str(value)


def _sub(fields: Mapping[str, Any], prefix: str) -> dict[str, Any] | None:
    """``prefix.*`` keys of ``fields`` as one dict (a flattened object), or None."""
    start = prefix + "."
    sub = {k[len(start) :]: v for k, v in fields.items() if k.startswith(start)}
    return sub or None


def _message_text(fields: Mapping[str, Any], content_key: str, parts_key: str) -> str | None:
    """A message's text: its ``content`` or the text of its parts, joined."""
    content = fields.get(content_key)
    if isinstance(content, str):
        return content
    texts = []
    for _i, part in group(fields, parts_key):
        kind = part.get("type", part.get("message_content.type"))
        text = part.get("content", part.get("text", part.get("message_content.text")))
        if isinstance(text, str) and kind in (None, "text"):
            texts.append(text)
    return "".join(texts) if texts else None


def _last_answer(messages: list[tuple[int, dict[str, Any]]], role_key: str, text_of: Any) -> str | None:
    """The text of the last assistant message (of the last message when none names a role)."""
    assistant = [m for _i, m in messages if m.get(role_key) in ("assistant", "model", "ai")]
    for fields in reversed(assistant or [m for _i, m in messages]):
        text = text_of(fields)
        if text is not None:
            return text
    return None


@lru_cache(maxsize=4096)
def _document_keys(key: str, index: int) -> tuple[str, str, str, str]:
    """The flat keys of document ``index`` under ``key``: content, id, score, metadata."""
    head = f"{key}.{index}.document."
    return head + "content", head + "id", head + "score", head + "metadata"


@lru_cache(maxsize=1024)
def _flat_layout(
    keys: tuple[str, ...], key: str
) -> tuple[itemgetter[Any], tuple[tuple[int, ...], ...] | None, int] | None:
    """How ``OpenInference._flat_nodes`` reads documents from spans with these ``keys``: a getter of
    every document key in order, which fields (0 content, 1 id, 2 score, 3 metadata) each
    document has (None: content, id and score, each of them — the usual span), and how many keys;
    None when they are stored otherwise (other fields under ``key``, a gap in the indices, or a
    value stored whole at ``key``). Depends on the keys alone: spans of one instrumented
    application share it."""
    present = set(keys)
    if key in present:
        return None
    wanted: list[str] = []
    fields: list[tuple[int, ...]] = []
    while True:
        names = _document_keys(key, len(fields))
        have = tuple(slot for slot, name in enumerate(names) if name in present)
        if not have:
            break
        wanted += [names[slot] for slot in have]
        fields.append(have)
    start = key + "."
    if not wanted or len(wanted) != sum(1 for k in keys if k.startswith(start)):
        return None  # other fields or gaps (or no documents): the general reading
    shape = None if all(f == (0, 1, 2) for f in fields) else tuple(fields)
    return itemgetter(*wanted), shape, len(wanted)


class Convention:
    """The interface both conventions implement (``OpenInference``, ``OtelGenAI``)."""

    name: str = ""
    #: texts one of which a span of the stage holds in its attributes' JSON (a cheap SQL filter
    #: before the exact check: a span the filter lets through is still checked by ``kind_of``)
    markers: Mapping[str, tuple[str, ...]] = {}
    #: the kind attribute as exporters write it (JSON with and without the blank): a span whose
    #: attributes hold one of these texts is of the stage without its JSON being read — in the
    #: plan, the ledger and the chunk's read alike (``SpanReader``), so they agree on every span
    kind_texts: Mapping[str, tuple[str, ...]] = {}

    def kind_of(self, attrs: Mapping[str, Any]) -> str | None:
        """``retrieve``, ``rerank``, ``llm`` or None (any other span)."""
        raise NotImplementedError

    def query(self, attrs: Mapping[str, Any], stage: str) -> str | None:
        raise NotImplementedError

    def nodes(self, attrs: Mapping[str, Any], stage: str) -> list[Node]:
        """The documents of a retriever (or reranker) span, in rank order; ``SpanProblem`` when
        they are stored in a form that cannot be read."""
        raise NotImplementedError

    def answer(self, attrs: Mapping[str, Any]) -> str | None:
        """An LLM span's answer text, or None."""
        raise NotImplementedError

    def documents_key(self, stage: str) -> str:
        raise NotImplementedError


class OpenInference(Convention):
    name = "openinference"
    markers = {"retrieve": ('"RETRIEVER"',), "rerank": ('"RERANKER"',), "llm": ('"LLM"',)}
    kind_texts = {
        stage: (f'"openinference.span.kind": "{kind}"', f'"openinference.span.kind":"{kind}"')
        for stage, kind in (("retrieve", "RETRIEVER"), ("rerank", "RERANKER"), ("llm", "LLM"))
    }
    _KINDS = {"RETRIEVER": "retrieve", "RERANKER": "rerank", "LLM": "llm"}

    def kind_of(self, attrs: Mapping[str, Any]) -> str | None:
        kind = attrs.get("openinference.span.kind")
        return self._KINDS.get(kind.upper()) if isinstance(kind, str) else None

    def query(self, attrs: Mapping[str, Any], stage: str) -> str | None:
        if stage == "rerank":
            query = _text(attrs.get("reranker.query"))
            if query:
                return query
        value = attrs.get("input.value")
        if attrs.get("input.mime_type") == "application/json" and isinstance(value, str):
            decoded = json_value(value)
            if isinstance(decoded, dict):  # e.g. {"query": "..."} / {"input": "..."}
                for key in ("query", "query_str", "input", "question"):
                    if isinstance(decoded.get(key), str):
                        return decoded[key]
        return _text(value)

    def documents_key(self, stage: str) -> str:
        return "reranker.output_documents" if stage == "rerank" else "retrieval.documents"

    def nodes(self, attrs: Mapping[str, Any], stage: str) -> list[Node]:
        fast = self._flat_nodes(attrs, self.documents_key(stage))
        if fast is not None:
            return fast
        out = []
        for _i, fields in group(attrs, self.documents_key(stage)):
            meta = fields.get("document.metadata")
            if meta is None:
                meta = _sub(fields, "document.metadata")
            out.append(
                Node(
                    content=_text(fields.get("document.content")),
                    id=fields.get("document.id"),
                    score=fields.get("document.score"),
                    metadata=json_value(meta),
                )
            )
        return out

    @staticmethod
    def _flat_nodes(attrs: Mapping[str, Any], key: str) -> list[Node] | None:
        """The documents when they are stored as the SDK records them (flat keys ``key.0.document.
        content`` ..., indices 0..n-1, only the four standard fields, metadata as JSON text);
        None otherwise (then ``group`` reads any form)."""
        layout = _flat_layout(tuple(attrs), key)
        if layout is None:
            return None
        getter, fields, count = layout
        values = getter(attrs)
        if count == 1:
            values = (values,)
        if None in values:
            return None  # a field recorded as null: the general reading decides
        if fields is None:  # the usual span: every document has content, id and score
            contents = values[0::3]
            if not all(type(c) is str for c in contents):
                return None
            return list(map(Node, contents, values[1::3], values[2::3]))
        out: list[Node] = []
        at = 0
        for present in fields:  # per document: which of content, id, score, metadata it has
            got = [None, None, None, None]
            for slot in present:
                got[slot] = values[at]
                at += 1
            content, doc_id, score, meta = got
            if content is not None and type(content) is not str:
                return None
            out.append(Node(content, doc_id, score, meta if meta is None else json_value(meta)))
        return out

    def answer(self, attrs: Mapping[str, Any]) -> str | None:
        messages = group(attrs, "llm.output_messages")
        text = _last_answer(
            messages,
            "message.role",
            lambda f: _message_text(f, "message.content", "message.contents"),
        )
        if text is not None:
            return text
        value = attrs.get("output.value")
        if isinstance(value, str) and attrs.get("output.mime_type") != "application/json":
            return value
        return None


class OtelGenAI(Convention):
    name = "otel-genai"
    markers = {
        "retrieve": ('"retrieval"', '"retrieve_documents"'),
        "llm": ('"chat"', '"text_completion"', '"generate_content"'),
    }
    kind_texts = {
        stage: tuple(f'"gen_ai.operation.name":{blank}{m}' for m in texts for blank in (" ", ""))
        for stage, texts in markers.items()
    }
    _KINDS = {
        "retrieval": "retrieve",
        "retrieve_documents": "retrieve",
        "chat": "llm",
        "text_completion": "llm",
        "generate_content": "llm",
    }
    DOCUMENTS = "gen_ai.retrieval.documents"

    def kind_of(self, attrs: Mapping[str, Any]) -> str | None:
        op = attrs.get("gen_ai.operation.name")
        return self._KINDS.get(op) if isinstance(op, str) else None

    def query(self, attrs: Mapping[str, Any], stage: str) -> str | None:
        return _text(attrs.get("gen_ai.retrieval.query.text"))

    def documents_key(self, stage: str) -> str:
        return self.DOCUMENTS

    def nodes(self, attrs: Mapping[str, Any], stage: str) -> list[Node]:
        whole = attrs.get(self.DOCUMENTS)
        if isinstance(whole, str) and not isinstance(json_value(whole), list):
            raise SpanProblem(f"{self.DOCUMENTS} is not a JSON array of documents")
        out = []
        for _i, fields in group(attrs, self.DOCUMENTS):
            if "" in fields:  # a document that is no object: its text
                out.append(Node(content=_text(fields[""])))
                continue
            content = fields.get("content", fields.get("text", fields.get("document.content")))
            used = {"content", "text", "document.content", "id", "document.id", "score", "document.score"}
            meta = fields.get("metadata")
            if meta is None:
                meta = _sub(fields, "metadata")
            rest = {k: v for k, v in fields.items() if k not in used and not k.startswith("metadata")}
            if rest:
                meta = {**(json_value(meta) if isinstance(json_value(meta), dict) else {}), **rest}
            out.append(
                Node(
                    content=_text(content),
                    id=fields.get("id", fields.get("document.id")),
                    score=fields.get("score", fields.get("document.score")),
                    metadata=json_value(meta),
                )
            )
        return out

    def answer(self, attrs: Mapping[str, Any]) -> str | None:
        messages = group(attrs, "gen_ai.output.messages")
        text = _last_answer(messages, "role", lambda f: _message_text(f, "content", "parts"))
        if text is not None:
            return text
        return _last_answer(group(attrs, "gen_ai.completion"), "role", lambda f: _text(f.get("content")))


CONVENTIONS: dict[str, Convention] = {c.name: c for c in (OpenInference(), OtelGenAI())}
