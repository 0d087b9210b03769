"""The base warehouse family, as dbt's adapters have one: capabilities as data (``facts.py``),
behaviour as methods a family overrides. Used as is, it is the generic path for a SQLAlchemy
dialect no family claims: per-row update-then-insert, expanding ``IN`` binds, claims whose dead
holders are known by their process (on this host) or their lease.

The behaviour is grouped by what it concerns, one module each: ``connections`` (URLs, engines,
sessions, claims, lineage), ``tables`` (column types, reflection, DDL, migrations), ``reads``
(partition bounds, id lists, look-ups) and ``writes`` (upserts, clean-up)."""

from __future__ import annotations

from typing import Any

from .connections import Connections
from .facts import ClaimKind, Facts, IdBinding, Lineage, Reflection
from .tables import Tables
from .writes import Writes

__all__ = ["Dialect", "Lineage", "ClaimKind", "IdBinding", "Reflection", "CAPABILITIES"]

_ID_BINDING = {
    "expanding": "`IN (…)` of bound values, 500 a statement",
    "expanding_long": "`IN (…)` of bound values, 5,000 a statement",
    "any_array": "`= ANY(:ids)`: one array parameter",
    "frame": "`IN (SELECT v FROM frame)`: a frame registered on the connection",
}
_CLAIMS = {
    "advisory": "at once: its session's advisory lock is free",
    "named_lock": "at once: its session's named lock (`GET_LOCK`) is free",
    "file_lock": "at once: only one process writes the file",
    "process": "at once: its process on this host has ended",
    "lease": "its process on this host has ended, else its lease expired",
    "none": "no claims",
}
_REFLECTION = {"inspector": "SQLAlchemy's inspector", "information_schema": "`information_schema` queries"}

#: the capabilities docs/warehouses.md's table shows: (heading, how a family's value is read)
CAPABILITIES: tuple[tuple[str, Any], ...] = (
    ("Write path", lambda d: d.write_path),
    ("Rows per chunk by default", lambda d: f"{d.default_chunk_size:,}"),
    ("Id lists bound as", lambda d: _ID_BINDING[d.id_binding]),
    ("A dead claim holder is known", lambda d: _CLAIMS[d.claims]),
    ("Write conflicts retried", lambda d: _yes(type(d).write_conflict is not Dialect.write_conflict)),
    ("Keys enforced", lambda d: _yes(d.keys_enforced) if d.keys_enforced else "no: readers keep a key's latest row"),
    ("Secondary indexes", lambda d: _yes(d.secondary_indexes)),
    ("Table shapes read by", lambda d: _REFLECTION[d.reflection]),
    ("Grants checked before judging", lambda d: _yes(d.has_grants)),
    ("Session time zone", lambda d: d.session_time_zone()),
    ("Snapshot reads", lambda d: d.snapshot_isolation or "the read transaction"),
    ("One thread with an inline judge", lambda d: _yes(d.serial_in_process)),
    ("Key text", lambda d: _ddl(d, d.key_text_type(None))),
    ("Key codes (partition, mapping)", lambda d: _ddl(d, d.key_code_type(16))),
    ("Judge model in keys", lambda d: _ddl(d, d.model_name_type())),
    ("JSON", lambda d: _ddl(d, d.json_type())),
    ("Judgment key (23 bytes)", lambda d: _ddl(d, d.binary_key_type(23))),
    ("Score", lambda d: _ddl(d, d.double_type())),
    ("Timestamps", lambda d: _ddl(d, d.timestamp_type())),
)


def _yes(flag: bool) -> str:
    return "yes" if flag else "no"


def _ddl(family: Facts, type_: Any) -> str:
    """The type as the family's SQLAlchemy dialect writes it in DDL (SQLAlchemy's generic
    spelling when that dialect is not installed, or for the generic family)."""
    from sqlalchemy.dialects import registry

    try:
        sa_dialect = registry.load(family.name)()
    except Exception:  # the dialect's package is missing, or the name is no SQLAlchemy dialect
        return f"`{type_.compile()}`"
    return f"`{type_.compile(dialect=sa_dialect)}`"


class Dialect(Connections, Tables, Writes):
    """A warehouse family. Subclasses set the capabilities they differ in and override the
    methods whose behaviour differs; ``for_dialect`` finds one by SQLAlchemy dialect name."""

    @classmethod
    def capabilities(cls, name: str) -> dict[str, str]:
        """The values of ``CAPABILITIES`` for the family as found by ``name`` (docs)."""
        family = cls(name)
        return {heading: read(family) for heading, read in CAPABILITIES}
