"""How many answers per node a configuration asks for (``samples``) and how its ``prompt_version``
records it; no pydantic here, so configurations and the CLI's flags check ``samples`` without
loading the verdict models (the voting itself is ``consistency``)."""

from __future__ import annotations

import re
from typing import Any

__all__ = ["DEFAULT_SAMPLE_TEMPERATURE", "check_samples", "sampled_version", "samples_of"]

#: the temperature sampled answers are asked at when the judge was given none above 0
DEFAULT_SAMPLE_TEMPERATURE = 1.0

_SUFFIX = re.compile(r"\+samples=(\d+)$")


def check_samples(samples: Any, name: str = "samples") -> int:
    """``samples`` as an int: odd and at least 1 (``ValueError`` otherwise, naming ``name``)."""
    if isinstance(samples, bool) or not isinstance(samples, int) or samples < 1 or samples % 2 == 0:
        raise ValueError(
            f"{name} must be an odd whole number >= 1 (1 = one answer per node; 3, 5, ... = the majority of "
            f"that many sampled answers; an even count could tie), got {samples!r}"
        )
    return samples


def sampled_version(prompt_version: str, samples: int) -> str:
    """The prompt version a configuration with ``samples`` answers per node records."""
    return prompt_version if samples == 1 else f"{prompt_version}+samples={samples}"


def samples_of(prompt_version: str | None) -> int:
    """The answers per node a recorded ``prompt_version`` was judged with (1 when it does not say)."""
    m = _SUFFIX.search(prompt_version or "")
    return int(m.group(1)) if m else 1
