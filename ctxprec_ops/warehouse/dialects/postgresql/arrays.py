"""Arrays sent to PostgreSQL as one text parameter in the array text form, which the statement
casts (``CAST(:p AS text[])``, ``bytea[]``): psycopg dumps a Python list element by element in
Python, this is one join."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["bytea_array", "text_array"]


def bytea_array(values: Iterable[bytes]) -> str:
    """A ``bytea[]`` in PostgreSQL's array text form (``{"\\x0a1b",...}``), sent as one text
    parameter and cast by the server: psycopg dumps a list of bytes as text with a regular-expression
    pass per element (~2 ms of client CPU for 500 keys; this join: ~0.08 ms)."""
    return "{" + ",".join(['"\\\\x' + v.hex() + '"' for v in values]) + "}"


def text_array(values: Iterable[str]) -> str:
    """A ``text[]`` in PostgreSQL's array text form, each element quoted (``"NULL"`` stays the
    text NULL), for one text parameter the server casts: ~2.5x less client CPU than psycopg's
    dumping of a list."""
    return "{" + ",".join(['"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"' for v in values]) + "}"
