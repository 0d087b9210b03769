"""Per-model token prices (USD per million tokens) and cost arithmetic.

Prices change; override them per call with ``prices`` (``{"my-model": (0.5, 1.5)}``, batch prices
under ``"my-model@batch"``: the pipeline passes ``PipelineConfig.prices``, from ``CTXPREC_PRICES``)
or for the process with ``set_price(model, input, output)``. Unknown model -> cost None.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "PRICES",
    "Prices",
    "set_price",
    "parse_prices",
    "price_of",
    "cost_of",
    "batch_price_of",
    "batch_cost_of",
    "BATCH_DISCOUNT",
]

#: model (or ``model@batch``) -> (input, output) USD per 1M tokens
Prices = Mapping[str, tuple[float, float]]

#: the Batch API's price as a share of the list price (OpenAI, Azure OpenAI: half)
BATCH_DISCOUNT = 0.5

#: (input, output) USD per 1M tokens — public list prices at the time of writing
PRICES: dict[str, tuple[float, float]] = {
    "gpt-4o-mini": (0.15, 0.60),
    "gpt-4o": (2.50, 10.00),
    "gpt-4.1": (2.00, 8.00),
    "gpt-4.1-mini": (0.40, 1.60),
    "gpt-4.1-nano": (0.10, 0.40),
    "gpt-5": (1.25, 10.00),
    "gpt-5-mini": (0.25, 2.00),
    "gpt-5-nano": (0.05, 0.40),
    "o3-mini": (1.10, 4.40),
    "o4-mini": (1.10, 4.40),
    "lexical": (0.0, 0.0),
}


def set_price(model: str, input_per_million: float, output_per_million: float) -> None:
    if input_per_million < 0 or output_per_million < 0:
        raise ValueError("prices must be >= 0")
    PRICES[model] = (float(input_per_million), float(output_per_million))


def parse_prices(data: Any, name: str = "prices") -> dict[str, tuple[float, float]]:
    """``{"model": [input, output], ...}`` as ``{model: (input, output)}`` (``ValueError`` naming
    ``name`` when it has another shape or a negative price)."""
    try:
        out = {str(k): (float(v[0]), float(v[1])) for k, v in dict(data or {}).items()}
    except (ValueError, TypeError, IndexError, KeyError):
        raise ValueError(
            f'{name} must be JSON like {{"model": [input_usd_per_1M, output_usd_per_1M]}}, got {data!r}'
        ) from None
    if any(len(v) != 2 for v in dict(data or {}).values()) or any(p < 0 for pair in out.values() for p in pair):
        raise ValueError(f"{name} must give two prices >= 0 per model, got {data!r}")
    return out


def price_of(model: str, prices: Prices | None = None) -> tuple[float, float] | None:
    """``prices[model]``, else the list price of ``model`` (or of its base name), else None."""
    if prices and model in prices:
        return prices[model]
    if model in PRICES:
        return PRICES[model]
    # dated snapshots ("gpt-4o-mini-2024-07-18") and provider prefixes ("openai/gpt-4o")
    base = model.split("/")[-1]
    for name in sorted(PRICES, key=len, reverse=True):
        if base == name or base.startswith(name + "-2"):
            return PRICES[name]
    return None


def cost_of(
    model: str, prompt_tokens: int | None, completion_tokens: int | None, prices: Prices | None = None
) -> float | None:
    price = price_of(model, prices)
    if price is None or prompt_tokens is None or completion_tokens is None:
        return None
    return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1_000_000


def batch_price_of(model: str, prices: Prices | None = None) -> tuple[float, float] | None:
    """The Batch API price: ``prices["model@batch"]`` when given, else half the price."""
    if prices and f"{model}@batch" in prices:
        return prices[f"{model}@batch"]
    price = price_of(model, prices)
    return None if price is None else (price[0] * BATCH_DISCOUNT, price[1] * BATCH_DISCOUNT)


def batch_cost_of(
    model: str, prompt_tokens: int | None, completion_tokens: int | None, prices: Prices | None = None
) -> float | None:
    price = batch_price_of(model, prices)
    if price is None or prompt_tokens is None or completion_tokens is None:
        return None
    return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1_000_000
