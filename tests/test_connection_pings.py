"""Pooled connections are pinged only after sitting idle (``PING_AFTER_IDLE``), not on every
checkout: within a run they go back and forth every few milliseconds, and a ping each time was
~150 round trips a 20,000-row PostgreSQL run. One the server dropped while idle is replaced."""

from __future__ import annotations

from typing import Any

import pytest
import sqlalchemy as sa

from ctxprec_ops.warehouse.dialects import connections
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import CountingJudge, create_logs, day_rows

DAY = "2026-11-28"


def _backend_and_pings(engine: sa.Engine) -> tuple[int, int]:
    with engine.connect() as conn:
        pid = int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())
        return pid, conn.connection._connection_record.info.get(connections.PINGS, 0)  # type: ignore[union-attr]


def test_a_connection_back_at_once_is_not_pinged_one_idle_is(pg_url, monkeypatch):
    engine = get_engine(pg_url)
    first, pings = _backend_and_pings(engine)  # new: not pinged
    again, pings_again = _backend_and_pings(engine)  # back within PING_AFTER_IDLE: the same, not pinged
    assert again == first and pings == pings_again == 0
    monkeypatch.setattr(connections, "PING_AFTER_IDLE", 0.0)  # every connection counts as idle
    same, pinged = _backend_and_pings(engine)
    assert same == first and pinged == 1


def _kill(url: str, pid: int) -> None:
    """Terminate the session ``pid`` and wait until its process has gone (its socket is closed)."""
    killer = sa.create_engine(sa.make_url(url).set(drivername="postgresql+psycopg"), poolclass=sa.NullPool)
    with killer.connect() as other:
        assert other.exec_driver_sql(f"SELECT pg_terminate_backend({pid}, 10000)").scalar_one()


def test_a_pooled_connection_the_server_closed_is_replaced_without_a_round_trip(pg_url):
    """A session killed while its connection sat in the pool (for milliseconds: no ping due) is
    seen at checkout from its socket, which the server closed, and replaced: the next statement
    runs on a new session."""
    engine = get_engine(pg_url)
    dropped, _ = _backend_and_pings(engine)
    _kill(pg_url, dropped)
    fresh, pings = _backend_and_pings(engine)
    assert fresh != dropped and pings == 0


def test_a_connection_dropped_while_in_use_fails_a_plain_read_and_retried_work_runs_again(pg_url, caplog):
    """A session killed while its connection is checked out (no check can see it coming) fails
    the statement; ``read_retrying`` and ``write_retrying`` (work safe to repeat) run the work again
    at once on a new connection, with a warning. A plain read does not."""
    import logging

    from ctxprec_ops.warehouse.engine import read_retrying, write_retrying

    engine = get_engine(pg_url)

    def killed_once() -> Any:
        seen: list[int] = []

        def work(conn: sa.Connection) -> int:
            pid = int(conn.exec_driver_sql("SELECT pg_backend_pid()").scalar_one())
            if not seen:
                seen.append(pid)
                _kill(pg_url, pid)
                conn.exec_driver_sql("SELECT 1")  # on the dead session: fails
            return pid

        return work, seen

    with pytest.raises(sa.exc.OperationalError), engine.connect() as conn:
        killed_once()[0](conn)
    for retrying in (read_retrying, write_retrying):
        work, seen = killed_once()
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="ctxprec_ops.warehouse.engine"):
            pid = retrying(engine, work)
        assert pid != seen[0] and "lost its connection" in caplog.text, retrying.__name__


class _DroppingJudge(CountingJudge):
    """Drops the run's pooled sessions (``pg_terminate_backend``, waiting for them to end; those
    idle outside a transaction: a connection in use fails under any check, and not the one holding
    the run's advisory lock, whose loss is the claims' concern) on its calls number ``drop_on``:
    the connections die between two uses, idle for milliseconds."""

    def __init__(self, url: str, drop_on: set[int]) -> None:
        super().__init__()
        self.killer = sa.create_engine(sa.make_url(url).set(drivername="postgresql+psycopg"), poolclass=sa.NullPool)
        self.drop_on, self.dropped = drop_on, 0

    def generate(self, prompt: str, schema: Any = None) -> Any:
        answer = super().generate(prompt, schema)
        if self.calls in self.drop_on:
            with self.killer.connect() as conn:
                self.dropped += conn.exec_driver_sql(
                    "SELECT count(pg_terminate_backend(pid, 10000)) FROM pg_stat_activity "
                    "WHERE datname = current_database() AND pid <> pg_backend_pid() AND state = 'idle' "
                    "AND pid NOT IN (SELECT pid FROM pg_locks WHERE locktype = 'advisory')"
                ).scalar_one()
        return answer


def test_a_run_whose_connections_the_server_drops_between_chunks_accounts_for_every_row(pg_url, caplog):
    """Five times during a run the sessions of its pool are killed while idle for less than
    ``PING_AFTER_IDLE``: the chunk reads and writes that meet a dead
    connection run again on a new one, and every row ends scored exactly once."""
    import logging

    from ctxprec_ops.pipeline import PipelineConfig, score_partition

    create_logs(get_engine(pg_url), day_rows(60))
    judge = _DroppingJudge(pg_url, drop_on={10, 20, 30, 40, 50})
    with caplog.at_level(logging.WARNING, logger="ctxprec_ops.warehouse.engine"):
        summary = score_partition(PipelineConfig(warehouse=pg_url, judge=judge, chunk_size=10), DAY)
    assert judge.dropped >= 2
    assert (summary.status, summary.rows_scored, summary.rows_failed) == ("succeeded", 60, 0)
    with get_engine(pg_url).connect() as conn:
        ids = [r[0] for r in conn.exec_driver_sql("SELECT log_id FROM ctxprec_scores").all()]
    assert sorted(ids, key=int) == [str(i) for i in range(1, 61)]
