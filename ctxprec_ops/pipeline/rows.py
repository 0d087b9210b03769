"""Turn source rows into test cases, or say precisely why a row cannot be scored.

Every problem raises ``InvalidTestCaseError`` (``error_type`` ``invalid_input``) with a message
that names the column, before any judge call. Checked:

- ``input`` / ``expected_output`` / ``expected_outcome``: missing, empty or blank;
- ``retrieval_context``: NULL, not JSON, not a JSON array, empty, more than ``MAX_NODES`` nodes,
  an element that is none of: a string; an object ``{"context": ..., "source": ...}`` (items
  sharing a source are one node, as ``RetrievedContextData``); an image ``{"url": ...}`` with an
  http(s) URL or a ``data:image/...;base64,`` URL (a local path is refused: row data never makes
  a worker read its files);
- ``turns``: NULL, not JSON, not an array of ``{role, content, retrieval_context}`` objects,
  more than ``MAX_TURNS`` turns;
- any text over ``MAX_TEXT_CHARS`` characters, containing a NUL character, or not valid UTF-8;
- JSON nested too deeply for the parser.

``case_or_failure`` turns *any* exception raised while reading one row into that row's
``InvalidTestCaseError``: a row's content can never abort the partition it belongs to.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Literal, overload

from ..cases.contexts import RetrievedContextData
from ..cases.conversational import ConversationalTestCase, Turn
from ..cases.images import MLLMImage
from ..cases.single_turn import LLMTestCase
from ..errors import InvalidTestCaseError

__all__ = ["MAX_TEXT_CHARS", "MAX_NODES", "MAX_TURNS", "row_to_test_case", "row_to_conversation", "case_or_failure"]

MAX_TEXT_CHARS = 100_000
MAX_NODES = 200
MAX_TURNS = 200


def _bad(msg: str) -> InvalidTestCaseError:
    return InvalidTestCaseError(msg)


@overload
def _text(value: Any, column: str, *, required: Literal[True]) -> str: ...
@overload
def _text(value: Any, column: str, *, required: Literal[False]) -> str | None: ...
def _text(value: Any, column: str, *, required: bool) -> str | None:
    """The column's value as checked text; NULL is an error when ``required`` (else None)."""
    if type(value) is not str:
        if value is None:
            if required:
                raise _bad(f"column {column!r} is NULL")
            return None
        value = _as_text(value, column)
    _check_text(value, column)
    if required and (not value or value.isspace()):  # blank (``strip`` would copy the text)
        raise _bad(f"column {column!r} is empty")
    return value


