"""The metrics' stored names (``ctxprec_scores.metric``), in a module that imports nothing: the
metric-kind registry and the CLI's parsers read them without loading a metric (or pydantic)."""

from __future__ import annotations

__all__ = ["CONTEXTUAL_PRECISION", "TURN_CONTEXTUAL_PRECISION", "LABEL_CONTEXTUAL_PRECISION"]

CONTEXTUAL_PRECISION = "contextual_precision"
TURN_CONTEXTUAL_PRECISION = "turn_contextual_precision"
LABEL_CONTEXTUAL_PRECISION = "label_contextual_precision"
