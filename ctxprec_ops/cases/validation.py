"""What every test-case class shares: the error types, the field checks run when a case is
built, positional/camelCase argument gathering, and the pydantic base class.

Errors follow deepeval's for the same bad input. Where deepeval raises ``TypeError`` (its own
checks: ``input``, ``actual_output``, ``context``, ``retrieval_context``, tool calls, ...) a
``TestCaseTypeError`` is raised whose message starts with deepeval's; where deepeval leaves the
check to pydantic (``expected_output``, ``tags``, ``metadata``, numbers, ``Turn`` fields) a
``TestCaseValidationError`` is raised: a pydantic ``ValidationError`` with the same error type
and location. Both are ``InvalidTestCaseError`` (and ``TypeError`` and ``ValueError``), so
``except TypeError``, ``pytest.raises(ValidationError)`` and ``except InvalidTestCaseError`` all
keep working.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, ClassVar

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError
from pydantic_core import PydanticCustomError

from ..errors import InvalidTestCaseError

__all__ = [
    "TestCaseTypeError",
    "TestCaseValidationError",
    "MISSING",
    "alias",
    "type_name",
    "invalid",
    "check_str",
    "check_str_list",
    "check_dict",
    "check_str_dict",
    "check_id",
    "gather",
    "first_error",
    "CaseModel",
]

#: an argument that was not given (``None`` is a value)
MISSING: Any = object()


class TestCaseTypeError(InvalidTestCaseError, TypeError):
    """A field of a test case has the wrong type or value (raised when the case is built)."""

    __test__ = False  # not a pytest test class


class TestCaseValidationError(ValidationError, TestCaseTypeError):
    """pydantic's ``ValidationError`` for a field deepeval leaves to pydantic (same error type
    and location), that is also a ``TestCaseTypeError``."""

    __test__ = False


def alias(camel: str, snake: str, *more: str) -> Any:
    return Field(default=None, serialization_alias=camel, validation_alias=AliasChoices(camel, snake, *more))


def type_name(value: Any) -> str:
    return type(value).__name__


#: pydantic's own wording of the errors raised here (deepeval's users may match it)
_PYDANTIC_WORDING = {
    "string_type": "Input should be a valid string",
    "list_type": "Input should be a valid list",
    "dict_type": "Input should be a valid dictionary",
    "missing": "Field required",
    "model_type": "Input should be a valid dictionary or instance of ToolCall",
    "literal_error": "Input should be 'user' or 'assistant'",
}


def invalid(owner: str, loc: tuple[str | int, ...], message: str, value: Any, kind: str) -> TestCaseValidationError:
    """A ``TestCaseValidationError`` of pydantic error type ``kind`` at ``loc``: pydantic's own
    wording for that type, then ours (which names the field and the type it got)."""
    wording = _PYDANTIC_WORDING.get(kind)
    text = f"{wording} ({message})" if wording else message
    escaped = text.replace("{", "{{").replace("}", "}}")  # the message is a format template
    line = {"type": PydanticCustomError(kind, escaped), "loc": loc, "input": value}
    return TestCaseValidationError.from_exception_data(owner, [line])  # type: ignore[list-item]


def check_str(
    data: dict[str, Any],
    name: str,
    where: str,
    *,
    required: bool = False,
    owner: str | None = None,
    images: bool = True,
) -> None:
    """``data[name]`` is a string (or None when not ``required``). ``owner`` set: the failure is
    pydantic's (``TestCaseValidationError`` of that model), else deepeval's ``TypeError``. With
    ``images`` an ``MLLMImage`` stands for its placeholder text (deepeval writes ``f"{image}"``)."""
    value = data.get(name)
    if value is None and not required:
        return
    if isinstance(value, str):
        return
    if images and type_name(value) == "MLLMImage" and hasattr(value, "_placeholder"):
        data[name] = str(value)
        return
    message = f"'{where}' must be a string, got {type_name(value)}"
    if owner is not None:
        raise invalid(owner, (name,), message, value, "string_type")
    raise TestCaseTypeError(message)


def check_str_list(
    data: dict[str, Any], name: str, where: str, *, owner: str | None = None, deepeval: str = ""
) -> None:
    """``data[name]`` is None or a list of strings (copied). ``deepeval``: deepeval's message for
    the same bad input, put first (users match it); ``owner``: pydantic's error instead."""
    value = data.get(name)
    if value is None:
        return
    lead = f"{deepeval}: " if deepeval else ""
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        rule = deepeval or f"'{where}' must be None or a list of strings"
        message = f"{rule}, got {type_name(value)}"
        if owner is not None:
            raise invalid(owner, (name,), message, value, "list_type")
        raise TestCaseTypeError(message)
    items = list(value)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            message = f"{lead}'{where}[{i}]' must be a string, got {type_name(item)}"
            if owner is not None:
                raise invalid(owner, (name, i), message, item, "string_type")
            raise TestCaseTypeError(message)
    data[name] = items


def check_dict(data: dict[str, Any], name: str, where: str, *, owner: str) -> None:
    value = data.get(name)
    if value is not None and not isinstance(value, dict):
        raise invalid(owner, (name,), f"'{where}' must be a dict or None, got {type_name(value)}", value, "dict_type")


