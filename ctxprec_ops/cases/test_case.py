"""Test cases: the data a metric scores, as pydantic models with deepeval's field set.

``LLMTestCase``, ``Turn`` and ``ConversationalTestCase`` accept every field deepeval's classes
accept (snake_case or camelCase), keep the ones contextual precision does not use so they
round-trip through ``model_dump()``, and validate types when the case is built. A bad field
raises ``TestCaseTypeError``: an ``InvalidTestCaseError`` that is also a ``TypeError``, so code
catching either (as deepeval users do) keeps working. Positional arguments follow DESIGN.md:
``LLMTestCase(input, actual_output, expected_output, retrieval_context, id, metadata)``,
``Turn(role, content, retrieval_context)``, ``ConversationalTestCase(turns, expected_outcome, id,
metadata)``.

Images are not supported: a text containing deepeval's image placeholder sets ``multimodal``
(as deepeval does) and the metrics refuse such a case with a clear error.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Sequence
from typing import Any, ClassVar, Literal

from pydantic import AliasChoices, BaseModel, ConfigDict, Field, ValidationError

from ..errors import InvalidTestCaseError

__all__ = [
    "ConversationalTestCase",
    "LLMTestCase",
    "ModelTestCase",
    "TestCaseTypeError",
    "ToolCall",
    "Turn",
    "as_conversational_test_case",
    "as_llm_test_case",
]

#: deepeval marks an image (or PDF) inside a text with this placeholder
_IMAGE_PLACEHOLDER = re.compile(r"\[DEEPEVAL:(?:IMAGE|PDF):")
_MISSING: Any = object()


class TestCaseTypeError(InvalidTestCaseError, TypeError):
    """A field of a test case has the wrong type or value (raised when the case is built)."""

    __test__ = False  # not a pytest test class


def _alias(camel: str, snake: str, *more: str) -> Any:
    return Field(default=None, serialization_alias=camel, validation_alias=AliasChoices(camel, snake, *more))


def _has_image(text: Any) -> bool:
    return isinstance(text, str) and _IMAGE_PLACEHOLDER.search(text) is not None


def _type_name(value: Any) -> str:
    return type(value).__name__


def _check_str(data: dict[str, Any], name: str, where: str, *, required: bool = False) -> None:
    value = data.get(name)
    if value is None and not required:
        return
    if not isinstance(value, str):
        hint = " (images are not supported)" if "Image" in _type_name(value) else ""
        raise TestCaseTypeError(f"'{where}' must be a string, got {_type_name(value)}{hint}")


def _check_str_list(data: dict[str, Any], name: str, where: str) -> None:
    value = data.get(name)
    if value is None:
        return
    if isinstance(value, (str, bytes)) or not isinstance(value, Sequence):
        raise TestCaseTypeError(f"'{where}' must be None or a list of strings, got {_type_name(value)}")
    items = list(value)
    for i, item in enumerate(items):
        if not isinstance(item, str):
            hint = " (images are not supported)" if "Image" in _type_name(item) else ""
            raise TestCaseTypeError(f"'{where}[{i}]' must be a string, got {_type_name(item)}{hint}")
    data[name] = items


def _check_dict(data: dict[str, Any], name: str, where: str) -> None:
    value = data.get(name)
    if value is not None and not isinstance(value, dict):
        raise TestCaseTypeError(f"'{where}' must be a dict or None, got {_type_name(value)}")


def _check_id(data: dict[str, Any]) -> None:
    value = data.get("id")
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (str, int)):
        raise TestCaseTypeError(f"'id' must be a string or an integer, got {_type_name(value)}")
    data["id"] = str(value)


def _tool_calls(data: dict[str, Any], name: str) -> None:
    value = data.get(name)
    if value is None:
        return
    if not isinstance(value, (list, tuple)):
        raise TestCaseTypeError(f"'{name}' must be None or a list of ToolCall, got {_type_name(value)}")
    calls = []
    for i, item in enumerate(value):
        if isinstance(item, ToolCall):
            calls.append(item)
        elif isinstance(item, dict) or hasattr(item, "name"):  # a dict, or deepeval's own ToolCall
            try:
                calls.append(ToolCall.model_validate(item, from_attributes=not isinstance(item, dict)))
            except ValidationError as exc:
                raise TestCaseTypeError(f"'{name}[{i}]' is not a valid ToolCall: {_first_error(exc)}") from None
        else:
            raise TestCaseTypeError(f"'{name}[{i}]' must be a ToolCall, got {_type_name(item)}")
    data[name] = calls


def _first_error(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(p) for p in first.get("loc", ()))
    return f"{where}: {first['msg']}" if where else str(first["msg"])


def _gather(cls: type[_CaseModel], positional: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """Positional and keyword arguments -> one dict keyed by field name (camelCase folded)."""
    if len(positional) > len(cls._positional):
        raise TestCaseTypeError(
            f"{cls.__name__}() takes at most {len(cls._positional)} positional arguments "
            f"({', '.join(cls._positional)}), got {len(positional)}"
        )
    data: dict[str, Any] = {}
    for name, value in zip(cls._positional, positional):
        if value is not _MISSING:
            data[name] = value
    for key, value in kwargs.items():
        name = cls._aliases.get(key, key)
        if name in data:
            raise TestCaseTypeError(f"{cls.__name__}() got '{name}' twice (as {key!r} and another spelling)")
        data[name] = value
    return data


class _CaseModel(BaseModel):
    """Shared base: unknown fields are kept (they round-trip), camelCase is accepted."""

    model_config = ConfigDict(extra="allow", populate_by_name=True, arbitrary_types_allowed=True)

    #: positional argument order
    _positional: ClassVar[tuple[str, ...]] = ()
    #: camelCase / legacy spelling -> field name
    _aliases: ClassVar[dict[str, str]] = {}

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
        object.__setattr__(inst, "__pydantic_private__", None)
        return inst

    def _validated_init(self, data: dict[str, Any]) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise TestCaseTypeError(f"{type(self).__name__}: {_first_error(exc)}") from None

    @property
    def additional_metadata(self) -> dict | None:
        """deepeval's older name of ``metadata``."""
        return self.metadata

    @additional_metadata.setter
    def additional_metadata(self, value: dict | None) -> None:
        self.metadata = value


