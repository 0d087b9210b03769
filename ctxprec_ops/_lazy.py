"""Package faces that import on first use (PEP 562): ``from ctxprec_ops import evaluate`` loads
the evaluation code then, not at ``import ctxprec_ops`` — every Airflow task, cron ``ctxprec
check`` and ``--help`` would otherwise pay for pydantic, SQLAlchemy and the rest up front."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(package: str, exports: Mapping[str, str]) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """``__getattr__`` and ``__dir__`` for ``package`` whose public ``name`` lives in
    ``exports[name]`` (a module relative to the package, e.g. ``".run"``). A name is imported
    once, then kept in the package's namespace."""

    def __getattr__(name: str) -> Any:
        module = exports.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list[str]:
        return sorted({*vars(sys.modules[package]), *exports})

    return __getattr__, __dir__
