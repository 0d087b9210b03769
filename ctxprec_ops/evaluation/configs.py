"""deepeval's ``evaluate()`` configuration objects, under the same names and fields.

``evaluate`` reads them by attribute, so deepeval's own config instances work as well. What each
field means here is in docs/migrating-from-deepeval.md.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["AsyncConfig", "CacheConfig", "DisplayConfig", "ErrorConfig"]


@dataclass
class AsyncConfig:
    """``max_concurrent`` becomes ``evaluate(concurrency=...)``: judge requests in flight at most."""

    run_async: bool = True
    throttle_value: float = 0
    max_concurrent: int = 20

    def __post_init__(self) -> None:
        if self.max_concurrent < 1:
            raise ValueError("'max_concurrent' must be at least 1")
        if self.throttle_value < 0:
            raise ValueError("'throttle_value' must be at least 0")


@dataclass
class DisplayConfig:
    """``show_indicator`` shows the progress bar; ``print_results`` prints one line per case."""

    show_indicator: bool = True
    print_results: bool = True
    verbose_mode: bool | None = None
    display_option: Any = None
    results_folder: str | None = None
    results_subfolder: str | None = None
    truncate_passing_cases: bool = True
    inspect_after_run: bool = True
    file_type: str | None = None
    file_output_dir: str | None = None


@dataclass
class ErrorConfig:
    """Accepted for compatibility: a failing case never aborts ``evaluate`` here (its error is in
    its result), which is deepeval's ``ignore_errors=True``. ``skip_on_missing_params=True``
    leaves cases with missing fields out of ``test_results`` instead of listing their error."""

    ignore_errors: bool = False
    skip_on_missing_params: bool = False


@dataclass
class CacheConfig:
    """Accepted for compatibility; pass ``cache=`` (a ``VerdictCache``) to reuse verdicts."""

    write_cache: bool = True
    use_cache: bool = False
