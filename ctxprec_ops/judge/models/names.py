"""What a judge model name may be: it is sent to the endpoint and stored in every output table
(``judge_model`` is ``varchar(255)``), so it is checked before any call or write."""

from __future__ import annotations

import re

from ...errors import JudgeConfigurationError

__all__ = ["MAX_JUDGE_NAME_CHARS", "reads_images", "validate_judge_name"]

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


# model families that read images, by the name's start (after any provider prefix ``org/`` and a
# fine-tune's ``ft:`` wrapper) or by a word in it
_VISION_PREFIXES = (
    "gpt-4o",
    "chatgpt-4o",
    "gpt-4.1",
    "gpt-4.5",
    "gpt-5",
    "gpt-4-turbo",
    "gpt-4-vision",
    "o1",
    "o3",
    "o4",
    "gemini",
    "claude-3",
    "claude-sonnet-4",
    "claude-opus-4",
    "claude-haiku-4",
    "claude-4",
    "gemma3",
    "gemma-3",
    "llama-4",
    "llama4",
    "pixtral",
    "llava",
    "bakllava",
    "moondream",
    "minicpm-v",
    "internvl",
    "grok-2-vision",
)
_NOT_VISION = ("o1-mini", "o1-preview", "o3-mini", "gpt-4-turbo-preview", "gpt-5-chat-latest-audio")
_VISION_WORDS = re.compile(r"vision|(?:^|[-_.:])vl(?:$|[-_.:])|multimodal|omni")


def reads_images(name: str) -> bool:
    """Whether a model of this name reads images (OpenAI's vision models and the common open
    multimodal families); a name this does not know says False. ``OpenAIJudge(multimodal=...)``
    or ``CTXPREC_JUDGE_MULTIMODAL`` decides for any other name (an Azure deployment, a local model)."""
    base = name.strip().lower()
    if base.startswith("ft:"):
        base = base[3:].split(":", 1)[0]
    base = base.rsplit("/", 1)[-1]
    if base.startswith(_NOT_VISION):
        return False
    return base.startswith(_VISION_PREFIXES) or _VISION_WORDS.search(base) is not None
