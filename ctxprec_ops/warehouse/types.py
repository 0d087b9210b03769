"""Column types the output tables declare once and each warehouse chooses (``Dialect`` type methods).

A table is declared the same way for every backend (``schema.py``, ``segments.py``, ...); a
column whose type differs per family says what it is for — a key's text, a judge model's name,
JSON, the judgment cache's binary key, a double, a timestamp — and the dialect of the connection
it is compiled or bound for picks the concrete type (``Dialect.key_text_type`` and the others,
``warehouse/dialects/``). Nothing here names a family.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import JSON, DateTime, Float, LargeBinary, String
from sqlalchemy.engine import Dialect as SADialect
from sqlalchemy.types import TypeDecorator, TypeEngine

__all__ = [
    "KeyText",
    "KeyCode",
    "ModelName",
    "ExactText",
    "LongText",
    "JSONValue",
    "HashKey",
    "Double",
    "Timestamp",
    "stored_type",
    "stored_length",
]


class _Chosen(TypeDecorator[Any]):
    """A column type the warehouse family chooses (``_choose``); values pass through the chosen
    type's own bind and result processing."""

    impl: Any = String
    cache_ok = True

    def load_dialect_impl(self, dialect: SADialect) -> TypeEngine[Any]:
        from .dialects import for_dialect  # the registry imports the write helpers, which import this

        return self._choose(for_dialect(dialect.name))

    def _choose(self, family: Any) -> TypeEngine[Any]:
        raise NotImplementedError


class KeyText(_Chosen):
    """Text in a primary key (``log_id``, ``source_table``, ``run_id``, ...), compared exactly as
    the source compares its ids: byte for byte, case and accents included. ``length``: characters
    where the backend bounds key text (None: as long as the family allows in a key)."""

    cache_ok = True

    def __init__(self, length: int | None = None) -> None:
        super().__init__(length)
        self.length = length

    def _choose(self, family: Any) -> TypeEngine[Any]:
        chosen: TypeEngine[Any] = family.key_text_type(self.length)
        return chosen


class KeyCode(_Chosen):
    """Machine-made ASCII text in a key (``partition_key``, the mapping's fingerprint)."""

    cache_ok = True

    def __init__(self, length: int) -> None:
        super().__init__(length)
        self.length = length

    def _choose(self, family: Any) -> TypeEngine[Any]:
        chosen: TypeEngine[Any] = family.key_code_type(self.length)
        return chosen


class ModelName(_Chosen):
    """A judge model's name in a key (its length is what the family's key size leaves)."""

    cache_ok = True

    def _choose(self, family: Any) -> TypeEngine[Any]:
        chosen: TypeEngine[Any] = family.model_name_type()
        return chosen


class ExactText(_Chosen):
    """Text of any length outside a key, compared and grouped exactly as the source spells it (a
    segment's values: ``acme`` and ``ACME`` are two segments)."""

    cache_ok = True

    def _choose(self, family: Any) -> TypeEngine[Any]:
        chosen: TypeEngine[Any] = family.exact_text_type()
        return chosen


class LongText(_Chosen):
    """Machine-made text of any length (megabytes), outside a key (a claim's list of ids)."""

    cache_ok = True

    def _choose(self, family: Any) -> TypeEngine[Any]:
        chosen: TypeEngine[Any] = family.long_text_type()
        return chosen


class JSONValue(_Chosen):
    """A JSON document (verdicts, documents, figures by type)."""

    cache_ok = True

    impl = JSON

    def _choose(self, family: Any) -> TypeEngine[Any]:
        chosen: TypeEngine[Any] = family.json_type()
        return chosen


class HashKey(_Chosen):
    """The judgment cache's binary key of ``size`` bytes."""

    cache_ok = True

    impl = LargeBinary

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def _choose(self, family: Any) -> TypeEngine[Any]:
        chosen: TypeEngine[Any] = family.binary_key_type(self.size)
        return chosen


class Double(_Chosen):
    """A double-precision float (scores, stored unrounded)."""

    cache_ok = True

    impl = Float

    def _choose(self, family: Any) -> TypeEngine[Any]:
        chosen: TypeEngine[Any] = family.double_type()
        return chosen


class Timestamp(_Chosen):
    """An instant (stored in UTC)."""

    cache_ok = True

    impl = DateTime

    def _choose(self, family: Any) -> TypeEngine[Any]:
        chosen: TypeEngine[Any] = family.timestamp_type()
        return chosen


def stored_type(type_: TypeEngine[Any], dialect: SADialect) -> TypeEngine[Any]:
    """The type ``dialect`` stores for ``type_``: the family's choice for the types above, the
    dialect's implementation of any other."""
    impl = type_.dialect_impl(dialect)
    if isinstance(impl, _Chosen):
        inner: TypeEngine[Any] = impl.impl_instance
        return inner
    return impl


def stored_length(bind: Any, column: Any) -> int | None:
    """The characters ``column`` holds on ``bind``'s warehouse (None: unbounded)."""
    length: int | None = getattr(stored_type(column.type, bind.dialect), "length", None)
    return length
