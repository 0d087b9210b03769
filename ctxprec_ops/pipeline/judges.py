"""The judges a run calls, built from its configuration: the one named by ``judge`` and, for a
cascade, the strong one named by ``escalate_to`` (same endpoint, key and timeout; each at its own
price)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ..judge.models.base import JudgeModel

__all__ = ["JudgeSettings", "build_judge"]


class JudgeSettings(Protocol):
    """What building a judge reads from a run's configuration (``PipelineConfig`` has it all)."""

    judge: Any
    prices: Mapping[str, tuple[float, float]]
    judge_multimodal: bool | None
    judge_base_url: str | None
    judge_api_key: str | None
    judge_timeout: float


def build_judge(config: JudgeSettings, model: str | JudgeModel | None = None) -> JudgeModel:
    """The judge a run of ``config`` calls: named (or given) by ``config.judge`` (``model``: another,
    a cascade's strong judge), at its endpoint with its key and timeout, reading images or not
    (``judge_multimodal``), at its price in ``config.prices`` when that names it (else the list price)."""
    from ..judge.models import make_judge

    name = config.judge if model is None else model
    extra: dict[str, object] = {}
    if isinstance(name, str):
        price = config.prices.get(name.strip())
        if price is not None:
            extra["price_per_million"] = price
        if config.judge_multimodal is not None:
            extra["multimodal"] = config.judge_multimodal
    return make_judge(
        name,
        base_url=config.judge_base_url,
        api_key=config.judge_api_key,
        timeout=config.judge_timeout,
        **extra,
    )
