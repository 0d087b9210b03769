"""Warehouse families: one class per warehouse, found by its SQLAlchemy dialect name.

``for_dialect(name)`` (or ``dialect_of(engine_or_connection)``) returns the family's
:class:`Dialect` instance; the core calls its methods and reads its capabilities, and never
branches on a dialect's name. Where a class comes from, later entries winning:

1. the families shipped here: each module of this package whose ``Dialect`` subclass declares the
   SQLAlchemy names it serves (``names``: SQLite, PostgreSQL, MySQL/MariaDB, DuckDB, Snowflake),
   so a source checkout works without installed metadata (``built_in()``);
2. the entry points of group ``ctxprec_ops.dialects`` (name: the SQLAlchemy dialect name, value:
   ``module:Class``), this package's own (the same families) and any other distribution's — a
   warehouse ships as one module (or an extra package) declaring one;
3. ``register_dialect(name, cls)`` at run time.

A name none of them claims gets the base class, :class:`Dialect`, the generic path (per-row
update-then-insert, expanding binds, claims in `ctxprec_claims`), with a warning that names the dialect.
"""

from __future__ import annotations

import importlib
import logging
import pkgutil
import threading
from collections.abc import Iterator, Mapping
from typing import Any

from .base import Dialect, Lineage

__all__ = [
    "Dialect",
    "Lineage",
    "ENTRY_POINT_GROUP",
    "built_in",
    "for_dialect",
    "dialect_of",
    "dialect_class",
    "register_dialect",
    "registered_names",
    "reload_entry_points",
    "lineage",
]

log = logging.getLogger(__name__)

ENTRY_POINT_GROUP = "ctxprec_ops.dialects"

#: URL schemes that are another spelling of a family's dialect name (``postgres://``)
_ALIASES = {"postgres": "postgresql"}
#: the distribution whose entry points are the built-ins (any other one's override them)
_OWN_DISTRIBUTION = "ctxprec-ops"

_lock = threading.Lock()
_runtime: dict[str, type[Dialect]] = {}
_entry_points: dict[str, Any] | None = None
_built_in: dict[str, type[Dialect]] | None = None
_instances: dict[str, Dialect] = {}
#: name -> its class (None: no family claims it), as looked up so far
_classes: dict[str, type[Dialect] | None] = {}
_warned: set[str] = set()


def built_in() -> Mapping[str, type[Dialect]]:
    """SQLAlchemy dialect name -> the family shipped in this package that declares it (``names``
    of a ``Dialect`` subclass defined in one of this package's modules), read once."""
    global _built_in
    if _built_in is None:
        found: dict[str, type[Dialect]] = {}
        for info in pkgutil.iter_modules(__path__, prefix=f"{__name__}."):
            module = importlib.import_module(info.name)
            for obj in vars(module).values():
                if isinstance(obj, type) and issubclass(obj, Dialect) and obj.__module__ == module.__name__:
                    found.update(dict.fromkeys(obj.names, obj))
        _built_in = found
    return _built_in


def _declared() -> dict[str, Any]:
    """The group's entry points by name (read once): another distribution's wins over this
    package's own declaration of the same name."""
    global _entry_points
    if _entry_points is None:
        from importlib.metadata import entry_points

        found: dict[str, Any] = {}
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            dist = getattr(getattr(ep, "dist", None), "name", None) or ""
            held = found.get(ep.name)
            if held is not None:
                held_dist = getattr(getattr(held, "dist", None), "name", None) or ""
                if held_dist != _OWN_DISTRIBUTION and dist != _OWN_DISTRIBUTION:
                    log.warning(
                        "warehouse dialect %r is declared by %s and %s: using %s's",
                        ep.name,
                        held_dist,
                        dist,
                        held_dist,
                    )
                if dist == _OWN_DISTRIBUTION:
                    continue
            found[ep.name] = ep
        _entry_points = found
    return _entry_points


def dialect_class(name: str) -> type[Dialect] | None:
    """The class registered for the SQLAlchemy dialect ``name``, or None (no family claims it)."""
    name = _ALIASES.get(name, name)
    if name in _classes:
        return _classes[name]
    cls = _runtime.get(name)
    if cls is None:
        ep = _declared().get(name)
        if ep is not None:
            cls = ep.load()
            if not (isinstance(cls, type) and issubclass(cls, Dialect)):
                raise TypeError(f"entry point {ep.name} = {ep.value} ({ENTRY_POINT_GROUP}) is not a Dialect subclass")
        else:
            cls = built_in().get(name)
    _classes[name] = cls
    return cls


def register_dialect(name: str, cls: type[Dialect]) -> None:
    """Register ``cls`` for the SQLAlchemy dialect ``name`` in this process (over any built-in or
    entry point of that name)."""
    if not (isinstance(cls, type) and issubclass(cls, Dialect)):
        raise TypeError(f"{cls!r} is not a Dialect subclass")
    with _lock:
        _runtime[name] = cls
        _instances.pop(name, None)
        _classes.pop(name, None)


def reload_entry_points() -> None:
    """Read the entry points again at the next look-up (a distribution installed while the process
    runs) and forget the families found so far (those ``register_dialect`` set stay)."""
    global _entry_points
    with _lock:
        _entry_points = None
        _instances.clear()
        _classes.clear()
        _warned.clear()


def for_dialect(name: str) -> Dialect:
    """The family of the SQLAlchemy dialect ``name`` (one instance per name and process)."""
    found = _instances.get(name)
    if found is not None:
        return found
    with _lock:
        found = _instances.get(name)
        if found is None:
            cls = dialect_class(name)
            if cls is None:
                if name not in _warned:
                    _warned.add(name)
                    log.warning("warehouse dialect %r has no dedicated support: using the generic path", name)
                cls = Dialect
            found = _instances[name] = cls(name)
    return found


def dialect_of(bind: Any) -> Dialect:
    """The family of an ``Engine`` or ``Connection`` (anything with ``.dialect.name``)."""
    return for_dialect(bind.dialect.name)


def registered_names() -> Iterator[str]:
    """Every dialect name a family is registered for (built-in, entry point, run time), sorted."""
    yield from sorted({*built_in(), *_declared(), *_runtime})


def lineage(url: Any, table: str) -> Lineage:
    """Where ``table`` of the warehouse at ``url`` (a SQLAlchemy ``URL``) lives, credential-free,
    as its family names it for OpenLineage and Airflow assets (a dialect without a family: the
    generic form, without a warning)."""
    name = url.get_backend_name()
    cls = dialect_class(name) or Dialect
    return cls(_ALIASES.get(name, name)).lineage(url, table)