class ToolCall(BaseModel):
    """A tool call recorded on a case (kept and round-tripped; not used by contextual precision)."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)

    name: str
    description: str | None = None
    reasoning: str | None = None
    output: Any = None
    input_parameters: dict[str, Any] | None = _alias("inputParameters", "input_parameters")


class LLMTestCase(_CaseModel):
    """One retrieval: the query, the ranked retrieved nodes, and the answer it should lead to.

    ``retrieval_context`` is ranked best first; node K (1-based) is what the judge sees as
    ``<node id="K">``. ``id`` and ``metadata`` are ours; every other deepeval field is kept.
    """

    input: str
    actual_output: str | None = _alias("actualOutput", "actual_output")
    expected_output: str | None = _alias("expectedOutput", "expected_output")
    retrieval_context: list[str] | None = _alias("retrievalContext", "retrieval_context")
    id: str | None = None
    metadata: dict[str, Any] | None = Field(
        default=None, validation_alias=AliasChoices("metadata", "additionalMetadata", "additional_metadata")
    )
    context: list[str] | None = None
    tools_called: list[ToolCall] | None = _alias("toolsCalled", "tools_called")
    expected_tools: list[ToolCall] | None = _alias("expectedTools", "expected_tools")
    comments: str | None = None
    token_cost: float | None = _alias("tokenCost", "token_cost")
    completion_time: float | None = _alias("completionTime", "completion_time")
    flaky: bool = False
    multimodal: bool = False
    name: str | None = None
    tags: list[str] | None = None
    mcp_servers: list[Any] | None = _alias("mcpServers", "mcp_servers")
    mcp_tools_called: list[Any] | None = _alias("mcpToolsCalled", "mcp_tools_called")
    mcp_resources_called: list[Any] | None = _alias("mcpResourcesCalled", "mcp_resources_called")
    mcp_prompts_called: list[Any] | None = _alias("mcpPromptsCalled", "mcp_prompts_called")
    custom_column_key_values: dict[str, str] | None = _alias("customColumnKeyValues", "custom_column_key_values")
    input_token_count: int | None = _alias("inputTokenCount", "input_token_count")
    output_token_count: int | None = _alias("outputTokenCount", "output_token_count")
    expected_labels: dict[str, str] | None = _alias("expectedLabels", "expected_labels")
    expectations: Any = None

    _positional = ("input", "actual_output", "expected_output", "retrieval_context", "id", "metadata")
    _aliases = {
        "actualOutput": "actual_output",
        "expectedOutput": "expected_output",
        "retrievalContext": "retrieval_context",
        "additionalMetadata": "metadata",
        "additional_metadata": "metadata",
        "toolsCalled": "tools_called",
        "expectedTools": "expected_tools",
        "tokenCost": "token_cost",
        "completionTime": "completion_time",
        "mcpServers": "mcp_servers",
        "mcpToolsCalled": "mcp_tools_called",
        "mcpResourcesCalled": "mcp_resources_called",
        "mcpPromptsCalled": "mcp_prompts_called",
        "customColumnKeyValues": "custom_column_key_values",
        "inputTokenCount": "input_token_count",
        "outputTokenCount": "output_token_count",
        "expectedLabels": "expected_labels",
    }

    def __init__(
        self,
        input: Any = _MISSING,
        actual_output: Any = _MISSING,
        expected_output: Any = _MISSING,
        retrieval_context: Any = _MISSING,
        id: Any = _MISSING,
        metadata: Any = _MISSING,
        /,
        **kwargs: Any,
    ) -> None:
        data = _gather(type(self), (input, actual_output, expected_output, retrieval_context, id, metadata), kwargs)
        if "input" not in data:
            raise TestCaseTypeError("'input' is required")
        _check_str(data, "input", "input", required=True)
        _check_str(data, "actual_output", "actual_output")
        _check_str(data, "expected_output", "expected_output")
        _check_str_list(data, "retrieval_context", "retrieval_context")
        _check_str_list(data, "context", "context")
        _check_str_list(data, "tags", "tags")
        _check_id(data)
        _check_dict(data, "metadata", "metadata")
        _tool_calls(data, "tools_called")
        _tool_calls(data, "expected_tools")
        if not data.get("multimodal"):
            texts = [
                data.get("input"),
                data.get("actual_output"),
                data.get("expected_output"),
                *(data.get("retrieval_context") or ()),
                *(data.get("context") or ()),
            ]
            data["multimodal"] = any(_has_image(t) for t in texts)
        self._validated_init(data)

    @classmethod
    def _trusted(
        cls,
        input: str,
        actual_output: str | None,
        expected_output: str | None,
        retrieval_context: list[str],
        id: str | None,
    ) -> LLMTestCase:
        """Build from values already validated (warehouse rows): skips validation, for speed."""
        return cls._fast(
            {
                "input": input,
                "actual_output": actual_output,
                "expected_output": expected_output,
                "retrieval_context": retrieval_context,
                "id": id,
            }
        )


#: agensight's name for the same thing
ModelTestCase = LLMTestCase


class Turn(_CaseModel):
    """One message of a conversation. Assistant turns may carry the nodes they retrieved."""

    role: Literal["user", "assistant"]
    content: str
    retrieval_context: list[str] | None = _alias("retrievalContext", "retrieval_context")
    user_id: str | None = _alias("userId", "user_id")
    tools_called: list[ToolCall] | None = _alias("toolsCalled", "tools_called")
    metadata: dict[str, Any] | None = Field(
        default=None, validation_alias=AliasChoices("metadata", "additionalMetadata", "additional_metadata")
    )
    audio: Any = None
    latency_ms: float | None = _alias("latencyMs", "latency_ms")
    interrupted: bool | None = None
    mcp_tools_called: list[Any] | None = None
    mcp_resources_called: list[Any] | None = None
    mcp_prompts_called: list[Any] | None = None
    provider_transcript: str | None = Field(
        default=None, validation_alias=AliasChoices("providerTranscript", "provider_transcript")
    )

    _positional = ("role", "content", "retrieval_context")
    _aliases = {
        "retrievalContext": "retrieval_context",
        "userId": "user_id",
        "toolsCalled": "tools_called",
        "additionalMetadata": "metadata",
        "additional_metadata": "metadata",
        "latencyMs": "latency_ms",
        "providerTranscript": "provider_transcript",
    }

    def __init__(
        self, role: Any = _MISSING, content: Any = _MISSING, retrieval_context: Any = _MISSING, /, **kwargs: Any
    ) -> None:
        data = _gather(type(self), (role, content, retrieval_context), kwargs)
        if data.get("role") not in ("user", "assistant"):
            raise TestCaseTypeError(f"Turn.role must be 'user' or 'assistant', got {data.get('role')!r}")
        _check_str(data, "content", "Turn.content", required=True)
        _check_str_list(data, "retrieval_context", "Turn.retrieval_context")
        _check_dict(data, "metadata", "Turn.metadata")
        _tool_calls(data, "tools_called")
        self._validated_init(data)

    @classmethod
    def _trusted(cls, role: str, content: str, retrieval_context: list[str] | None) -> Turn:
        return cls._fast({"role": role, "content": content, "retrieval_context": retrieval_context})

    def __repr__(self) -> str:
        parts = [f"role={self.role!r}", f"content={self.content!r}"]
        parts += [f"{k}={v!r}" for k, v in self if k not in ("role", "content") and v is not None]
        return f"Turn({', '.join(parts)})"


def _as_turn(item: Any, i: int) -> Turn:
    """A caller's turn -> our own copy (editing the caller's turn never changes the case)."""
    if isinstance(item, Turn):
        return item.model_copy(deep=True)
    try:
        if isinstance(item, dict):
            return Turn(**item)
        if hasattr(item, "role") and hasattr(item, "content"):  # e.g. deepeval's Turn, read by attribute
            return Turn(**_public_fields(item))
    except InvalidTestCaseError as exc:
        raise TestCaseTypeError(f"turns[{i}]: {exc}") from None
    raise TestCaseTypeError(f"turns[{i}] must be a Turn or a dict, got {_type_name(item)}")


class ConversationalTestCase(_CaseModel):
    """A conversation (list of turns, copied on construction) and the outcome it should reach."""

    turns: list[Turn]
    expected_outcome: str | None = _alias("expectedOutcome", "expected_outcome")
    id: str | None = None
    metadata: dict[str, Any] | None = Field(
        default=None, validation_alias=AliasChoices("metadata", "additionalMetadata", "additional_metadata")
    )
    scenario: str | None = None
    context: list[str] | None = None
    name: str | None = None
    user_description: str | None = _alias("userDescription", "user_description")
    chatbot_role: str | None = _alias("chatbotRole", "chatbot_role")
    comments: str | None = None
    tags: list[str] | None = None
    flaky: bool = False
    mcp_servers: list[Any] | None = None
    multimodal: bool = False
    voice: bool = False
    call_recording_path: str | None = None
    expected_labels: dict[str, str] | None = _alias("expectedLabels", "expected_labels")
    expectations: Any = None

    _positional = ("turns", "expected_outcome", "id", "metadata")
    _aliases = {
        "expectedOutcome": "expected_outcome",
        "additionalMetadata": "metadata",
        "additional_metadata": "metadata",
        "userDescription": "user_description",
        "chatbotRole": "chatbot_role",
        "expectedLabels": "expected_labels",
    }

    def __init__(
        self,
        turns: Any = _MISSING,
        expected_outcome: Any = _MISSING,
        id: Any = _MISSING,
        metadata: Any = _MISSING,
        /,
        **kwargs: Any,
    ) -> None:
        data = _gather(type(self), (turns, expected_outcome, id, metadata), kwargs)
        raw = data.get("turns")
        if raw is None or isinstance(raw, (str, bytes, dict)) or not isinstance(raw, Sequence):
            raise TestCaseTypeError("'turns' must be a list of Turn")
        if len(raw) == 0:
            raise TestCaseTypeError("'turns' must not be empty")
        data["turns"] = [_as_turn(t, i) for i, t in enumerate(raw)]
        _check_str(data, "expected_outcome", "expected_outcome")
        for name in ("scenario", "name", "user_description", "chatbot_role", "comments"):
            _check_str(data, name, name)
        _check_str_list(data, "context", "context")
        _check_str_list(data, "tags", "tags")
        _check_id(data)
        _check_dict(data, "metadata", "metadata")
        if not data.get("multimodal"):
            texts = [data.get("scenario"), data.get("expected_outcome"), data.get("user_description")]
            for t in data["turns"]:
                texts += [t.content, *(t.retrieval_context or ())]
            data["multimodal"] = any(_has_image(t) for t in texts)
        if not data.get("voice"):
            data["voice"] = any(t.audio is not None for t in data["turns"])
        self._validated_init(data)

    @classmethod
    def _trusted(cls, turns: list[Turn], expected_outcome: str, id: str | None) -> ConversationalTestCase:
        return cls._fast({"turns": turns, "expected_outcome": expected_outcome, "id": id})


# -- deepeval's own objects, read by attribute ---------------------------------------------------


def _public_fields(obj: Any) -> dict[str, Any]:
    """The fields of a foreign (e.g. deepeval) pydantic model or plain object, by attribute."""
    fields = getattr(type(obj), "model_fields", None)
    names = list(fields) if isinstance(fields, dict) else [k for k in vars(obj) if not k.startswith("_")]
    out: dict[str, Any] = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        for name in names:
            value = getattr(obj, name, None)
            if value is not None:
                out[name] = value
    return out


def as_llm_test_case(obj: Any) -> LLMTestCase | None:
    """``obj`` as our ``LLMTestCase``: itself, or a copy of a deepeval ``LLMTestCase`` (any object
    with ``input`` and ``retrieval_context`` attributes). None when it is neither."""
    if isinstance(obj, LLMTestCase):
        return obj
    if isinstance(obj, _CaseModel) or not (hasattr(obj, "input") and hasattr(obj, "retrieval_context")):
        return None
    return LLMTestCase(**_public_fields(obj))


def as_conversational_test_case(obj: Any) -> ConversationalTestCase | None:
    """``obj`` as our ``ConversationalTestCase``: itself, or a copy of deepeval's (read by attribute)."""
    if isinstance(obj, ConversationalTestCase):
        return obj
    if isinstance(obj, _CaseModel) or not (hasattr(obj, "turns") and hasattr(obj, "expected_outcome")):
        return None
    return ConversationalTestCase(**_public_fields(obj))
