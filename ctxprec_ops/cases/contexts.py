"""Retrieved context: the items of ``retrieval_context`` and the nodes a judge ranks from them.

An item is a string, an ``MLLMImage``, or a ``RetrievedContextData(context=..., source=...)``
(deepeval 4.3). ``context_nodes`` turns the items into the ranked nodes of contextual
precision, as deepeval does: items that share a ``source`` are ONE node, at the rank of that
source's first item, whose text is the source name followed by the items' texts; every other item
is a node of its own. ``[faq.md item, "plain", policy.md item, faq.md item]`` is three nodes:
faq.md (both items), "plain", policy.md. Verdicts, scores and reports number these nodes.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from .images import MLLMImage, as_image, display_text, judged_text
from .validation import TestCaseTypeError, invalid, type_name

__all__ = [
    "RetrievedContextData",
    "check_retrieval_context",
    "context_nodes",
    "display_nodes",
    "dump_items",
    "is_plain",
    "item_text",
    "node_count",
]


class RetrievedContextData(BaseModel):
    """One retrieved passage and the document (``source``) it came from."""

    context: str
    source: str

    def __str__(self) -> str:
        return f"{self.source}: {self.context}"


def _item(value: Any) -> str | MLLMImage | RetrievedContextData | None:
    """``value`` as a retrieval-context item, or None when it cannot be one."""
    if isinstance(value, (str, RetrievedContextData, MLLMImage)):
        return value
    image = as_image(value)
    if image is not None:
        return image
    if isinstance(value, dict):
        if set(value) == {"context", "source"} and all(isinstance(v, str) for v in value.values()):
            return RetrievedContextData(context=value["context"], source=value["source"])
        if ("url" in value or "dataBase64" in value) and not ({"context", "source"} & set(value)):
            fields = {k: value[k] for k in ("url", "dataBase64", "mimeType") if value.get(k) is not None}
            return MLLMImage(**fields)
        return None
    if type(value).__name__ == "RetrievedContextData":  # deepeval's own, read by attribute
        context, source = getattr(value, "context", None), getattr(value, "source", None)
        if isinstance(context, str) and isinstance(source, str):
            return RetrievedContextData(context=context, source=source)
    return None


def check_retrieval_context(data: dict[str, Any], name: str, where: str, *, owner: str | None = None) -> None:
    """``data[name]`` is None or a list of items (copied; dicts and deepeval's objects converted).
    ``owner`` set: a failure is pydantic's ``ValidationError`` (as deepeval's ``Turn``), else
    deepeval's ``TypeError`` message comes first."""
    value = data.get(name)
    if value is None:
        return
    lead = "" if owner is not None else f"'{where}' must be None or a list of strings or RetrievedContextData: "
    if isinstance(value, (str, bytes, dict)) or not isinstance(value, Sequence):
        message = f"'{where}' must be None or a list of strings or RetrievedContextData, got {type_name(value)}"
        if owner is not None:
            raise invalid(owner, (name,), message, value, "list_type")
        raise TestCaseTypeError(message)
    items = []
    for i, raw in enumerate(value):
        item = _item(raw)
        if item is None:
            message = (
                f"{lead}'{where}[{i}]' must be a string, an MLLMImage or a RetrievedContextData "
                f"(context, source), got {type_name(raw)}"
            )
            if owner is not None:
                raise invalid(owner, (name, i), message, raw, "string_type")
            raise TestCaseTypeError(message)
        items.append(item)
    data[name] = items


def is_plain(items: Sequence[Any]) -> bool:
    """Every item a string (no images, no sources): the items are the nodes as they are."""
    for item in items:
        if type(item) is not str:
            return False
    return True


def _text(item: str | MLLMImage, where: str) -> str:
    if isinstance(item, MLLMImage):
        return item.prompt_image().placeholder
    return judged_text(item, where)


def item_text(item: Any, where: str) -> str:
    """One item as a node of its own (the turn metric: deepeval does not group a turn's items)."""
    if type(item) is str and "[DEEPEVAL:" not in item:
        return item
    if isinstance(item, RetrievedContextData):
        return _group_text(item.source, [judged_text(item.context, where)])
    return _text(item, where)


def context_nodes(items: Sequence[Any], where: str = "retrieval_context") -> list[str]:
    """The judged texts of the nodes of ``items`` (source groups merged; images by key)."""
    if is_plain(items) and not any("[DEEPEVAL:" in t for t in items):
        return list(items)
    nodes: list[Any] = []  # a text, or the list of a source's texts (filled in as items come)
    groups: dict[str, list[str]] = {}
    for i, item in enumerate(items):
        if isinstance(item, RetrievedContextData):
            texts = groups.get(item.source)
            if texts is None:
                texts = groups[item.source] = []
                nodes.append((item.source, texts))
            texts.append(_text(item.context, f"{where}[{i}]"))
        else:
            nodes.append(_text(item, f"{where}[{i}]"))
    return [n if isinstance(n, str) else _group_text(*n) for n in nodes]


def _group_text(source: str, texts: list[str]) -> str:
    return "\n\n".join([f"Source: {source}", *texts])


def node_count(items: Sequence[Any] | None) -> int:
    """How many nodes ``items`` are (a source's items count once)."""
    if not items:
        return 0
    sources = {i.source for i in items if isinstance(i, RetrievedContextData)}
    return len(sources) + sum(not isinstance(i, RetrievedContextData) for i in items)


def display_nodes(items: Sequence[Any]) -> list[str]:
    """The nodes of ``items`` as people read them (reports, logs): a source group as its judged
    text, an image as ``[image: <file name or URL>]``. ``items`` may be case items or the JSON
    elements of a warehouse row (``{"context", "source"}``, ``{"url"}``); nothing is fetched."""
    order: list[Any] = []
    groups: dict[str, list[str]] = {}
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("source"), str):
            item = RetrievedContextData(context=str(item.get("context", "")), source=item["source"])
        if isinstance(item, RetrievedContextData):
            texts = groups.get(item.source)
            if texts is None:
                texts = groups[item.source] = []
                order.append((item.source, texts))
            texts.append(display_text(item.context))
        elif isinstance(item, MLLMImage):
            order.append(f"[image: {item.filename or item.url or 'inline'}]")
        elif isinstance(item, dict) and isinstance(item.get("url"), str):
            url = item["url"]
            order.append("[image: inline]" if url.startswith("data:") else f"[image: {url}]")
        else:
            order.append(display_text(str(item)))
    return [n if isinstance(n, str) else _group_text(*n) for n in order]


def dump_items(items: Sequence[Any] | None) -> list[Any] | None:
    """``items`` as ``model_dump`` writes them: strings, ``{context, source}``, image dicts."""
    if items is None:
        return None
    out: list[Any] = []
    for item in items:
        if isinstance(item, RetrievedContextData):
            out.append({"context": item.context, "source": item.source})
        elif isinstance(item, MLLMImage):
            out.append(item.to_dict())
        else:
            out.append(item)
    return out
