"""``LLMTestCase``: one retrieval — the query, the ranked retrieved items, the expected answer —
with deepeval's field set, private attributes, checks and coercions (``validation``)."""

from __future__ import annotations

from typing import Any

from pydantic import AliasChoices, Field, InstanceOf, PrivateAttr, field_serializer

from .contexts import RetrievedContextData, check_retrieval_context, dump_items
from .images import MLLMImage, has_placeholder, image_for
from .tool_call import ToolCall, coerce_tool_calls
from .validation import (
    MISSING,
    CaseModel,
    alias,
    check_dict,
    check_id,
    check_str,
    check_str_dict,
    check_str_list,
    gather,
    invalid,
)

__all__ = ["LLMTestCase", "ModelTestCase", "ContextItem", "images_in", "has_image"]

# deepeval's messages for these fields
_KEY_VALUES = "'custom_column_key_values' must be None or a Dict[str, str]"
_LABELS = "'expected_labels' must be None or a Dict[str, str] mapping classifier name to label"

#: one item of ``retrieval_context``
ContextItem = str | RetrievedContextData | InstanceOf[MLLMImage]


def images_in(texts: list[Any]) -> dict[str, MLLMImage] | None:
    """The images named by placeholders in ``texts`` or standing among them, by id (None: none)."""
    from .images import IMAGE_PLACEHOLDER

    found: dict[str, MLLMImage] = {}
    for t in texts:
        if isinstance(t, RetrievedContextData):
            t = t.context
        if isinstance(t, MLLMImage):
            found[t._id] = t
        elif has_placeholder(t):
            for m in IMAGE_PLACEHOLDER.finditer(t):
                image = image_for(m.group(2))
                if image is not None:
                    found[m.group(2)] = image
    return found or None


def has_image(items: list[Any]) -> bool:
    """Whether any of ``items`` is an image or names one by placeholder."""
    for t in items:
        if isinstance(t, MLLMImage) or has_placeholder(t.context if isinstance(t, RetrievedContextData) else t):
            return True
    return False


class LLMTestCase(CaseModel):
    """One retrieval: the query, the ranked retrieved nodes, and the answer it should lead to.

    ``retrieval_context`` is ranked best first: strings, ``MLLMImage`` nodes, or
    ``RetrievedContextData`` items (grouped by source into one node, see ``contexts``); node K
    (1-based, after grouping) is what the judge sees as ``<node id="K">``. ``id`` and
    ``metadata`` are ours; every other deepeval field is kept.
    """

    input: str
    actual_output: str | None = alias("actualOutput", "actual_output")
    expected_output: str | None = alias("expectedOutput", "expected_output")
    retrieval_context: list[ContextItem] | None = alias("retrievalContext", "retrieval_context")
    id: str | None = None
    metadata: dict[str, Any] | None = Field(
        default=None, validation_alias=AliasChoices("metadata", "additionalMetadata", "additional_metadata")
    )
    context: list[str] | None = None
    tools_called: list[ToolCall] | None = alias("toolsCalled", "tools_called")
    expected_tools: list[ToolCall] | None = alias("expectedTools", "expected_tools")
    comments: str | None = None
    token_cost: float | None = alias("tokenCost", "token_cost")
    completion_time: float | None = alias("completionTime", "completion_time")
    flaky: bool = False
    multimodal: bool = False
    name: str | None = None
    tags: list[str] | None = None
    mcp_servers: list[Any] | None = alias("mcpServers", "mcp_servers")
    mcp_tools_called: list[Any] | None = alias("mcpToolsCalled", "mcp_tools_called")
    mcp_resources_called: list[Any] | None = alias("mcpResourcesCalled", "mcp_resources_called")
    mcp_prompts_called: list[Any] | None = alias("mcpPromptsCalled", "mcp_prompts_called")
    custom_column_key_values: dict[str, str] | None = alias("customColumnKeyValues", "custom_column_key_values")
    input_token_count: int | None = alias("inputTokenCount", "input_token_count")
    output_token_count: int | None = alias("outputTokenCount", "output_token_count")
    expected_labels: dict[str, str] | None = alias("expectedLabels", "expected_labels")
    expectations: Any = None

    # deepeval's private attributes (its evaluation code and plugins read them)
    _trace_dict: dict | None = PrivateAttr(default=None)
    _dataset_rank: int | None = PrivateAttr(default=None)
    _dataset_alias: str | None = PrivateAttr(default=None)
    _dataset_id: str | None = PrivateAttr(default=None)
    _dataset_version: str | None = PrivateAttr(default=None)
    _identifier: str | None = PrivateAttr(default=None)  # a uuid4 text (``validation._LazyPrivate``)

    _private_defaults = {
        "_trace_dict": None,
        "_dataset_rank": None,
        "_dataset_alias": None,
        "_dataset_id": None,
        "_dataset_version": None,
        "_identifier": None,
    }
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
        input: Any = MISSING,
        actual_output: Any = MISSING,
        expected_output: Any = MISSING,
        retrieval_context: Any = MISSING,
        id: Any = MISSING,
        metadata: Any = MISSING,
        /,
        **kwargs: Any,
    ) -> None:
        data = gather(type(self), (input, actual_output, expected_output, retrieval_context, id, metadata), kwargs)
        owner = type(self).__name__
        if "input" not in data:
            raise invalid(owner, ("input",), "'input' is required", data, "missing")
        if data["input"] is None:  # deepeval: pydantic's error; another type: deepeval's TypeError
            raise invalid(owner, ("input",), "'input' must be a string, got NoneType", None, "string_type")
        check_str(data, "input", "input", required=True)
        check_str(data, "actual_output", "actual_output")
        check_str(data, "expected_output", "expected_output", owner=owner)
        check_retrieval_context(data, "retrieval_context", "retrieval_context")
        check_str_list(data, "context", "context", deepeval="'context' must be None or a list of strings")
        check_str_list(data, "tags", "tags", owner=owner)
        check_id(data, owner)
        check_dict(data, "metadata", "metadata", owner=owner)
        coerce_tool_calls(data, "tools_called")
        coerce_tool_calls(data, "expected_tools")
        check_str_dict(data, "custom_column_key_values", _KEY_VALUES)
        check_str_dict(data, "expected_labels", _LABELS)
        if not data.get("multimodal"):
            texts = [data.get("input"), data.get("actual_output"), data.get("expected_output")]
            texts += data.get("context") or ()
            data["multimodal"] = any(map(has_placeholder, texts)) or has_image(data.get("retrieval_context") or [])
        self._validated_init(data)

    @field_serializer("retrieval_context")
    def _dump_context(self, items: list[Any] | None) -> list[Any] | None:
        return dump_items(items)

    def _get_images_mapping(self) -> dict[str, MLLMImage] | None:
        """The case's images by id (deepeval's helper; None when there are none)."""
        texts: list[Any] = [self.input, self.actual_output, self.expected_output, *(self.context or ())]
        return images_in(texts + list(self.retrieval_context or ()))

    @classmethod
    def _trusted(
        cls,
        input: str,
        actual_output: str | None,
        expected_output: str | None,
        retrieval_context: list[Any],
        id: str | None,
        multimodal: bool = False,
    ) -> LLMTestCase:
        """Build from values already validated (warehouse rows): skips validation, for speed."""
        values: dict[str, Any] = {
            "input": input,
            "actual_output": actual_output,
            "expected_output": expected_output,
            "retrieval_context": retrieval_context,
            "id": id,
        }
        if multimodal:
            values["multimodal"] = True
        return cls._fast(values)


#: agensight's name for the same thing
ModelTestCase = LLMTestCase
