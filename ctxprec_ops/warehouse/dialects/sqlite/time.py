"""SQLite's reading of ``event_time`` text (and numbers) as a UTC instant, in SQL: what a
partition filter on SQLite compares, since SQLite has no timestamp type."""

from __future__ import annotations

from typing import Any

from sqlalchemy import String, and_, case, func, literal, type_coerce
from sqlalchemy.ext.compiler import compiles
from sqlalchemy.sql.elements import ColumnElement
from sqlalchemy.sql.visitors import InternalTraversal

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
    # the forms nearly every log table holds ('2026-11-28 09:15:02' or with a 'T'; with a fraction
    # of digits; with 'Z' or '+hh:mm', as JavaScript's toISOString and Python's isoformat write
    # them) read as datetime() of the value without its fraction, exactly as the general
    # expression reads them; testing for them first spares SQLite its steps (~5 us a row)
    whens: list[Any] = [
        (_glob(raw, _CANONICAL_GLOB), _day_end(func.datetime(raw))),
        (_fraction(raw, ""), _day_end(func.datetime(func.substr(raw, 1, 19)))),
    ]
    for zone, width in _ZONES:
        whens.append((_glob(raw, _CANONICAL_GLOB + zone), _day_end(func.datetime(raw))))
        cut = func.substr(raw, 1, 19).op("||")(func.substr(raw, -width))
        whens.append((_fraction(raw, zone, width), _day_end(func.datetime(cut))))
    return case(*whens, else_=sqlite_instant_general(col))


#: the zones of the forms ``sqlite_instant`` tests first, as GLOB patterns, and their widths
_ZONES = (("Z", 1), ("[+-][0-9][0-9]:[0-9][0-9]", 6))


def _glob(text: Any, pattern: str, negate: bool = False) -> ColumnElement[bool]:
    return text.op("NOT GLOB" if negate else "GLOB")(literal(pattern, type_=String()))


def _fraction(raw: Any, zone: str, width: int = 0) -> ColumnElement[bool]:
    """The canonical form with a fraction of digits only, then ``zone`` (``width`` characters)."""
    digits = func.substr(raw, 21, func.length(raw) - 20 - width) if width else func.substr(raw, 21)
    return and_(_glob(raw, _CANONICAL_GLOB + ".[0-9]*" + zone), _glob(digits, "*[^0-9]*", negate=True))


def _day_end(instant: Any) -> ColumnElement[Any]:
    """``datetime()``'s text, with an hour of 24 (which it passes through as written) carried
    into the next day."""
    hour = func.substr(instant, 12, 2)
    return case((hour == literal("24", type_=String()), func.datetime(instant, _text("+0 seconds"))), else_=instant)


def _text(value: str) -> Any:
    return literal(value, type_=String())


#: ``YYYY-MM-DD HH:MM:SS`` or ``YYYY-MM-DDTHH:MM:SS`` and nothing else (no zone, no fraction)
_CANONICAL_GLOB = "[0-9][0-9][0-9][0-9]-[0-9][0-9]-[0-9][0-9][ T][0-9][0-9]:[0-9][0-9]:[0-9][0-9]"


#: every form ``sqlite_instant`` reads, as one scalar subquery over the value ``{value}``. Each
#: step names its result once, in a derived table, and the next reads that name. Written as one
#: nested expression, every use of a step repeats it whole (the trimmed text ~300 times): 30 KB of
#: SQL and 2,000 parameters, which SQLAlchemy took ~0.1 s to compile for every statement holding
#: it, and SQLite ~110 us to compute per row. ``LIMIT -1 OFFSET 0`` (no limit) keeps SQLite from
#: flattening the derived tables back into that one expression: ~5 us a row (the canonical forms
#: ``sqlite_instant`` tests first: ~0.1 us). Steps, innermost first: ``t`` the text without
#: surrounding whitespace; ``n`` the epoch number (a stored number, or text of 9+ digits and dots)
#: and ``z`` the text without a trailing UTC/GMT; ``o`` that with a ``+hhmm`` offset written
#: ``+hh:mm``; ``s`` the epoch seconds (above 1e11: milliseconds) and ``d`` what ``datetime()``
#: reads of the text cut to its whole second; last the instant, floored to its second, with an
#: hour of 24 carried into the next day.
_KEEP = " LIMIT -1 OFFSET 0)"
_GENERAL_SQL = (
    "(SELECT CASE WHEN n IS NOT NULL THEN datetime(CASE WHEN s < CAST(s AS INTEGER) "
    "THEN CAST(s AS INTEGER) - 1 ELSE CAST(s AS INTEGER) END, 'unixepoch') "
    "WHEN substr(d, 12, 2) = '24' THEN datetime(d, '+0 seconds') ELSE d END "
    "FROM (SELECT n, CASE WHEN abs(n) >= 100000000000 THEN n / 1000.0 ELSE n END AS s, "
    "datetime(CASE WHEN substr(o, 20, 1) = '.' AND substr(o, 21, 1) GLOB '[0-9]' "
    "THEN substr(o, 1, 19) || ltrim(substr(o, 21), '0123456789') ELSE o END) AS d "
    "FROM (SELECT n, CASE WHEN length(z) > 16 AND substr(z, -5, 1) IN ('+', '-') "
    "AND substr(z, -4) GLOB '[0-9][0-9][0-9][0-9]' "
    "THEN substr(z, 1, length(z) - 2) || ':' || substr(z, -2) ELSE z END AS o "
    "FROM (SELECT CASE WHEN typeof(r) IN ('integer', 'real') THEN r "
    "WHEN length(t) >= 9 AND t GLOB '[0-9]*' AND t NOT GLOB '*[^0-9.]*' THEN CAST(t AS REAL) END AS n, "
    "CASE WHEN upper(substr(t, -4)) IN (' UTC', ' GMT') THEN rtrim(substr(t, 1, length(t) - 4)) "
    "WHEN upper(substr(t, -3)) IN ('UTC', 'GMT') THEN substr(t, 1, length(t) - 3) ELSE t END AS z "
    "FROM (SELECT r, trim(r, char(32, 9, 13, 10)) AS t FROM (SELECT {value} AS r" + _KEEP * 5 + ")"
)


class _GeneralInstant(ColumnElement[str]):
    """``_GENERAL_SQL`` over a column (or any expression), compiled in its statement's context
    (the value is correlated: the innermost derived table reads the outer row's column)."""

    inherit_cache = True
    _traverse_internals = [("value", InternalTraversal.dp_clauseelement)]
    type = String()

    def __init__(self, value: Any) -> None:
        self.value = value


@compiles(_GeneralInstant)
def _compile_general(element: _GeneralInstant, compiler: Any, **kw: Any) -> str:
    return _GENERAL_SQL.format(value=compiler.process(element.value, **kw))


def sqlite_instant_general(col: Any) -> ColumnElement[Any]:
    """``sqlite_instant`` without its shortcut for the canonical form: every form it reads."""
    return _GeneralInstant(col)
