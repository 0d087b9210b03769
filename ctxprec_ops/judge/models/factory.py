"""``make_judge``: a judge from a name (``"lexical"``, an OpenAI-compatible model) or a model object."""

from __future__ import annotations

from ...errors import JudgeConfigurationError
from .. import defaults
from .base import CustomModelJudge, JudgeModel
from .lexical import LexicalJudge
from .openai_judge import OpenAIJudge

__all__ = ["make_judge", "resolve_judge"]


def make_judge(
    name: str | JudgeModel | None = None,
    *,
    base_url: str | None = None,
    api_key: str | None = None,
    timeout: float = defaults.JUDGE_TIMEOUT,
    **kwargs,
) -> JudgeModel:
    """A judge from a name: ``"lexical"`` or an OpenAI-compatible model name.

    ``None``: the configured default judge (``defaults.configured_judge``: ``CTXPREC_JUDGE``, else
    ``gpt-4o-mini`` when ``OPENAI_API_KEY`` is set, else ``lexical``). A ``JudgeModel`` instance is
    returned as is.
    """
    if isinstance(name, JudgeModel):
        return name
    if not isinstance(name, str) and name is not None and CustomModelJudge.fits(name):
        return CustomModelJudge(name)  # a deepeval-style custom model (e.g. a DeepEvalBaseLLM)
    if name is None:
        name = defaults.configured_judge()
    if not isinstance(name, str) or not name.strip():
        raise JudgeConfigurationError(
            f"model must be a model name, 'lexical', a JudgeModel or a deepeval-style model (get_model_name, "
            f"generate, a_generate), got {type(name).__name__}"
        )
    name = name.strip()
    if name.lower() == "lexical":
        return LexicalJudge()
    return OpenAIJudge(name, base_url=base_url, api_key=api_key, timeout=timeout, **kwargs)


def resolve_judge(model: str | JudgeModel | None) -> JudgeModel:
    """What a metric's ``model=`` argument means (deepeval semantics plus ``"lexical"``)."""
    return make_judge(model)
