"""One parser per type of setting, for a variable's text and a face's value alike, and the one error
a bad value becomes (``SettingsError``, naming the variable or the argument).

- booleans: exactly ``1``/``0``, ``true``/``false``, ``yes``/``no``, ``on``/``off`` (any case);
  anything else is an error, never a silent false;
- ``auto`` or a boolean (``AutoBool``); a boolean or unset (``OptionalBool``);
- JSON objects of column names, JSON lists of column names, comma-separated lists, and prices.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Annotated, Any

from pydantic import AfterValidator, BeforeValidator, ValidationError
from pydantic_settings import NoDecode

from ..judge.pricing import parse_prices

__all__ = [
    "Kind",
    "TRUE_WORDS",
    "FALSE_WORDS",
    "AutoBool",
    "Bool",
    "ColumnMap",
    "ColumnList",
    "CommaList",
    "Day",
    "OptionalBool",
    "Prices",
    "SettingsError",
    "parse_auto_bool",
    "parse_bool",
    "settings_error",
]

TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


class SettingsError(ValueError):
    """A setting holds a value of the wrong form: ``{name} {problem}, got {value!r}``, where
    ``name`` is the ``CTXPREC_*`` variable it came from, or the argument it was given as."""

    def __init__(self, message: str, *, field: str | None = None, problem: str = "", value: Any = None) -> None:
        super().__init__(message)
        self.field = field
        self.problem = problem
        self.value = value

    def named(self, name: str) -> SettingsError:
        """The same error, naming ``name`` (a face's flag or parameter) instead."""
        return SettingsError(f"{name} {self.problem}, got {self.value!r}", field=self.field, problem=self.problem,
                             value=self.value)  # fmt: skip


def _bool(value: Any) -> Any:
    """The one boolean parser (a validator of every boolean setting)."""
    if isinstance(value, bool) or value is None:
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    word = str(value).strip().lower()
    if word in TRUE_WORDS:
        return True
    if word in FALSE_WORDS:
        return False
    raise ValueError("must be true or false (1/0, true/false, yes/no, on/off)")


def _auto_bool(value: Any) -> Any:
    if isinstance(value, str) and value.strip().lower() == "auto":
        return "auto"
    return "true" if _bool(value) else "false"


def parse_bool(raw: str | bool | None, name: str = "value", default: bool = False) -> bool:
    """A boolean setting's text: ``1/true/yes/on`` or ``0/false/no/off`` (any case); empty = ``default``;
    anything else is a ``SettingsError`` naming ``name``."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return default
    try:
        return bool(_bool(raw))
    except ValueError as exc:
        raise SettingsError(f"{name} {exc}, got {raw!r}", field=name, problem=str(exc), value=raw) from None


def parse_auto_bool(raw: str | bool | None, name: str = "value", default: str = "auto") -> str:
    """``auto`` or a boolean, as the string ``auto``/``true``/``false``; empty = ``default``."""
    if raw is None or (isinstance(raw, str) and not raw.strip()):
        return default
    try:
        return str(_auto_bool(raw))
    except ValueError as exc:
        raise SettingsError(f"{name} {exc} or auto, got {raw!r}", field=name, problem=str(exc), value=raw) from None


def _json(value: Any, what: str) -> Any:
    if not isinstance(value, str):
        return value
    try:
        return json.loads(value) if value.strip() else None
    except json.JSONDecodeError as exc:
        raise ValueError(f"must be {what}: {exc.msg} at position {exc.pos}") from None


def _column_map(value: Any) -> Any:
    data = _json(value, 'a JSON object like {"retrieval_context": "contexts"}')
    if data is None:
        return {}
    if not isinstance(data, dict) or not all(isinstance(v, str) for v in data.values()):
        raise ValueError('must be a JSON object of column names like {"retrieval_context": "contexts"}')
    return data


def _column_list(value: Any) -> Any:
    data = _json(value, 'a JSON list like ["tenant"]')
    if data is None:
        return []
    if isinstance(data, tuple):
        data = list(data)
    if not isinstance(data, list) or not all(isinstance(v, str) for v in data):
        raise ValueError('must be a JSON list of column names like ["tenant"]')
    return data


def _comma_list(value: Any) -> Any:
    if isinstance(value, str):
        return [p.strip() for p in value.split(",") if p.strip()]
    return value


def _day(value: Any) -> Any:
    try:
        dt.date.fromisoformat(str(value))
    except ValueError:
        raise ValueError("must be a date YYYY-MM-DD") from None
    return value


def _prices(value: Any) -> Any:
    data = _json(value, 'JSON like {"model": [input_usd_per_1M, output_usd_per_1M]}')
    try:
        return parse_prices(data)
    except ValueError:
        raise ValueError('must be JSON like {"model": [input_usd_per_1M, output_usd_per_1M]} (prices >= 0)') from None


@dataclass(frozen=True)
class Kind:
    """What a variable of this type holds, in words (docs/configuration.md)."""

    text: str


Bool = Annotated[bool, BeforeValidator(_bool), Kind("boolean")]
OptionalBool = Annotated[bool | None, BeforeValidator(_bool), Kind("boolean")]
AutoBool = Annotated[str, BeforeValidator(_auto_bool), Kind("`auto` or a boolean")]
ColumnMap = Annotated[dict[str, str], NoDecode, BeforeValidator(_column_map), Kind("JSON object")]
ColumnList = Annotated[list[str], NoDecode, BeforeValidator(_column_list), Kind("JSON list")]
CommaList = Annotated[list[str], NoDecode, BeforeValidator(_comma_list), Kind("comma-separated list")]
Prices = Annotated[dict[str, tuple[float, float]], NoDecode, BeforeValidator(_prices), Kind("JSON object")]
Day = Annotated[str, AfterValidator(_day), Kind("date, YYYY-MM-DD")]

#: pydantic's error types, in this project's words
_PROBLEMS = {
    "int_parsing": "must be a whole number",
    "int_from_float": "must be a whole number",
    "int_type": "must be a whole number",
    "float_parsing": "must be a number",
    "float_type": "must be a number",
    "finite_number": "must be a number",
    "string_type": "must be text",
    "dict_type": "must be a JSON object",
    "list_type": "must be a JSON list",
}


def settings_error(exc: ValidationError, names: dict[str, str]) -> SettingsError:
    """The first problem of ``exc`` as a ``SettingsError``; ``names`` maps a field to the name the
    user gave it by (its variable, or the argument)."""
    messages = []
    first: SettingsError | None = None
    for err in exc.errors():
        field = str(err["loc"][0]) if err["loc"] else ""
        name = names.get(field, field)
        kind = err["type"]
        if kind == "value_error":
            problem = str(err["ctx"]["error"]) if "ctx" in err else err["msg"].removeprefix("Value error, ")
        else:
            problem = _PROBLEMS.get(kind, err["msg"][:1].lower() + err["msg"][1:])
        value = err.get("input")
        message = f"{name} {problem}, got {value!r}"
        messages.append(message)
        if first is None:
            first = SettingsError(message, field=field, problem=problem, value=value)
    assert first is not None
    if len(messages) > 1:
        return SettingsError("; ".join(messages), field=first.field, problem=first.problem, value=first.value)
    return first
