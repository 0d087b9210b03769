"""Tool calls recorded on a case (kept and round-tripped; contextual precision does not use them).

``ToolCall`` has deepeval's fields, equality and hash: two tool calls are equal when their
``name``, ``input_parameters`` and ``output`` are, and the hash is computed the way deepeval
computes it, so ours and deepeval's own ``ToolCall`` objects hash alike and ours compares equal
to deepeval's. (deepeval's ``__eq__`` answers False for any object not of its own class, and
pydantic models refuse virtual subclasses, so ``deepeval_call == ours`` stays False: put
deepeval's calls into a case of ours — they are converted — or compare from our side.)
"""

from __future__ import annotations

import json
from collections.abc import Hashable
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_serializer

from .validation import TestCaseTypeError, alias, first_error, invalid, type_name

__all__ = ["ToolCall", "ToolCallType", "coerce_tool_calls"]


class ToolCallType(Enum):
    FUNCTION = "FUNCTION"
    MCP = "MCP"


def _hashable(value: Any) -> Hashable:
    """``value`` as something hashable, equal values alike (deepeval's rule, so hashes agree):
    mappings as sorted (key, value) pairs, lists/tuples as tuples, sets as frozensets, and a
    leaf that cannot be hashed as a token of its type."""
    if value is None:
        return None
    if isinstance(value, dict):
        return tuple(sorted((k, _hashable(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(_hashable(v) for v in value)
    if isinstance(value, (set, frozenset)):
        return frozenset(_hashable(v) for v in value)
    try:
        hash(value)
    except TypeError:
        return ("__unhashable__", type(value).__qualname__)
    return value


def _is_foreign_tool_call(obj: Any) -> bool:
    """A tool call of another library with deepeval's shape (deepeval's own ``ToolCall``)."""
    return (
        not isinstance(obj, ToolCall)
        and type(obj).__name__ == "ToolCall"
        and all(hasattr(obj, a) for a in ("name", "input_parameters", "output"))
    )


class ToolCall(BaseModel):
    """A tool the application called (deepeval's ``ToolCall``)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str
    type: ToolCallType = ToolCallType.FUNCTION
    description: str | None = None
    reasoning: str | None = None
    output: Any = None
    input_parameters: dict[str, Any] | None = alias("inputParameters", "input_parameters")

    @field_serializer("type")
    def _type_value(self, value: ToolCallType) -> str:
        return value.value

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, ToolCall) and not _is_foreign_tool_call(other):
            return False
        return (
            self.name == getattr(other, "name", None)
            and self.input_parameters == getattr(other, "input_parameters", None)
            and self.output == getattr(other, "output", None)
        )

    def __hash__(self) -> int:
        return hash((self.name, _hashable(self.input_parameters or {}), _hashable(self.output)))

    def __repr__(self) -> str:
        parts = [f"name={json.dumps(self.name, ensure_ascii=False)}", f'type="{self.type.value}"']
        for field in ("description", "reasoning"):
            value = getattr(self, field)
            if value:
                parts.append(f"{field}={json.dumps(value, ensure_ascii=False)}")
        if self.input_parameters:
            parts.append(f"input_parameters={_json_or_repr(self.input_parameters)}")
        if self.output is not None:
            parts.append(f"output={_json_or_repr(self.output)}")
        return f"ToolCall({', '.join(parts)})"


def _json_or_repr(value: Any) -> str:
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def coerce_tool_calls(data: dict[str, Any], name: str, *, owner: str | None = None) -> None:
    """``data[name]`` as a list of our ``ToolCall`` (None stays None): ours are kept, a dict of
    the fields or deepeval's own ``ToolCall`` (read by attribute) is converted. A failure is
    deepeval's ``TypeError`` message first, or with ``owner`` pydantic's error (deepeval's ``Turn``)."""
    value = data.get(name)
    if value is None:
        return
    lead = "" if owner is not None else f"'{name}' must be None or a list of `ToolCall`: "  # deepeval's message

    def fail(loc: tuple[str | int, ...], message: str, bad: Any, kind: str) -> Exception:
        return invalid(owner, loc, message, bad, kind) if owner is not None else TestCaseTypeError(lead + message)

    if not isinstance(value, (list, tuple)):
        message = f"'{name}' must be None or a list of ToolCall (or of dicts of its fields), got {type_name(value)}"
        raise fail((name,), message, value, "list_type")
    calls = []
    for i, item in enumerate(value):
        if isinstance(item, ToolCall):
            calls.append(item)
        elif isinstance(item, dict) or _is_foreign_tool_call(item) or hasattr(item, "name"):
            try:
                calls.append(_from(item))
            except ValidationError as exc:
                message = f"'{name}[{i}]' is not a valid ToolCall: {first_error(exc)}"
                raise fail((name, i), message, item, "model_type") from None
        else:
            message = f"'{name}[{i}]' must be a ToolCall (or a dict of its fields), got {type_name(item)}"
            raise fail((name, i), message, item, "model_type")
    data[name] = calls


def _from(item: Any) -> ToolCall:
    if isinstance(item, dict):
        return ToolCall.model_validate(item)
    fields = getattr(type(item), "model_fields", None)
    names = list(fields) if isinstance(fields, dict) else [k for k in vars(item) if not k.startswith("_")]
    values = {n: getattr(item, n) for n in names if getattr(item, n, None) is not None}
    kind = values.get("type")
    if isinstance(kind, Enum):  # deepeval's own ToolCallType
        values["type"] = kind.value
    return ToolCall.model_validate(values)
