"""Judges: the OpenAI-compatible LLM judge, the offline lexical judge, and custom ones.

A lazy face (``ctxprec_ops._lazy``): ``names`` (what a model name may be) imports without the
judges, pydantic or openai.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..._lazy import lazy_exports

if TYPE_CHECKING:
    from .base import CustomModelJudge, DeepEvalBaseLLM, Generation, JudgeModel
    from .factory import make_judge, resolve_judge
    from .lexical import LexicalJudge
    from .openai_judge import OpenAIJudge

__all__ = [
    "CustomModelJudge",
    "DeepEvalBaseLLM",
    "Generation",
    "JudgeModel",
    "LexicalJudge",
    "OpenAIJudge",
    "make_judge",
    "resolve_judge",
]

#: public name -> its module (imported on first use)
_EXPORTS = {
    "CustomModelJudge": ".base",
    "DeepEvalBaseLLM": ".base",
    "Generation": ".base",
    "JudgeModel": ".base",
    "LexicalJudge": ".lexical",
    "OpenAIJudge": ".openai_judge",
    "make_judge": ".factory",
    "resolve_judge": ".factory",
}

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
