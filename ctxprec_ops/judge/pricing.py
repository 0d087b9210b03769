"""Per-model token prices (USD per million tokens) and cost arithmetic.

Prices change; override them with ``set_price(model, input, output)`` or the environment
variable ``CTXPREC_PRICES`` (JSON: ``{"my-model": [0.5, 1.5]}``). Unknown model -> cost None.
"""

from __future__ import annotations

from ..config import Settings

__all__ = ["PRICES", "set_price", "price_of", "cost_of", "batch_price_of", "batch_cost_of", "BATCH_DISCOUNT"]

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


def _env_prices() -> dict[str, tuple[float, float]]:
    data = Settings.read("prices")
    try:
        return {str(k): (float(v[0]), float(v[1])) for k, v in data.items()}
    except (ValueError, TypeError, IndexError, KeyError):
        raise ValueError('CTXPREC_PRICES must be JSON like {"model": [input_usd_per_1M, output_usd_per_1M]}') from None


def price_of(model: str) -> tuple[float, float] | None:
    env = _env_prices()
    if model in env:
        return env[model]
    if model in PRICES:
        return PRICES[model]
    # dated snapshots ("gpt-4o-mini-2024-07-18") and provider prefixes ("openai/gpt-4o")
    base = model.split("/")[-1]
    for name in sorted(PRICES, key=len, reverse=True):
        if base == name or base.startswith(name + "-2"):
            return PRICES[name]
    return None


def cost_of(model: str, prompt_tokens: int | None, completion_tokens: int | None) -> float | None:
    price = price_of(model)
    if price is None or prompt_tokens is None or completion_tokens is None:
        return None
    return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1_000_000


def batch_price_of(model: str) -> tuple[float, float] | None:
    """The Batch API price: ``CTXPREC_PRICES["model@batch"]`` when given, else half the list price."""
    env = _env_prices()
    if f"{model}@batch" in env:
        return env[f"{model}@batch"]
    price = price_of(model)
    return None if price is None else (price[0] * BATCH_DISCOUNT, price[1] * BATCH_DISCOUNT)


def batch_cost_of(model: str, prompt_tokens: int | None, completion_tokens: int | None) -> float | None:
    price = batch_price_of(model)
    if price is None or prompt_tokens is None or completion_tokens is None:
        return None
    return (prompt_tokens * price[0] + completion_tokens * price[1]) / 1_000_000
