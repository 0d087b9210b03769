"""A run's spending cap, shared by every concurrent judge call of the run."""

from __future__ import annotations

import threading

from ..errors import BudgetExhaustedError

__all__ = ["Budget"]


class Budget:
    """Reserve an estimated cost before a judge call, settle the real cost after it.

    A call is only started when ``spent + reserved + estimate <= max_cost``; otherwise
    ``BudgetExhaustedError`` is raised for that case (the pipeline records it as a
    ``budget_exhausted`` failure that a later run picks up). Thread-safe: one budget can span
    the chunks of a partition.
    """

    def __init__(self, max_cost: float) -> None:
        if max_cost < 0:
            raise ValueError("max_cost must be >= 0")
        self.max_cost = float(max_cost)
        self.spent = 0.0
        self.reserved = 0.0
        self.refused = 0
        self._lock = threading.Lock()

    def reserve(self, estimate: float) -> float:
        with self._lock:
            if self.spent + self.reserved + estimate > self.max_cost:
                self.refused += 1
                raise BudgetExhaustedError(
                    f"run budget exhausted: spent ${self.spent:.4f} of ${self.max_cost:.4f}; "
                    f"this judge call needs about ${estimate:.4f}"
                )
            self.reserved += estimate
            return estimate

    def settle(self, reserved: float, actual: float | None) -> None:
        with self._lock:
            self.reserved = max(0.0, self.reserved - reserved)
            self.spent += reserved if actual is None else actual
