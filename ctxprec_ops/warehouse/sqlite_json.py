"""``dumps``: the SQLite engines' JSON serializer — ``json.dumps``'s text, written directly for the
one JSON value a judged row stores (its verdict list; the label metric hands its verdicts over as
``json_text.JSONText`` instead, which the bulk writers store as it is)."""

from __future__ import annotations

import json
from typing import Any

from ..json_text import verdict_item_json

__all__ = ["dumps"]

_VERDICT_KEYS = ("node", "relevant", "reason")


def dumps(value: Any) -> str:
    """Exactly ``json.dumps(value)``.

    A list of ``{"node": int, "relevant": bool, "reason": str}`` dicts (``ctxprec_scores.verdicts``,
    keys in that order) is written by hand with ``json.dumps``'s separators and its string
    escaping (``ensure_ascii``); anything else goes to ``json.dumps``. The C encoder spends more
    on its per-call set-up and per-item dispatch than on these few short items.
    """
    if type(value) is not list:
        return json.dumps(value)
    parts = []
    for item in value:
        if type(item) is not dict or tuple(item) != _VERDICT_KEYS:
            return json.dumps(value)
        node, relevant, reason = item["node"], item["relevant"], item["reason"]
        if type(node) is not int or type(relevant) is not bool or type(reason) is not str:
            return json.dumps(value)
        parts.append(verdict_item_json(node, relevant, reason))
    return "[" + ", ".join(parts) + "]"
