"""What a warehouse family declares as data (its capabilities), read by the core and by the
generated capability table of docs/warehouses.md. Defaults: the generic path's."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, ClassVar, Literal

__all__ = ["Facts", "Lineage", "ClaimKind", "IdBinding", "Reflection"]

#: how the holder of a claim (``warehouse/claims.py``: rows of ``ctxprec_claims`` on every family)
#: is known to have died, so its claims are taken over at once: its session's advisory lock
#: (PostgreSQL) or named lock (MySQL's ``GET_LOCK``) is free, another process wrote a file only one
#: process may write (DuckDB), its process on this host has ended (SQLite: a file shared by the
#: processes of one host), or only that: its lease expires (``lease``); ``none``: the family takes
#: no claims
ClaimKind = Literal["advisory", "named_lock", "file_lock", "process", "lease", "none"]
#: how a list of ids is bound in reads: ``IN`` lists of bound values, one array parameter
#: (``= ANY(:ids)``), or a frame registered on the connection (``IN (SELECT v FROM frame)``)
IdBinding = Literal["expanding", "expanding_long", "any_array", "frame"]
#: how a table's shape is read: SQLAlchemy's inspector, or ``information_schema`` queries
Reflection = Literal["inspector", "information_schema"]


@dataclass(frozen=True)
class Lineage:
    """Where a table lives, credential-free: its OpenLineage namespace and dataset name, and the
    URI that names it as an asset."""

    namespace: str
    name: str
    uri: str


class Facts:
    """A family's capabilities (class attributes: data, not behaviour)."""

    #: the SQLAlchemy dialect name this instance was found by
    name: str
    #: the SQLAlchemy dialect names a family shipped in this package serves (its registration)
    names: ClassVar[tuple[str, ...]] = ()
    #: the family's name in messages and docs
    family: ClassVar[str] = "generic (any other SQLAlchemy dialect)"
    #: how an insert-or-update of a chunk is written (docs)
    write_path: ClassVar[str] = "per row: UPDATE by key, then INSERT what it did not match"
    #: whether the write path is the family's own bulk insert-or-update (False: the generic path)
    native_upsert: ClassVar[bool] = False
    #: rows per chunk (one write transaction each) when a run does not set ``chunk_size``: where a
    #: statement's fixed cost is high against its rows (DuckDB), larger chunks amortise it; memory
    #: grows with the chunk (bench/README.md measures both)
    default_chunk_size: ClassVar[int] = 500
    id_binding: ClassVar[IdBinding] = "expanding"
    claims: ClassVar[ClaimKind] = "lease"
    #: whether the database enforces primary keys; where it does not, the writer de-duplicates
    #: and readers keep each key's latest row
    keys_enforced: ClassVar[bool] = True
    #: whether the output tables get their secondary indexes
    secondary_indexes: ClassVar[bool] = True
    reflection: ClassVar[Reflection] = "inspector"
    #: whether the database has grants to check before judging (a file has none: SQLite, DuckDB;
    #: ``read_only_reason`` says whether it was opened read-only)
    has_grants: ClassVar[bool] = True
    #: whether the family opens a database read-only for read commands (``get_engine(...,
    #: read_only=True)``): SQLite, whose file a read would otherwise write (WAL switch, checkpoint);
    #: a server needs only SELECT rights for reading
    opens_read_only: ClassVar[bool] = False
    #: statements run on every new connection so its session works in UTC (empty: the database
    #: has no session time zone, or it cannot be set)
    utc_session: ClassVar[tuple[str, ...]] = ()
    #: the isolation level of a read that must see one snapshot (None: a transaction is one)
    snapshot_isolation: ClassVar[str | None] = None
    #: the database runs in this process and its statements are short (SQLite): with a judge that
    #: answers inline, a run's reads and writes go on its event loop's own thread, where reader
    #: and writer threads would mostly trade the GIL with the judging (SQLite: 3 % slower with them)
    serial_in_process: ClassVar[bool] = False
    #: SQLite's SQL idioms work and pay off in scans: ``instr`` for a case-sensitive search (its
    #: ``LIKE`` ignores ASCII case), ``substr`` from the end, unary ``+`` to keep an index out
    sqlite_idioms: ClassVar[bool] = False
    #: keyword arguments for ``create_engine``
    engine_options: ClassVar[Mapping[str, Any]] = MappingProxyType({})
