"""``JSONText``: a value for a JSON column that is already serialized.

The label metric writes millions of verdict lists; building their JSON text directly is about 3x
cheaper than building dicts for ``json.dumps``. The warehouse's bulk writers
(``warehouse.upsert``) store a ``JSONText`` as it is, and decode it for any other write path, so
the stored JSON is the same either way.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from json.encoder import encode_basestring_ascii

__all__ = ["JSONText", "verdicts_json", "verdict_item_json", "plain_ids", "plain_verdicts_template"]


class JSONText(str):
    """Serialized JSON (exactly what ``json.dumps`` would write) for a JSON column."""

    __slots__ = ()


_BOOL = ("false", "true")


def verdict_item_json(node: int, relevant: bool, reason: str) -> str:
    """``json.dumps({"node": node, "relevant": relevant, "reason": reason})``, built as text."""
    return f'{{"node": {node}, "relevant": {_BOOL[relevant]}, "reason": {encode_basestring_ascii(reason)}}}'


@cache
def _verdicts_template(k: int) -> str:
    """The JSON text of ``k`` verdicts with ``%s`` for each one's flag and reason, in order."""
    items = ", ".join(f'{{"node": {n}, "relevant": %s, "reason": %s}}' for n in range(1, k + 1))
    return f"[{items}]"


def verdicts_json(reasons: Sequence[str], relevant: Sequence[bool]) -> JSONText:
    """``json.dumps([{"node": k, "relevant": r, "reason": reason}, ...])`` with k = 1, 2, ...,
    built as text: one ``%`` over the template of ``k`` verdicts (``verdict_item_json`` per item
    cost 3x more for the label metric's millions of lists)."""
    k = min(len(reasons), len(relevant))
    values: list[str] = [""] * (2 * k)
    values[0::2] = [_BOOL[r] for r in relevant[:k]]
    values[1::2] = map(encode_basestring_ascii, reasons[:k])
    return JSONText(_verdicts_template(k) % tuple(values))


def plain_ids(ids: Sequence[str]) -> bool:
    """Whether every id is printable ASCII without ``"`` or ``\\``: JSON-encoded, such an id is
    itself in quotes (what ``plain_verdicts_template`` relies on)."""
    joined = "".join(ids)
    return joined.isascii() and joined.isprintable() and '"' not in joined and "\\" not in joined


def plain_verdicts_template(relevant: Sequence[bool]) -> str:
    """The JSON text of verdicts with these flags and ``"%s"`` for each reason: ``template %
    tuple(reasons)`` is ``verdicts_json(reasons, relevant)`` when ``plain_ids(reasons)``."""
    items = ", ".join(f'{{"node": {n}, "relevant": {_BOOL[r]}, "reason": "%s"}}' for n, r in enumerate(relevant, 1))
    return f"[{items}]"
