"""deepeval's own test-case objects, read by attribute (ctxprec-ops never imports deepeval)."""

from __future__ import annotations

from typing import Any

from .conversational import ConversationalTestCase, public_fields
from .single_turn import LLMTestCase
from .validation import CaseModel

__all__ = ["as_conversational_test_case", "as_llm_test_case"]


def as_llm_test_case(obj: Any) -> LLMTestCase | None:
    """``obj`` as our ``LLMTestCase``: itself, or a copy of a deepeval ``LLMTestCase`` (any object
    with ``input`` and ``retrieval_context`` attributes). None when it is neither."""
    if isinstance(obj, LLMTestCase):
        return obj
    if isinstance(obj, CaseModel) or not (hasattr(obj, "input") and hasattr(obj, "retrieval_context")):
        return None
    return LLMTestCase(**public_fields(obj))


def as_conversational_test_case(obj: Any) -> ConversationalTestCase | None:
    """``obj`` as our ``ConversationalTestCase``: itself, or a copy of deepeval's (read by attribute)."""
    if isinstance(obj, ConversationalTestCase):
        return obj
    if isinstance(obj, CaseModel) or not (hasattr(obj, "turns") and hasattr(obj, "expected_outcome")):
        return None
    return ConversationalTestCase(**public_fields(obj))
