"""Validate configured table, schema and column names before they reach SQLAlchemy.

Names are never spliced into SQL text (SQLAlchemy quotes them), but a name that is not a plain
identifier is almost always a mistake or an attack, so it is refused up front with a message
that says which setting is wrong.
"""

from __future__ import annotations

import re

from ..errors import IdentifierError

#: a segment column's name at most: PostgreSQL names hold 63 bytes and its ``seg_`` column takes 4
MAX_SEGMENT_NAME = 59

__all__ = ["MAX_IDENTIFIER_LENGTH", "validate_identifier", "split_table_name"]

#: PostgreSQL truncates identifiers at 63 bytes; refusing longer names avoids silent aliasing
MAX_IDENTIFIER_LENGTH = 63

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def validate_identifier(name: object, what: str = "identifier") -> str:
    """Return ``name`` if it is a plain SQL identifier (letters, digits, ``_``; not starting
    with a digit; at most 63 characters); raise ``IdentifierError`` otherwise."""
    if not isinstance(name, str):
        raise IdentifierError(f"{what} must be a string, got {type(name).__name__}")
    if name == "":
        raise IdentifierError(f"{what} is empty")
    if len(name) > MAX_IDENTIFIER_LENGTH:
        raise IdentifierError(
            f"{what} {name[:40]!r}... is {len(name)} characters long (at most {MAX_IDENTIFIER_LENGTH} are allowed)"
        )
    if not _IDENT.fullmatch(name):
        raise IdentifierError(
            f"{what} {name!r} is not a valid identifier: use letters, digits and '_' only, "
            "not starting with a digit (no spaces, quotes, dots or semicolons)"
        )
    return name


def split_table_name(table: str, schema: str | None = None, what: str = "table name") -> tuple[str | None, str]:
    """``("analytics.retrieval_logs", None)`` -> ``("analytics", "retrieval_logs")``.

    A dotted name is split once into schema and table; giving both a dotted name and a separate
    schema is refused as ambiguous. Both parts are validated.
    """
    if isinstance(table, str) and "." in table:
        if schema is not None:
            raise IdentifierError(f"{what} {table!r} contains a schema and a separate schema {schema!r} was given too")
        parts = table.split(".")
        if len(parts) != 2:
            raise IdentifierError(f"{what} {table!r} must be 'table' or 'schema.table'")
        schema, table = parts
    if schema is not None:
        validate_identifier(schema, "schema name")
    validate_identifier(table, what)
    return schema, table
