"""Turn a labelled log row (``retrieved_ids``, ``relevant_ids``) into a ``LabelledRetrieval``.

Both columns are JSON arrays (JSON type or JSON text) of string or integer ids. Problems raise
``InvalidTestCaseError`` naming the column: NULL, not JSON, not an array, an id that is not a
string or an integer, an empty ``retrieved_ids``, more than ``MAX_IDS`` retrieved ids, an id
listed twice in ``retrieved_ids``. An empty ``relevant_ids`` is valid (nothing relevant: score 0).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from ..errors import InvalidTestCaseError
from ..metrics.label_precision import MAX_IDS, LabelledRetrieval

__all__ = ["row_to_labelled"]


# the C scanner behind json.loads, minus its wrappers (typeshed does not declare the attribute)
_scan: Callable[[str, int], tuple[Any, int]] = json.JSONDecoder().scan_once  # type: ignore[attr-defined]
_STR_ONLY = {str}


def _ids(value: Any, column: str) -> list[str]:
    """The column's ids; the common case (JSON text of a flat array of short strings) is checked
    with C-level passes over the list, anything else takes the element-by-element path below,
    which words the errors."""
    if type(value) is str and value[:1] == "[":
        try:
            ids, end = _scan(value, 0)
        except (StopIteration, ValueError, RecursionError):
            pass
        else:
            # (a decoded id is never longer than the text it came from: no length to check
            # when the whole text is short)
            if (
                end == len(value)
                and set(map(type, ids)) <= _STR_ONLY
                and (end <= 1000 or max(map(len, ids), default=0) <= 1000)
            ):
                return ids
    return _ids_checked(value, column)


def _ids_checked(value: Any, column: str) -> list[str]:
    if value is None:
        raise InvalidTestCaseError(f"column {column!r} is NULL")
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise InvalidTestCaseError(f"column {column!r} is not valid UTF-8") from None
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as exc:
            raise InvalidTestCaseError(
                f"column {column!r} is not valid JSON ({exc.msg} at position {exc.pos})"
            ) from None
    if not isinstance(value, list):
        raise InvalidTestCaseError(f"column {column!r} must be a JSON array of ids, got {type(value).__name__}")
    out: list[str] = []
    for i, v in enumerate(value):
        if type(v) is str:
            if len(v) > 1000:
                raise InvalidTestCaseError(f"{column}[{i}] is too long for an id ({len(v):,} characters)")
            out.append(v)
        elif type(v) is int:
            out.append(str(v))
        else:
            raise InvalidTestCaseError(f"{column}[{i}] must be a string or an integer id, got {type(v).__name__}")
    return out


def row_to_labelled(row: dict[str, Any]) -> LabelledRetrieval:
    """A labelled log row (logical column names) -> ``LabelledRetrieval(id=str(row id))``."""
    retrieved = _ids(row.get("retrieved_ids"), "retrieved_ids")
    if not retrieved:
        raise InvalidTestCaseError("column 'retrieved_ids' is empty (nothing retrieved to score)")
    if len(retrieved) > MAX_IDS:
        raise InvalidTestCaseError(f"column 'retrieved_ids' has {len(retrieved)} ids (limit {MAX_IDS})")
    if len(set(retrieved)) != len(retrieved):
        dup = next(i for n, i in enumerate(retrieved) if i in retrieved[:n])
        raise InvalidTestCaseError(f"column 'retrieved_ids' lists {dup[:100]!r} more than once")
    relevant = _ids(row.get("relevant_ids"), "relevant_ids")
    query = row.get("input")
    case = LabelledRetrieval.__new__(LabelledRetrieval)  # validated above: skip __post_init__'s second pass
    case.retrieved_ids, case.relevant_ids, case.id = retrieved, relevant, str(row["id"])
    case.input = query if isinstance(query, str) else None
    case.metadata = None
    return case
