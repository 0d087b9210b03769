"""``Turn`` and ``ConversationalTestCase``: a conversation and the outcome it should reach, with
deepeval's field sets, private attributes, checks and coercions (``validation``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import AliasChoices, Field, PrivateAttr, field_serializer

from ..errors import InvalidTestCaseError
from .contexts import check_retrieval_context, dump_items
from .images import MLLMImage, has_placeholder
from .single_turn import ContextItem, has_image, images_in
from .tool_call import ToolCall, coerce_tool_calls
from .validation import (
    MISSING,
    CaseModel,
    TestCaseTypeError,
    TestCaseValidationError,
    alias,
    check_dict,
    check_id,
    check_str,
    check_str_list,
    first_error,
    gather,
    invalid,
    type_name,
)

__all__ = ["ConversationalTestCase", "Turn", "public_fields"]


class Turn(CaseModel):
    """One message of a conversation. Assistant turns may carry the items they retrieved."""

    role: Literal["user", "assistant"]
    content: str
    retrieval_context: list[ContextItem] | None = alias("retrievalContext", "retrieval_context")
    user_id: str | None = alias("userId", "user_id")
    tools_called: list[ToolCall] | None = alias("toolsCalled", "tools_called")
    metadata: dict[str, Any] | None = Field(
        default=None, validation_alias=AliasChoices("metadata", "additionalMetadata", "additional_metadata")
    )
    audio: Any = None
    latency_ms: float | None = alias("latencyMs", "latency_ms")
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
        self, role: Any = MISSING, content: Any = MISSING, retrieval_context: Any = MISSING, /, **kwargs: Any
    ) -> None:
        data = gather(type(self), (role, content, retrieval_context), kwargs)
        # deepeval leaves every Turn check to pydantic: each failure is a ValidationError
        for required in ("role", "content"):
            if required not in data:
                raise invalid("Turn", (required,), f"'Turn.{required}' is required", data, "missing")
        if data.get("role") not in ("user", "assistant"):
            message = f"Turn.role must be 'user' or 'assistant', got {data.get('role')!r}"
            raise invalid("Turn", ("role",), message, data.get("role"), "literal_error")
        check_str(data, "content", "Turn.content", required=True, owner="Turn")
        check_retrieval_context(data, "retrieval_context", "Turn.retrieval_context", owner="Turn")
        check_dict(data, "metadata", "Turn.metadata", owner="Turn")
        coerce_tool_calls(data, "tools_called", owner="Turn")
        self._validated_init(data)

    @field_serializer("retrieval_context")
    def _dump_context(self, items: list[Any] | None) -> list[Any] | None:
        return dump_items(items)

    @classmethod
    def _trusted(cls, role: str, content: str, retrieval_context: list[Any] | None) -> Turn:
        return cls._fast({"role": role, "content": content, "retrieval_context": retrieval_context})

    def __repr__(self) -> str:
        parts = [f"role={self.role!r}", f"content={self.content!r}"]
        parts += [f"{k}={v!r}" for k, v in self if k not in ("role", "content") and v is not None]
        return f"Turn({', '.join(parts)})"


def _as_turn(item: Any, i: int) -> Turn:
    """A caller's turn -> our own copy (editing the caller's turn never changes the case)."""
    if isinstance(item, Turn):
        return item.model_copy(deep=True)
    if isinstance(item, dict) or (hasattr(item, "role") and hasattr(item, "content")):
        try:  # a dict, or e.g. deepeval's Turn read by attribute
            return Turn(**(item if isinstance(item, dict) else public_fields(item)))
        except InvalidTestCaseError as exc:
            detail = first_error(exc) if isinstance(exc, TestCaseValidationError) else str(exc)
            raise TestCaseTypeError(f"Invalid dict for Turn: {item} (turns[{i}]: {detail})") from None
    raise TestCaseTypeError(
        f"'turns' must be a list of Turn or dict, got {type(item)} (turns[{i}] must be a Turn or a dict, "
        f"got {type_name(item)})"
    )


class ConversationalTestCase(CaseModel):
    """A conversation (list of turns, copied on construction) and the outcome it should reach."""

    turns: list[Turn]
    expected_outcome: str | None = alias("expectedOutcome", "expected_outcome")
    id: str | None = None
    metadata: dict[str, Any] | None = Field(
        default=None, validation_alias=AliasChoices("metadata", "additionalMetadata", "additional_metadata")
    )
    scenario: str | None = None
    context: list[str] | None = None
    name: str | None = None
    user_description: str | None = alias("userDescription", "user_description")
    chatbot_role: str | None = alias("chatbotRole", "chatbot_role")
    comments: str | None = None
    tags: list[str] | None = None
    flaky: bool = False
    mcp_servers: list[Any] | None = None
    multimodal: bool = False
    voice: bool = False
    call_recording_path: str | None = None
    expected_labels: dict[str, str] | None = alias("expectedLabels", "expected_labels")
    expectations: Any = None

    # deepeval's private attributes
    _dataset_rank: int | None = PrivateAttr(default=None)
    _dataset_alias: str | None = PrivateAttr(default=None)
    _dataset_id: str | None = PrivateAttr(default=None)
    _dataset_version: str | None = PrivateAttr(default=None)

    _private_defaults = {"_dataset_rank": None, "_dataset_alias": None, "_dataset_id": None, "_dataset_version": None}
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
        turns: Any = MISSING,
        expected_outcome: Any = MISSING,
        id: Any = MISSING,
        metadata: Any = MISSING,
        /,
        **kwargs: Any,
    ) -> None:
        data = gather(type(self), (turns, expected_outcome, id, metadata), kwargs)
        owner = type(self).__name__
        raw = data.get("turns")
        if raw is None or isinstance(raw, (str, bytes, dict)) or not isinstance(raw, Sequence):
            raise TestCaseTypeError(f"'turns' must be a list of Turn or dict, got {type_name(raw)}")
        if len(raw) == 0:
            raise TestCaseTypeError("'turns' must not be empty")
        data["turns"] = [_as_turn(t, i) for i, t in enumerate(raw)]
        check_str(data, "expected_outcome", "expected_outcome", owner=owner)
        for name in ("scenario", "name", "user_description", "chatbot_role", "comments"):
            check_str(data, name, name, owner=owner)
        check_str_list(
            data, "context", "context", deepeval="'context' must be None or a list of strings or RetrievedContextData"
        )
        check_str_list(data, "tags", "tags", owner=owner)
        check_id(data, owner)
        check_dict(data, "metadata", "metadata", owner=owner)
        if not data.get("multimodal"):
            texts = [data.get("scenario"), data.get("expected_outcome"), data.get("user_description")]
            turn_list: list[Turn] = data["turns"]
            data["multimodal"] = any(map(has_placeholder, texts)) or any(
                has_placeholder(t.content) or has_image(t.retrieval_context or []) for t in turn_list
            )
        if not data.get("voice"):
            data["voice"] = any(t.audio is not None for t in data["turns"])
        self._validated_init(data)

    def _get_images_mapping(self) -> dict[str, MLLMImage] | None:
        """The conversation's images by id (deepeval's helper; None when there are none)."""
        texts: list[Any] = [self.scenario, self.expected_outcome, self.user_description, *(self.context or ())]
        for t in self.turns:
            texts += [t.content, *(t.retrieval_context or ())]
        return images_in(texts)

    @classmethod
    def _trusted(
        cls, turns: list[Turn], expected_outcome: str, id: str | None, multimodal: bool = False
    ) -> ConversationalTestCase:
        values: dict[str, Any] = {"turns": turns, "expected_outcome": expected_outcome, "id": id}
        if multimodal:
            values["multimodal"] = True
        return cls._fast(values)


def public_fields(obj: Any) -> dict[str, Any]:
    """The fields of a foreign (e.g. deepeval) pydantic model or plain object, by attribute."""
    import warnings

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
