"""deepeval's names for test-case fields (custom metrics list the fields they need with these).

``LLMTestCaseParams`` and ``TurnParams`` are deepeval's older names: importing them from this
module warns (``DeprecationWarning``) and gives the new enums, as deepeval does.
"""

from __future__ import annotations

import warnings
from enum import Enum
from typing import Any

__all__ = ["SingleTurnParams", "MultiTurnParams", "ToolCallParams"]


class SingleTurnParams(Enum):
    INPUT = "input"
    ACTUAL_OUTPUT = "actual_output"
    EXPECTED_OUTPUT = "expected_output"
    CONTEXT = "context"
    RETRIEVAL_CONTEXT = "retrieval_context"
    METADATA = "metadata"
    TAGS = "tags"
    TOOLS_CALLED = "tools_called"
    EXPECTED_TOOLS = "expected_tools"
    MCP_SERVERS = "mcp_servers"
    MCP_TOOLS_CALLED = "mcp_tools_called"
    MCP_RESOURCES_CALLED = "mcp_resources_called"
    MCP_PROMPTS_CALLED = "mcp_prompts_called"


class MultiTurnParams(Enum):
    ROLE = "role"
    CONTENT = "content"
    PROVIDER_TRANSCRIPT = "provider_transcript"
    AUDIO = "audio"
    METADATA = "metadata"
    TAGS = "tags"
    SCENARIO = "scenario"
    EXPECTED_OUTCOME = "expected_outcome"
    CONTEXT = "context"
    USER_DESCRIPTION = "user_description"
    RETRIEVAL_CONTEXT = "retrieval_context"
    CHATBOT_ROLE = "chatbot_role"
    TOOLS_CALLED = "tools_called"
    MCP_TOOLS = "mcp_tools_called"
    MCP_RESOURCES = "mcp_resources_called"
    MCP_PROMPTS = "mcp_prompts_called"


class ToolCallParams(Enum):
    INPUT_PARAMETERS = "input_parameters"
    OUTPUT = "output"


_DEPRECATED = {"LLMTestCaseParams": SingleTurnParams, "TurnParams": MultiTurnParams}


def __getattr__(name: str) -> Any:
    if name in _DEPRECATED:
        new = _DEPRECATED[name]
        warnings.warn(f"'{name}' is deprecated: use '{new.__name__}'", DeprecationWarning, stacklevel=2)
        return new
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
