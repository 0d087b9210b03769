"""PostgreSQL's look-ups by key, planned the same whatever the table's statistics say:

- the judgment cache (``cached_judgments``): one statement per call that probes each *question*
  once instead of each node. The keys of one question share their first ``KEY_HEAD_BYTES`` bytes
  and sit next to each other in the key index, so a join of the distinct heads against their key
  ranges (``cache.key_range``) reads one index range per question (a never-judged question costs
  one index descent that finds nothing, ~5x fewer than looking its nodes up one by one);
- rows by their full primary key (``key_probe``: a chunk's already-scored ids): one index probe
  per id. ``log_id = ANY(CAST(:ids AS text[]))`` had that plan only once the planner's statistics
  described the table: until then it scanned the partition and, the cast being evaluated again
  for every row it filtered, paid ~40 µs a row — 30 – 90 ms a look-up while a run's first few
  thousand scores waited for their ``ANALYZE`` (bench/README.md)."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import LargeBinary, Table, Text, bindparam, cast, null, select, true
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.engine import Connection
from sqlalchemy.sql.functions import Function

from ....judge.cache import key_head, key_range
from .arrays import bytea_array, text_array

__all__ = ["cached_judgments", "heads_lookup", "key_probe", "probes_primary_key"]

#: cached nodes read per question at most (a LIMIT that also keeps the per-question lookup a
#: nested loop of index range scans: the planner cannot flatten a LATERAL subquery with a LIMIT)
NODES_PER_QUESTION = 100_000


def heads_lookup(table: Any, *, agreement: bool) -> Any:
    """``SELECT key, relevant, reason, agreement FROM unnest(:lo, :hi) h CROSS JOIN LATERAL
    (SELECT ... FROM judgments WHERE key BETWEEN h.lo AND h.hi LIMIT n)``, one (lo, hi) per
    question's key head. The plan is one index range scan per head whatever the table's
    statistics say (a plain join, planned without statistics, became a hash join over the whole
    table)."""
    j = table
    binary = ARRAY(LargeBinary())
    lo, hi = (cast(bindparam(name, type_=Text()), binary) for name in ("lo", "hi"))  # bytea_array() text
    # a plain Function, not func.unnest: sqlalchemy-bigquery registers a one-argument ``unnest``
    # in SQLAlchemy's function registry, which func.unnest then builds in any process importing it
    h = Function("unnest", lo, hi).table_valued("lo", "hi").render_derived(name="h")
    agreed = j.c.agreement if agreement else null().label("agreement")
    per_head = (
        select(j.c.key, j.c.relevant, j.c.reason, agreed)
        .where(j.c.key >= h.c.lo, j.c.key <= h.c.hi)
        .limit(NODES_PER_QUESTION)
        .lateral("j")
    )
    p = per_head.c
    return select(p.key, p.relevant, p.reason, p.agreement).select_from(h).join(per_head, true())


def cached_judgments(
    conn: Connection, table: Any, keys: Sequence[bytes], *, agreement: bool
) -> Iterator[tuple[bytes, Any, Any, Any]]:
    """(key, relevant, reason, agreement) of the cached rows of ``keys``."""
    if not keys:
        return
    want = set(keys)
    ranges = [key_range(h) for h in sorted({key_head(k) for k in keys})]
    bounds = {"lo": bytea_array(lo for lo, _ in ranges), "hi": bytea_array(hi for _, hi in ranges)}
    for k, relevant, reason, agreed in conn.execute(heads_lookup(table, agreement=agreement), bounds):
        k = bytes(k)
        if k in want:  # the range also returns the question's other cached nodes
            yield k, relevant, reason, agreed


def probes_primary_key(table: Table, in_column: str, equal: Sequence[tuple[str, Any]]) -> bool:
    """Whether ``in_column`` leads ``table``'s primary key and ``equal`` fixes the rest of it: then
    each value matches at most one row, found by one descent of the key's index."""
    key = [c.name for c in table.primary_key.columns]
    return bool(key) and key[0] == in_column and set(key[1:]) <= {name for name, _ in equal}


def key_probe(
    table: Table, columns: Sequence[Any], in_column: str, values: Sequence[str], equal: Sequence[tuple[str, Any]]
) -> Any:
    """``SELECT columns FROM unnest(CAST(:ids AS text[])) v(id) CROSS JOIN LATERAL (SELECT ...
    FROM table WHERE in_column = v.id AND <equal> LIMIT 1)``: a nested loop of primary-key probes,
    one per distinct value (``probes_primary_key`` must hold; the ``LIMIT`` keeps the planner from
    flattening the subquery into a join it could plan as a scan of the table)."""
    ids: Function[Any] = Function("unnest", cast(bindparam("ids", text_array(values), type_=Text()), ARRAY(Text())))
    v = ids.table_valued("id").render_derived(name="v")
    where = [table.c[name] == value for name, value in equal]
    probe = select(*columns).where(table.c[in_column] == v.c.id, *where).limit(1).lateral("t")
    return select(*probe.c).select_from(v).join(probe, true())
