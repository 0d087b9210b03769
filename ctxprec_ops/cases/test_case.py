"""Test cases: the data a metric scores, as pydantic models with deepeval's field set.

``LLMTestCase``, ``Turn`` and ``ConversationalTestCase`` accept every field deepeval's classes
accept (snake_case or camelCase), keep the ones contextual precision does not use so they
round-trip through ``model_dump()``, carry deepeval's private attributes (``_trace_dict``,
``_dataset_rank``, ``_identifier``, ...), and validate when the case is built with deepeval's
error types and messages (``validation``). Positional arguments follow DESIGN.md:
``LLMTestCase(input, actual_output, expected_output, retrieval_context, id, metadata)``,
``Turn(role, content, retrieval_context)``, ``ConversationalTestCase(turns, expected_outcome, id,
metadata)``.

The parts, by what they do: ``single_turn`` (``LLMTestCase``), ``conversational`` (``Turn``,
``ConversationalTestCase``), ``tool_call`` (``ToolCall``), ``images`` (``MLLMImage``),
``contexts`` (``RetrievedContextData`` and the nodes grouped by source), ``validation`` (the
shared checks and error types), ``foreign`` (deepeval's objects read by attribute). This module
re-exports them under the names it always had.
"""

from __future__ import annotations

from .contexts import RetrievedContextData
from .conversational import ConversationalTestCase, Turn
from .conversational import public_fields as _public_fields
from .foreign import as_conversational_test_case, as_llm_test_case
from .images import MLLMImage
from .params import MultiTurnParams, SingleTurnParams, ToolCallParams
from .single_turn import LLMTestCase, ModelTestCase
from .tool_call import ToolCall, ToolCallType
from .validation import CaseModel as _CaseModel
from .validation import TestCaseTypeError, TestCaseValidationError

__all__ = [
    "ConversationalTestCase",
    "LLMTestCase",
    "MLLMImage",
    "ModelTestCase",
    "MultiTurnParams",
    "RetrievedContextData",
    "SingleTurnParams",
    "TestCaseTypeError",
    "TestCaseValidationError",
    "ToolCall",
    "ToolCallParams",
    "ToolCallType",
    "Turn",
    "as_conversational_test_case",
    "as_llm_test_case",
    "_CaseModel",
    "_public_fields",
]
