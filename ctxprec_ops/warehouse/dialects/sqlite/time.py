"""SQLite's reading of ``event_time`` text (and numbers) as a UTC instant, in SQL: what a
partition filter on SQLite compares, since SQLite has no timestamp type."""

from __future__ import annotations

from typing import Any

from sqlalchemy import (
    Float,
    Integer,
    String,
    and_,
    case,
    cast,
    func,
    literal,
    type_coerce,
)
from sqlalchemy.sql.elements import ColumnElement

__all__ = ["sqlite_instant", "sqlite_instant_general"]


def sqlite_instant(col: Any) -> ColumnElement[Any]:
    """SQLite: ``event_time`` as UTC ``YYYY-MM-DD HH:MM:SS`` text, or NULL when it is no
    instant. Read: what SQLite's ``datetime()`` reads (ISO-8601 with ``T`` or a space, fractional
    seconds, ``Z``, ``+HH:MM``), and also ``+HHMM`` offsets, a trailing ``UTC``/``GMT``,
    surrounding whitespace, and epoch seconds (a number, or text of 9+ digits; above 1e11 taken as
    milliseconds). Not read (ambiguous or unknown): ``28/11/2026``-style dates, names of months.

    The instant is cut to its whole second, never rounded: SQLite computes times in milliseconds,
    so ``23:59:59.9996`` (or ``08:59:59.999999+09:00``, or epoch ``1795910399.9996``) would round
    to the next day's midnight. Whole-second text keeps every instant in its UTC day, since days
    begin on whole seconds. ``T24:00:00`` (the day's end, ISO 8601) is the next day's midnight."""
    raw = type_coerce(col, String())
    # the form nearly every log table holds ('2026-11-28 09:15:02', or with a 'T') reads as
    # datetime(value), exactly as the general expression reads it; testing for it first spares
    # SQLite the ~40 trims, substrings and comparisons of the general one (most of a chunk's read)
    return case(
        (raw.op("GLOB")(literal(_CANONICAL_GLOB, type_=String())), _day_end(func.datetime(raw))),
        # ... and with a fraction of digits only ('2026-11-28 09:15:02.123456': span start times)
        (
            and_(
                raw.op("GLOB")(literal(_CANONICAL_GLOB + ".[0-9]*", type_=String())),
                func.substr(raw, 21).op("NOT GLOB")(literal("*[^0-9]*", type_=String())),
            ),
            _day_end(func.datetime(func.substr(raw, 1, 19))),
        ),
        else_=sqlite_instant_general(col),
    )


def _day_end(instant: Any) -> ColumnElement[Any]:
    """``datetime()``'s text, with an hour of 24 (which it passes through as written) carried
    into the next day."""
    hour = func.substr(instant, 12, 2)
    return case((hour == literal("24", type_=String()), func.datetime(instant, _text("+0 seconds"))), else_=instant)


def _text(value: str) -> Any:
    return literal(value, type_=String())


def _whole_seconds(text: Any) -> ColumnElement[Any]:
    """ISO-8601 text without its fraction of a second (``12:34:56.789+09:00`` ->
    ``12:34:56+09:00``): a time's fraction starts at its 20th character."""
    return case(
        (
            and_(func.substr(text, 20, 1) == _text("."), func.substr(text, 21, 1).op("GLOB")(_text("[0-9]"))),
            func.substr(text, 1, 19).op("||")(func.ltrim(func.substr(text, 21), _text("0123456789"))),
        ),
        else_=text,
    )


def _floor(number: Any) -> ColumnElement[Any]:
    """The largest integer not above ``number`` (SQLite's CAST truncates towards zero)."""
    whole = cast(number, Integer())
    return case((number < whole, whole - 1), else_=whole)


#: ``YYYY-MM-DD HH:MM:SS`` or ``YYYY-MM-DDTHH:MM:SS`` and nothing else (no zone, no fraction)
_CANONICAL_GLOB = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9][ T][0-9][0-9]:[0-9][0-9]:[0-9][0-9]"


def _texts(*values: str) -> list[Any]:
    """An ``IN`` list of fixed texts as separate parameters: a list of plain values would be one
    "expanding" parameter, which SQLAlchemy renders into the statement again at every execution
    (~0.6 ms per chunk read, for lists that never change)."""
    return [literal(v, type_=String()) for v in values]


def sqlite_instant_general(col: Any) -> ColumnElement[Any]:
    """``sqlite_instant`` without its shortcut for the canonical form: every form it reads."""
    raw = type_coerce(col, String())
    t = func.trim(raw, literal(" \t\r\n", type_=String()))
    upper4 = func.upper(func.substr(t, -4))
    upper3 = func.upper(func.substr(t, -3))
    no_zone = case(
        (upper4.in_(_texts(" UTC", " GMT")), func.rtrim(func.substr(t, 1, func.length(t) - 4))),
        (upper3.in_(_texts("UTC", "GMT")), func.substr(t, 1, func.length(t) - 3)),
        else_=t,
    )
    colon_offset = case(
        (
            and_(
                func.length(no_zone) > 16,
                func.substr(no_zone, -5, 1).in_(_texts("+", "-")),
                func.substr(no_zone, -4).op("GLOB")(literal("[0-9][0-9][0-9][0-9]", type_=String())),
            ),
            func.substr(no_zone, 1, func.length(no_zone) - 2) + literal(":", type_=String()) + func.substr(no_zone, -2),
        ),
        else_=no_zone,
    )
    digits = and_(
        func.length(t) >= 9,
        t.op("GLOB")(literal("[0-9]*", type_=String())),
        t.op("NOT GLOB")(literal("*[^0-9.]*", type_=String())),
    )
    number = case((func.typeof(col).in_(_texts("integer", "real")), col), (digits, cast(t, Float())), else_=None)
    seconds = case((func.abs(number) >= 100_000_000_000, number / 1000.0), else_=number)
    epoch = func.datetime(_floor(seconds), literal("unixepoch", type_=String()))
    return case((number.is_not(None), epoch), else_=_day_end(func.datetime(_whole_seconds(colon_offset))))
