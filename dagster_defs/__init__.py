"""Dagster integration of ctxprec-ops: ``dagster dev -m dagster_defs`` loads ``defs``."""

from .definitions import defs

__all__ = ["defs"]
