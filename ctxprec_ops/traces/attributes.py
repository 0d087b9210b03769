"""A span's attributes as one flat mapping ``{dotted key: value}``, whatever form they were stored in.

Accepted (and mixed freely):

- flat keys, as the OpenTelemetry SDK records them and most warehouse exports keep them:
  ``{"retrieval.documents.0.document.content": "..."}``;
- nested objects, as OTLP/JSON-style exporters write them:
  ``{"retrieval": {"documents": [{"document": {"content": "..."}}]}}``;
- OTLP ``KeyValue`` lists and ``AnyValue`` objects (``[{"key": "input.value", "value":
  {"stringValue": "..."}}]``), as an OTLP/JSON file holds them.

Nested objects and lists of objects are flattened with ``.`` and list indices; lists of plain
values stay lists (an OTel array attribute). Text values that hold JSON (OpenInference's
``document.metadata``, OTel GenAI's ``gen_ai.retrieval.documents``) are left as text: the
conventions read the few keys that may hold JSON themselves (``json_value``).
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterable, Mapping
from functools import lru_cache
from typing import Any

import orjson

__all__ = ["AttributesError", "parse_attributes", "decode_any_value", "key_values", "group", "json_value"]

_ANY_KEYS = frozenset(
    {"stringValue", "boolValue", "intValue", "doubleValue", "arrayValue", "kvlistValue", "bytesValue"}
)
_NOT_ANY = object()


class AttributesError(ValueError):
    """A span's attributes cannot be read (not JSON, not an object)."""


def _any_value(value: dict[str, Any]) -> Any:
    """The Python value of an OTLP ``AnyValue`` object, or ``_NOT_ANY`` when ``value`` is none."""
    if len(value) != 1:
        return _NOT_ANY if value else None  # ``{}`` is an empty AnyValue
    ((kind, inner),) = value.items()
    if kind not in _ANY_KEYS:
        return _NOT_ANY
    if kind == "intValue":  # int64 is a JSON string in OTLP/JSON
        try:
            return int(inner)
        except (TypeError, ValueError):
            return inner
    if kind == "doubleValue":
        try:
            return float(inner)
        except (TypeError, ValueError):
            return inner
    if kind == "arrayValue":
        values = inner.get("values", []) if isinstance(inner, dict) else []
        return [decode_any_value(v) for v in values]
    if kind == "kvlistValue":
        values = inner.get("values", []) if isinstance(inner, dict) else []
        return key_values(values)
    if kind == "bytesValue" and isinstance(inner, str):
        try:
            return base64.b64decode(inner).hex()
        except ValueError:
            return inner
    return inner


def decode_any_value(value: Any) -> Any:
    """An OTLP ``AnyValue`` (or any plain JSON value) as a plain Python value."""
    if isinstance(value, dict):
        decoded = _any_value(value)
        if decoded is not _NOT_ANY:
            return decoded
    return value


def _is_key_values(value: list[Any]) -> bool:
    return bool(value) and all(isinstance(kv, dict) and isinstance(kv.get("key"), str) for kv in value)


def key_values(items: Iterable[Any]) -> dict[str, Any]:
    """An OTLP ``KeyValue`` list as a dict (a later duplicate key wins, as in the SDK)."""
    out: dict[str, Any] = {}
    for kv in items:
        if isinstance(kv, dict) and isinstance(kv.get("key"), str):
            out[kv["key"]] = decode_any_value(kv.get("value"))
    return out


def _flatten(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, dict):
        decoded = _any_value(value)
        if decoded is not _NOT_ANY:
            if not isinstance(decoded, dict):
                _flatten_leaf(prefix, decoded, out)
                return
            value = decoded
        for key, item in value.items():
            _flatten(f"{prefix}.{key}" if prefix else str(key), item, out)
        return
    _flatten_leaf(prefix, value, out)


def _flatten_leaf(prefix: str, value: Any, out: dict[str, Any]) -> None:
    if isinstance(value, list):
        if _is_key_values(value) and all(set(kv) <= {"key", "value"} for kv in value):
            _flatten(prefix, key_values(value), out)
            return
        if any(isinstance(v, (dict, list)) for v in value):
            for i, item in enumerate(value):
                _flatten(f"{prefix}.{i}", item, out)
            return
    out[prefix] = value


#: the largest magnitude a JSON integer literal has when orjson reads it exactly (as an int):
#: beyond 64 bits it reads a float, where the standard library keeps the exact integer
_EXACT_INT = 2.0**63


