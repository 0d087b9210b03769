"""What a run setting allows: its bounds or its choices, declared once on its ``PipelineConfig``
field (``setting(default, ge=1)``) and applied by every reader of it — ``PipelineConfig`` itself,
``ctxprec_ops.config.Settings`` (the environment and every face: CLI flags, Airflow params, Dagster
resources) and the CLI's ``--help``. No pydantic here: the CLI's parsers read these without it.
"""

from __future__ import annotations

import math
from dataclasses import Field, dataclass, field, fields
from typing import Any

__all__ = ["Bounds", "bounds_of", "check_bounds", "setting"]


@dataclass(frozen=True)
class Bounds:
    """A number's bounds (``ge``/``gt``/``le``/``lt``; ``integer``: an ``int``; ``odd``: an odd one), or
    a text's ``choices``. ``None`` always passes: an optional setting that is unset."""

    ge: float | None = None
    gt: float | None = None
    le: float | None = None
    lt: float | None = None
    integer: bool = False
    odd: bool = False
    choices: tuple[str, ...] = ()

    def describe(self) -> str:
        """What is allowed, in words: ``"at least 1"``, ``"between 0 and 1"``, ``"> 0 and <= 1"``,
        ``"one of sync, batch"``, ``"an odd whole number >= 1"`` ("" when anything is)."""
        if self.choices:
            return f"one of {', '.join(self.choices)}"
        if self.odd:
            return f"an odd whole number >= {_num(self.ge if self.ge is not None else 1)}"
        if self.ge is not None and self.le is not None:
            return f"between {_num(self.ge)} and {_num(self.le)}"
        if self.ge is not None:
            return f"at least {_num(self.ge)}"
        if self.gt is not None and self.lt is not None:
            return f"between {_num(self.gt)} and {_num(self.lt)} (exclusive)"
        parts = [f"{op} {_num(v)}" for op, v in ((">", self.gt), ("<=", self.le), ("<", self.lt)) if v is not None]
        return " and ".join(parts)

    def problem(self, value: Any) -> str | None:
        """What is wrong with ``value`` (``"must be ..."``), or None when it is allowed."""
        if value is None:
            return None
        if self.choices:
            return None if value in self.choices else f"must be {self.describe()}"
        number = "a whole number" if self.integer else "a number"
        if isinstance(value, bool) or not isinstance(value, int if self.integer else (int, float)):
            return f"must be {number}"
        if math.isnan(value):
            return f"must be {number}"
        if (
            (self.ge is not None and not value >= self.ge)
            or (self.gt is not None and not value > self.gt)
            or (self.le is not None and not value <= self.le)
            or (self.lt is not None and not value < self.lt)
            or (self.odd and value % 2 != 1)
        ):
            return f"must be {self.describe()}"
        return None

    def check(self, name: str, value: Any) -> None:
        """``ValueError`` naming ``name`` when ``value`` is not allowed."""
        problem = self.problem(value)
        if problem is not None:
            raise ValueError(f"{name} {problem}, got {value!r}")

    def json_schema(self) -> dict[str, Any]:
        """The JSON-schema keywords of these bounds (Airflow params, Dagster config, docs)."""
        out: dict[str, Any] = {}
        if self.choices:
            out["enum"] = list(self.choices)
        pairs = (
            ("minimum", self.ge),
            ("exclusiveMinimum", self.gt),
            ("maximum", self.le),
            ("exclusiveMaximum", self.lt),
        )
        for key, value in pairs:
            if value is not None:
                out[key] = value
        return out


def _num(v: float) -> str:
    return str(int(v)) if float(v).is_integer() else str(v)


def setting(default: Any = None, **bounds: Any) -> Any:
    """A ``PipelineConfig`` field whose value must keep ``Bounds(**bounds)`` (its default too)."""
    meta = {"bounds": Bounds(**bounds)}
    if isinstance(default, (dict, list)):
        return field(default_factory=lambda: type(default)(default), metadata=meta)
    return field(default=default, metadata=meta)


def bounds_of(f: Field) -> Bounds:
    """The bounds a field was declared with (none: ``Bounds()``, which allows anything)."""
    return f.metadata.get("bounds") or Bounds()


def check_bounds(obj: Any) -> None:
    """Check every bounded field of the dataclass instance ``obj`` (``ValueError`` naming it)."""
    for f in fields(obj):
        b = f.metadata.get("bounds")
        if b is not None:
            b.check(f.name, getattr(obj, f.name))