def check_str_dict(data: dict[str, Any], name: str, deepeval: str) -> None:
    """``data[name]`` is None or a ``dict[str, str]``; else deepeval's ``TypeError`` message."""
    value = data.get(name)
    if value is None:
        return
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise TestCaseTypeError(f"{deepeval} (got {type_name(value)}: {str(value)[:80]})")


def check_id(data: dict[str, Any], owner: str) -> None:
    value = data.get("id")
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        message = f"'id' must be a string or an integer, got {type_name(value)}"
        raise invalid(owner, ("id",), message, value, "string_type")
    data["id"] = str(value)


def first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ()))
    return f"{where}: {first['msg']}" if where else str(first["msg"])


def gather(cls: type[CaseModel], positional: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Positional and keyword arguments -> one dict keyed by field name (camelCase folded)."""
    if len(positional) > len(cls._positional):
        raise TestCaseTypeError(
            f"{cls.__name__}() takes at most {len(cls._positional)} positional arguments "
            f"({', '.join(cls._positional)}), got {len(positional)}"
        )
    data: dict[str, Any] = {}
    for name, value in zip(cls._positional, positional):
        if value is not MISSING:
            data[name] = value
    for key, value in kwargs.items():
        name = cls._aliases.get(key, key)
        if name in data:
            raise TestCaseTypeError(f"{cls.__name__}() got '{name}' twice (as {key!r} and another spelling)")
        data[name] = value
    return data


class _LazyPrivate(dict):
    """A case's private attributes (deepeval's ``_dataset_rank`` and the like), each at its
    default until set; ``_identifier`` (a uuid4 text, as deepeval's) is made on first read, so a
    case built from a warehouse row pays nothing for it."""

    defaults: ClassVar[dict[str, Any]] = {}

    def __missing__(self, key: str) -> Any:
        if key == "_identifier":
            import uuid

            value = self[key] = str(uuid.uuid4())
            return value
        if key in self.defaults:
            return self.defaults[key]
        raise KeyError(key)


class CaseModel(BaseModel):
    """Shared base: unknown fields are kept (they round-trip), camelCase is accepted."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, arbitrary_types_allowed=True)

    #: positional argument order
    _positional: ClassVar[tuple[str, ...]] = ()
    #: camelCase / legacy spelling -> field name
    _aliases: ClassVar[dict[str, str]] = {}
    #: deepeval's private attributes of this class and their defaults
    _private_defaults: ClassVar[dict[str, Any]] = {}
    _private_type: ClassVar[type[_LazyPrivate]] = _LazyPrivate

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._private_type = type(f"{cls.__name__}Private", (_LazyPrivate,), {"defaults": dict(cls._private_defaults)})

    def model_post_init(self, context: Any, /) -> None:
        private = self._private_type()
        if "_identifier" in self._private_defaults:
            private["_identifier"]  # made now: a copy of this case keeps it, as deepeval's does
        object.__setattr__(self, "__pydantic_private__", private)

    @classmethod
    def _fast(cls, values: dict[str, Any]) -> Any:
        """An instance from values that are already valid: what ``model_construct`` does, minus
        its per-field work (warehouse rows build millions of cases; all defaults are immutable)."""
        defaults = cls.__dict__.get("_defaults_cache")
        if defaults is None:
            defaults = {name: f.default for name, f in cls.model_fields.items()}
            type.__setattr__(cls, "_defaults_cache", defaults)
        inst = cls.__new__(cls)
        object.__setattr__(inst, "__dict__", {**defaults, **values})
        object.__setattr__(inst, "__pydantic_fields_set__", set(values))
        object.__setattr__(inst, "__pydantic_extra__", {})
        object.__setattr__(inst, "__pydantic_private__", cls._private_type())
        return inst

    def _validated_init(self, data: dict[str, Any]) -> None:
        try:
            super().__init__(**data)
        except TestCaseValidationError:
            raise
        except ValidationError as exc:  # pydantic's own check (a number, a bool, ...): the same error, ours too
            errors = exc.errors(include_url=False)
            raise TestCaseValidationError.from_exception_data(type(self).__name__, errors) from None  # type: ignore[arg-type]

    def __eq__(self, other: object) -> bool:
        """Equal fields (and extra fields) and equal private attributes other than
        ``_identifier`` (deepeval's random id would make no two separately built cases equal)."""
        if not isinstance(other, BaseModel) or type(other) is not type(self):
            return NotImplemented
        if self.__dict__ != other.__dict__ or self.__pydantic_extra__ != other.__pydantic_extra__:
            return False
        mine = {k: v for k, v in (self.__pydantic_private__ or {}).items() if k != "_identifier"}
        theirs = {k: v for k, v in (other.__pydantic_private__ or {}).items() if k != "_identifier"}
        return mine == theirs

    @property
    def additional_metadata(self) -> dict | None:
        """deepeval's older name of ``metadata``."""
        return self.metadata

    @additional_metadata.setter
    def additional_metadata(self, value: dict | None) -> None:
        self.metadata = value
