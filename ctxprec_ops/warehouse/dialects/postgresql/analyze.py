"""Statistics for the PostgreSQL planner: ANALYZE an output table this process has grown.

The "already scored" lookup (``store.scored_ids``) is an index-only scan only when the planner
knows the table's size; autovacuum's schedule is late for a table that grew from nothing within a
run (docs/scaling.md)."""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy.engine import Engine
from sqlalchemy.exc import DBAPIError

__all__ = ["analyze_if_grown", "ANALYZE_CHECK_MIN_ROWS", "ANALYZE_SELF_MAX_ROWS", "ANALYZE_GROWTH"]

log = logging.getLogger("ctxprec_ops.warehouse")


#: rows a process writes into an output table before it looks at the table's statistics again
#: (after that: half the table's size as the statistics last counted it)
ANALYZE_CHECK_MIN_ROWS = 500
#: beyond this many rows (as last analyzed) autovacuum's own schedule (10% growth) takes over
ANALYZE_SELF_MAX_ROWS = 100_000
#: a table is analyzed again once it is this many times the size its statistics describe
ANALYZE_GROWTH = 4


@dataclass
class _Growth:
    since_check: int = 0
    next_check: int = 0  # 0: look at the first write
    lock: threading.Lock = field(default_factory=threading.Lock)


_growth: weakref.WeakKeyDictionary[Engine, dict[str, _Growth]] = weakref.WeakKeyDictionary()
_growth_lock = threading.Lock()


def analyze_if_grown(engine: Engine, t: Any, written: Mapping[str, int]) -> list[str]:
    """PostgreSQL: ``ANALYZE`` an output table whose statistics are missing or describe less than
    a quarter of it (``ANALYZE_GROWTH``), after this process wrote ``written``
    (``{table name: rows}``) into it. Returns the tables analyzed.

    Why: ``scored_ids`` and the failure clean-up look rows up by the primary key, and the planner
    only picks that index once statistics say that the configuration columns match every row.
    Until autovacuum's first ANALYZE (up to a minute and 10% of the table later), its default
    guess makes it scan the partition index instead, at a cost that grows with the table. An
    ANALYZE samples at most 30,000 rows; growth by 4x means at most ~5 of them per table (past
    ``ANALYZE_SELF_MAX_ROWS`` rows autovacuum's schedule is enough).
    At most one worker analyzes a table at a time (an advisory lock; the others skip), and a
    failure (no privilege to analyze) is logged and ignored: it costs speed, not correctness.
    """
    with _growth_lock:
        per_engine = _growth.setdefault(engine, {})
        states = {
            name: per_engine.setdefault(f"{t.metadata.schema}.{name}", _Growth()) for name, n in written.items() if n
        }
    done: list[str] = []
    tables = {tb.name: tb for tb in (t.scores, t.failures, t.judgments, t.runs)}
    for name, st in states.items():
        with st.lock:
            st.since_check += written[name]
            if st.since_check < st.next_check:
                continue
            st.since_check = 0
            try:
                analyzed, tuples = _analyze_when_stale(engine, tables[name])
            except DBAPIError as exc:
                log.info(
                    "could not ANALYZE %s (its planner statistics stay as they are): %s",
                    name,
                    str(exc.orig).splitlines()[0] if exc.orig else exc,
                )
                st.next_check = 1 << 62  # do not try again in this process
                continue
            if analyzed:
                done.append(name)
            if tuples >= ANALYZE_SELF_MAX_ROWS:
                st.next_check = 1 << 62  # autovacuum's business from now on
            else:  # look again after about the table's size in new rows (sooner if it is small)
                st.next_check = max(ANALYZE_CHECK_MIN_ROWS, int(tuples))
    return done


def _analyze_when_stale(engine: Engine, table: Any) -> tuple[bool, float]:
    """ANALYZE ``table`` if it has never been analyzed or has grown ``ANALYZE_GROWTH`` times
    since (and is still under ``ANALYZE_SELF_MAX_ROWS``). Returns (analyzed, rows as the
    statistics now say)."""
    q = engine.dialect.identifier_preparer
    name = q.format_table(table)
    with engine.connect() as conn, conn.begin():
        row = conn.exec_driver_sql(
            "SELECT c.reltuples, coalesce(s.n_mod_since_analyze, 0), coalesce(s.n_live_tup, 0) "
            "FROM pg_class c LEFT JOIN pg_stat_user_tables s ON s.relid = c.oid "
            "WHERE c.oid = to_regclass(%(t)s)",
            {"t": name},
        ).first()
        if row is None:
            return False, 0.0
        reltuples, modified, live = float(row[0]), int(row[1]), int(row[2])
        grown = modified > max(reltuples, ANALYZE_CHECK_MIN_ROWS) * (ANALYZE_GROWTH - 1)
        if reltuples >= 0 and (not grown or reltuples >= ANALYZE_SELF_MAX_ROWS):
            return False, reltuples
        # one analyzer per table across workers; the others go on writing
        got = conn.exec_driver_sql("SELECT pg_try_advisory_xact_lock(hashtext(%(t)s))", {"t": name}).scalar()
        if not got:
            return False, max(reltuples, 0.0)
        conn.exec_driver_sql(f"ANALYZE {name}")
        after = conn.exec_driver_sql(
            "SELECT reltuples FROM pg_class WHERE oid = to_regclass(%(t)s)", {"t": name}
        ).scalar()
        return True, float(after if after is not None and after >= 0 else live)