def _as_text(value: Any, column: str) -> str:
    """A value that is not a ``str`` as text: bytes decoded as UTF-8, a number formatted."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            return bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise _bad(f"column {column!r} is not valid UTF-8") from None
    if isinstance(value, str):  # a subclass
        return value
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    raise _bad(f"column {column!r} must be text, got {type(value).__name__}")


def _check_text(value: str, where: str, index: int | None = None) -> None:
    """``value`` within the length limit, without NUL, encodable as UTF-8; the error names
    ``where`` (``where[index]`` for an item of a list: formatted only when a check fails)."""
    if len(value) <= MAX_TEXT_CHARS and "\x00" not in value and value.isascii():
        return  # the usual text (``isascii`` is a flag of the string: no encoding pass)
    if index is not None:
        where = f"{where}[{index}]"
    if len(value) > MAX_TEXT_CHARS:
        raise _bad(f"{where} is too long: {len(value):,} characters (limit {MAX_TEXT_CHARS:,})")
    if "\x00" in value:
        raise _bad(f"{where} contains a NUL character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise _bad(f"{where} is not valid UTF-8") from None


def _json(value: Any, column: str) -> Any:
    if value is None:
        raise _bad(f"column {column!r} is NULL")
    if isinstance(value, (bytes, bytearray, memoryview)):
        try:
            value = bytes(value).decode("utf-8")
        except UnicodeDecodeError:
            raise _bad(f"column {column!r} is not valid UTF-8") from None
    if isinstance(value, str):
        if len(value) > MAX_TEXT_CHARS * 4:
            raise _bad(f"column {column!r} is too long: {len(value):,} characters")
        if not value or value.isspace():  # blank (``strip`` would copy the whole text)
            raise _bad(f"column {column!r} is empty")
        if not value.isascii():  # ASCII text always encodes
            try:
                value.encode("utf-8")
            except UnicodeEncodeError:
                raise _bad(f"column {column!r} is not valid UTF-8") from None
        try:
            return json.loads(value)
        except json.JSONDecodeError as exc:
            raise _bad(f"column {column!r} is not valid JSON ({exc.msg} at position {exc.pos})") from None
        except RecursionError:
            raise _bad(f"column {column!r} is JSON nested too deeply to read") from None
    return value


def _json_type(value: Any) -> str:
    return {
        dict: "an object",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
        type(None): "null",
        list: "an array",
    }.get(type(value), type(value).__name__)


def _nodes(value: Any, where: str, *, allow_empty: bool) -> tuple[list[Any], bool]:
    """The checked items of a retrieval-context array, and whether one of them is an image."""
    if not isinstance(value, list):
        raise _bad(f"{where} must be a JSON array of strings, got {_json_type(value)}")
    if not value and not allow_empty:
        raise _bad(f"{where} is empty (no retrieved nodes to judge)")
    if len(value) > MAX_NODES:
        raise _bad(f"{where} has {len(value)} nodes (limit {MAX_NODES})")
    images = False
    for i, node in enumerate(value):
        if isinstance(node, str):
            _check_text(node, where, i)
        elif isinstance(node, dict):
            item = _object_node(node, f"{where}[{i}]")
            images = images or isinstance(item, MLLMImage)
            value[i] = item
        else:
            raise _bad(f"{where}[{i}] must be a string, got {_json_type(node)}")
    return value, images


def _object_node(node: dict[str, Any], where: str) -> RetrievedContextData | MLLMImage:
    """A JSON object element: ``{context, source}`` or an image ``{url}``."""
    if "context" in node or "source" in node:
        context, source = node.get("context"), node.get("source")
        if not isinstance(context, str) or not isinstance(source, str) or "url" in node:
            raise _bad(f"{where} must have a string 'context' and a string 'source' (and no 'url')")
        _check_text(context, f"{where}.context")
        _check_text(source, f"{where}.source")
        return RetrievedContextData(context=context, source=source)
    url = node.get("url")
    if not isinstance(url, str):
        keys = ", ".join(sorted(map(str, node))) or "none"
        raise _bad(
            f"{where} must be a string, an object with 'context' and 'source', or an image object with "
            f"'url'; got an object with keys {keys}"
        )
    return _image(url, where)


def _image(url: str, where: str) -> MLLMImage:
    if len(url) > MAX_TEXT_CHARS * 40:
        raise _bad(f"{where}.url is too long: {len(url):,} characters")
    if url.startswith(("http://", "https://")):
        _check_text(url, f"{where}.url")
        return MLLMImage.detached(url=url)
    if url.startswith("data:"):
        head, sep, data = url[5:].partition(",")
        mime, _, encoding = head.partition(";")
        if sep and encoding == "base64" and mime.startswith("image/") and data:
            return MLLMImage.detached(dataBase64=data, mimeType=mime)
        raise _bad(f"{where}.url must be a data:image/...;base64,... URL")
    raise _bad(f"{where}.url must be an http(s) URL or a data:image/...;base64 URL, got {url[:60]!r}")


def row_to_test_case(row: dict[str, Any]) -> LLMTestCase:
    """A ``retrieval_logs`` row (logical column names) -> ``LLMTestCase(id=str(row id))``."""
    input_ = _text(row.get("input"), "input", required=True)
    expected = _text(row.get("expected_output"), "expected_output", required=True)
    actual = _text(row.get("actual_output"), "actual_output", required=False)
    raw = _json(row.get("retrieval_context"), "retrieval_context")
    nodes, images = _nodes(raw, "retrieval_context", allow_empty=False)
    # every field was checked above: build without re-validating (this is the pipeline's hot path)
    return LLMTestCase._trusted(input_, actual, expected, nodes, str(row["id"]), images)


def row_to_conversation(row: dict[str, Any]) -> ConversationalTestCase:
    """A ``conversation_logs`` row -> ``ConversationalTestCase(id=str(row id))``."""
    outcome = _text(row.get("expected_outcome"), "expected_outcome", required=True)
    turns_raw = _json(row.get("turns"), "turns")
    if not isinstance(turns_raw, list):
        raise _bad(f"column 'turns' must be a JSON array of turns, got {_json_type(turns_raw)}")
    if not turns_raw:
        raise _bad("column 'turns' is empty")
    if len(turns_raw) > MAX_TURNS:
        raise _bad(f"column 'turns' has {len(turns_raw)} turns (limit {MAX_TURNS})")
    turns: list[Turn] = []
    images = False
    for i, t in enumerate(turns_raw):
        where = f"turns[{i}]"
        if not isinstance(t, dict):
            raise _bad(f"{where} must be an object with role and content, got {_json_type(t)}")
        role = t.get("role")
        if role not in ("user", "assistant"):
            raise _bad(f"{where}.role must be 'user' or 'assistant', got {role!r}")
        content = t.get("content")
        if not isinstance(content, str):
            raise _bad(f"{where}.content must be a string, got {_json_type(content)}")
        _check_text(content, f"{where}.content")
        ctx = t.get("retrieval_context")
        nodes = None
        if ctx is not None:
            nodes, has_image = _nodes(ctx, f"{where}.retrieval_context", allow_empty=True)
            images = images or has_image
        turns.append(Turn._trusted(role, content, nodes))
    return ConversationalTestCase._trusted(turns, outcome, str(row["id"]), images)


def case_or_failure(to_case: Callable[[dict[str, Any]], Any], row: dict[str, Any]) -> Any:
    """``to_case(row)``; any exception other than ``InvalidTestCaseError`` (a ``RecursionError``
    from deeply nested JSON, a ``MemoryError``, a bug in a check) becomes one too, so it is that
    row's ``invalid_input`` failure instead of the partition's abort."""
    try:
        return to_case(row)
    except InvalidTestCaseError:
        raise
    except Exception as exc:  # noqa: BLE001 - a row's content must not stop the partition
        detail = str(exc).splitlines()[0][:200] if str(exc) else ""
        raise _bad(f"row could not be read: {type(exc).__name__}{': ' + detail if detail else ''}") from None