def _huge_float(value: Any) -> bool:
    """Whether ``value`` holds a float at least ``_EXACT_INT`` in magnitude (then, maybe, an
    integer orjson did not read exactly)."""
    kind = type(value)
    if kind is dict:
        value = value.values()
    elif kind is not list:
        return kind is float and abs(value) >= _EXACT_INT
    for v in value:  # one loop, no call per plain value: a span's attributes are ~20 of them
        kind = type(v)
        if kind is float:
            if abs(v) >= _EXACT_INT:
                return True
        elif (kind is dict or kind is list) and _huge_float(v):
            return True
    return False


def _loads(text: str, exact: bool = False) -> Any:
    """The JSON of ``text``. orjson reads it ~4x faster than the standard library (most of a
    span's cost in the pipeline); what orjson refuses (NaN, lone surrogates, a BOM) the standard
    library reads, as it does everything when ``exact`` (orjson reads an integer past 64 bits as
    a float: ``parse_attributes`` asks again, exactly, when it meets one)."""
    if not text or text.isspace():
        raise AttributesError("attributes are empty")
    if not exact:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise AttributesError(f"attributes are not JSON ({exc})") from None
    except RecursionError:
        raise AttributesError("attributes are JSON nested too deeply to read") from None


def parse_attributes(value: Any) -> dict[str, Any]:
    """The attributes column's value (JSON text, bytes, a dict or an OTLP ``KeyValue`` list) as
    one flat mapping; ``AttributesError`` (one line, naming the problem) when it is unreadable."""
    if value is None:
        raise AttributesError("attributes are NULL")
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise AttributesError("attributes are not valid UTF-8") from None
    text = value if isinstance(value, str) else None
    if text is not None:
        value = _loads(text)
    if isinstance(value, list) and (_is_key_values(value) or not value):
        value = key_values(value)
    if not isinstance(value, dict):
        raise AttributesError(f"attributes must be a JSON object, got {type(value).__name__}")
    for v in value.values():  # one pass: nested? a float that may be an integer read inexactly?
        kind = type(v)
        if kind is dict or kind is list:
            break
        if kind is float and text is not None and abs(v) >= _EXACT_INT:
            return parse_attributes(_loads(text, exact=True))
    else:
        return value  # already flat (the usual case): no copy
    if text is not None and _huge_float(value):
        return parse_attributes(_loads(text, exact=True))
    out: dict[str, Any] = {}
    try:
        _flatten("", value, out)
    except RecursionError:
        raise AttributesError("attributes are nested too deeply to read") from None
    return out


def json_value(value: Any) -> Any:
    """A value that may be JSON text (``document.metadata``, ``gen_ai.retrieval.documents``)
    decoded; anything else (or text that is not JSON) as it is."""
    if isinstance(value, str) and value[:1] in ("{", "["):
        try:
            return json.loads(value)
        except (json.JSONDecodeError, RecursionError):
            return value
    return value


#: distinct key layouts remembered by ``group`` (spans of one instrumented application share a few)
_LAYOUTS = 1024


@lru_cache(maxsize=_LAYOUTS)
def _group_layout(keys: tuple[str, ...], prefix: str) -> tuple[tuple[int, tuple[tuple[str, str], ...]], ...]:
    """Where the items under ``prefix`` sit among ``keys``: ``(N, ((rest, key), ...))`` per index
    ``N``, in index order (keys in their order within each item). Depends on the keys alone, so
    spans with the same keys (one instrumented application's) share it."""
    items: dict[int, list[tuple[str, str]]] = {}
    start, n = prefix + ".", len(prefix) + 1
    for key in keys:
        if key.startswith(start):
            index, dot, rest = key[n:].partition(".")
            if dot and rest and index.isdigit() and index.isascii():
                items.setdefault(int(index), []).append((rest, key))
    return tuple((i, tuple(fields)) for i, fields in sorted(items.items()))


def group(attrs: Mapping[str, Any], prefix: str) -> list[tuple[int, dict[str, Any]]]:
    """The indexed items under ``prefix`` (``prefix.N.rest`` keys), in index order, each as
    ``(N, {rest: value})``; a value stored whole at ``prefix`` (a list, or JSON text of one) is
    read too."""
    layout = _group_layout(tuple(attrs), prefix)
    whole = attrs.get(prefix)
    if whole is None:  # the usual span: the items' keys are known from the layout, no scan of every key
        return [(i, {rest: attrs[key] for rest, key in fields}) for i, fields in layout]
    items: dict[int, dict[str, Any]] = {}
    whole = json_value(whole)
    if isinstance(whole, list):
        for i, item in enumerate(whole):
            flat: dict[str, Any] = {}
            if isinstance(item, dict):
                _flatten("", item, flat)
            else:
                flat[""] = item
            items[i] = flat
    for i, fields in layout:
        found = items.setdefault(i, {})
        for rest, key in fields:
            found[rest] = attrs[key]
    return sorted(items.items())
