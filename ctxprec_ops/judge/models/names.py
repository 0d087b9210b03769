"""What a judge model name may be: it is sent to the endpoint and stored in every output table
(``judge_model`` is ``varchar(255)``), so it is checked before any call or write."""

from __future__ import annotations

import re

from ...errors import JudgeConfigurationError

__all__ = ["MAX_JUDGE_NAME_CHARS", "validate_judge_name"]

#: the length of the ``judge_model`` columns of the output tables
MAX_JUDGE_NAME_CHARS = 255
# model ids in the wild: gpt-4o-mini, ft:gpt-4o:org:x:id, meta-llama/Llama-3-8B, llama3.1:8b-q4_K_M,
# anthropic/claude-3.5-sonnet:beta, an Azure deployment name
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+~\-]*")


def validate_judge_name(name: str) -> str:
    """``name`` if it is a usable model name, else ``JudgeConfigurationError`` (one line)."""
    if not isinstance(name, str) or not name:
        raise JudgeConfigurationError("the judge model name must be a non-empty string")
    if len(name) > MAX_JUDGE_NAME_CHARS:
        raise JudgeConfigurationError(
            f"the judge model name is {len(name):,} characters long (limit {MAX_JUDGE_NAME_CHARS}): {name[:40]!r}..."
        )
    if not _NAME.fullmatch(name):
        raise JudgeConfigurationError(
            f"the judge model name {name[:80]!r} may only contain letters, digits and "
            ". _ : / @ + ~ - (starting with a letter or digit)"
        )
    return name
