"""The partition's chunks stream through one judging queue (``pipeline/stream.py``): a chunk's slow
request no longer holds back the next chunks, each chunk is still written whole, in one
transaction, as soon as its own last case is judged."""

from __future__ import annotations

import asyncio
from datetime import datetime

import pytest
import sqlalchemy as sa

from ctxprec_ops.pipeline import PipelineConfig, ProgressEvent, score_partition
from ctxprec_ops.pipeline.records import Chunk
from ctxprec_ops.pipeline.workers import batches
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import create_logs, log_row

DAY = "2026-11-28"
SLOW = "row 1 passage:"


def _rows(n: int) -> list[dict]:
    return [
        log_row(
            i,
            datetime(2026, 11, 28, i % 24),
            input=f"question {i}?",
            expected=f"answer {i}",
            context=[f"row {i} passage: a RELEVANT fact", f"row {i} other: IRRELEVANT filler"],
        )
        for i in range(1, n + 1)
    ]


def _remote(judge_server, warehouse: str) -> PipelineConfig:
    """Scoring ``warehouse`` with the local judge server: chunks of 5, 4 requests in flight."""
    return PipelineConfig(
        warehouse=warehouse,
        judge="judge-test-model",
        judge_base_url=judge_server.base_url,
        judge_api_key="test-key",
        chunk_size=5,
        concurrency=4,
    )


def _warehouse(path, n: int) -> str:
    """A SQLite warehouse at ``path`` holding ``_rows(n)``; its URL."""
    url = f"sqlite:///{path}"
    create_logs(get_engine(url), _rows(n))
    return url


def test_a_slow_request_does_not_hold_back_the_next_chunks(judge_server, tmp_path):
    url = f"sqlite:///{tmp_path / 'wh.db'}"
    engine = get_engine(url)
    create_logs(engine, _rows(15))
    # row 1 (chunk 0) takes 1.5 s; every other request 10 ms
    judge_server.latency = lambda record: 1.5 if SLOW in str(record["json"]) else 0.01
    events: list[ProgressEvent] = []
    cfg = _remote(judge_server, url)
    summary = score_partition(cfg, DAY, progress=events.append)

    assert (summary.rows_total, summary.rows_scored, summary.status) == (15, 15, "succeeded")
    written = [e.message.split(":")[0] for e in events if e.kind == "chunk_done"]
    # chunks 1 and 2 were judged and written (in either order) while chunk 0 waited on its slow request
    assert written[-1] == "chunk 0" and sorted(written) == ["chunk 0", "chunk 1", "chunk 2"]
    done = [e.done for e in events if e.kind in ("rows_done", "chunk_done")]
    assert done == sorted(done) and done[-1] == 15
    with engine.connect() as conn:
        n_scores, n_judgments = conn.execute(
            sa.text("SELECT (SELECT count(*) FROM ctxprec_scores), (SELECT count(*) FROM ctxprec_judgments)")
        ).one()
    assert (n_scores, n_judgments) == (15, 30) and judge_server.calls == 15


def test_worker_batches_are_contiguous_and_cover_every_chunk_once():
    chunks = [Chunk(DAY, i, i, i + 1, 1) for i in range(10)]
    got = batches(chunks, workers=2)
    assert [c for b in got for c in b] == chunks
    assert len(got) == 8 and {len(b) for b in got} == {1, 2}
    assert batches(chunks[:3], workers=4) == [[c] for c in chunks[:3]]


def test_quiet_gc_restores_the_collector_when_the_last_user_leaves():
    import gc

    from ctxprec_ops._gc import YOUNG_THRESHOLD, quiet_gc

    before, frozen = gc.get_threshold(), gc.get_freeze_count()
    with quiet_gc():
        assert gc.get_threshold()[0] == max(before[0], YOUNG_THRESHOLD) and gc.get_freeze_count() > frozen
        with quiet_gc():  # a second stream in another thread shares the setting
            pass
        assert gc.get_threshold()[0] == max(before[0], YOUNG_THRESHOLD)  # the first one is still running
    assert gc.get_threshold() == before and gc.get_freeze_count() == frozen


def test_rows_claimed_elsewhere_are_left_then_scored_after_the_free_chunks(judge_server, pg_url):
    """The stream claims the rows it judges: rows another holder has claimed are left to it by
    ``score_chunk_if_free`` and, in ``score_partition``, read again after the free chunks once
    released — then found scored or judged, never both."""
    import threading

    from ctxprec_ops.pipeline import plan_chunks, prepare
    from ctxprec_ops.pipeline.stream import claims_scope, score_chunk_if_free
    from ctxprec_ops.warehouse.claims import RowClaims

    engine = get_engine(pg_url)
    create_logs(engine, _rows(15))
    judge_server.latency = 0.01
    cfg = _remote(judge_server, pg_url)
    ctx = prepare(cfg)
    chunks = plan_chunks(cfg, DAY, context=ctx)
    other = RowClaims(engine, claims_scope(ctx, DAY), run_id="another-run")
    other.__enter__()
    try:
        claim = other.claim([str(i) for i in range(1, 6)])  # chunk 0's rows
        assert claim.kept == [str(i) for i in range(1, 6)]
        left = score_chunk_if_free(cfg, chunks[0], run_id="r0", context=ctx)
        assert (left.rows_held, left.rows_scored, judge_server.calls) == (5, 0, 0)
        events: list[ProgressEvent] = []
        release = threading.Timer(1.0, lambda: other.__exit__(None, None, None))
        release.start()
        summary = score_partition(cfg, DAY, progress=events.append)
        release.join()
    finally:
        other.__exit__(None, None, None)
    assert (summary.rows_scored, summary.status) == (15, "succeeded") and judge_server.calls == 15
    started = [e.message for e in events if e.kind == "chunk_started"]
    assert started == ["chunk 0", "chunk 1", "chunk 2", "chunk 0"]
    waiting = [e.message for e in events if e.kind == "claims_waiting"]
    assert waiting and "5 row(s) held by run another-run (pid" in waiting[0], waiting


def _stream_threads(cfg: PipelineConfig) -> set[str]:
    """The stream's reader and writer threads seen alive at any progress event of a run."""
    import threading

    seen: set[str] = set()

    def look(_event: ProgressEvent) -> None:
        # "ctxprec-read_0" -> "ctxprec-read", "ctxprec-claims-3e7437e2" (a claims heartbeat) -> "ctxprec-claims"
        # (not the one importing finalize's modules ahead, "ctxprec-warm": started only where they
        # were not imported yet, a process's first run)
        names = [
            t.name.rsplit("_", 1)[0]
            for t in threading.enumerate()
            if t.name.startswith("ctxprec-") and not t.name.startswith("ctxprec-warm")
        ]
        seen.update("-".join(n.split("-")[:2]) for n in names)

    summary = score_partition(cfg, DAY, progress=look)
    assert summary.rows_scored == summary.rows_total == 12
    return seen


def test_a_stream_with_nothing_to_wait_for_on_sqlite_runs_on_one_thread(judge_server, tmp_path):
    """On SQLite an inline judge (the lexical one) reads, judges and writes on the event loop's own
    thread: all of it is this process's CPU. A judge over the network keeps the reader and the
    writer threads, which overlap its waiting, a thread committing its verdicts as they arrive and
    the heartbeat of its claims."""
    local = PipelineConfig(warehouse=_warehouse(tmp_path / "wh.db", 12), judge="lexical", chunk_size=5)
    assert _stream_threads(local) == set()

    judge_server.latency = 0.01
    remote = _remote(judge_server, _warehouse(tmp_path / "wh2.db", 12))
    assert _stream_threads(remote) == {"ctxprec-read", "ctxprec-write", "ctxprec-verdicts", "ctxprec-claims"}


def test_duckdb_reads_and_writes_on_their_own_threads_with_an_inline_judge(duckdb_url):
    """DuckDB runs in process too, but its statements run on its own threads without the GIL and
    each write's commit waits on an fsync: with an inline judge a DuckDB run keeps the reader and
    the writer threads, which overlap them with the judging (SQLite's run stays on one thread)."""
    create_logs(get_engine(duckdb_url), _rows(12))
    assert _stream_threads(PipelineConfig(warehouse=duckdb_url, judge="lexical", chunk_size=5)) == {
        "ctxprec-read",
        "ctxprec-write",
    }


def test_a_spans_source_reads_on_its_own_thread_even_on_sqlite(tmp_path):
    """A spans table's chunk read waits on SQLite long enough (every span of the id range, then the
    traces' LLM spans) to be worth overlapping with judging the chunk before: the reader and the
    writer threads run even with an inline judge, where a flat table's run keeps to one thread."""
    from tests.helpers import traces as T

    url = f"sqlite:///{tmp_path / 'spans.db'}"
    data = [(f"question {i}?", [f"note {i}", f"fact {i}"], f"answer {i}") for i in range(12)]
    T.write_spans(get_engine(url), T.span_rows(T.langchain_spans(data), DAY))
    spans = PipelineConfig(warehouse=url, judge="lexical", chunk_size=5, source_format="openinference")
    assert _stream_threads(spans) == {"ctxprec-read", "ctxprec-write"}


@pytest.mark.parametrize("url", ["sqlite://", "duckdb:///:memory:"])
def test_a_per_thread_in_memory_engine_inside_a_running_loop_is_refused_before_anything_is_written(url):
    """Inside a running event loop (a notebook's) the run goes on a thread of its own, and an engine
    giving each thread its own connection (SQLAlchemy's default for an in-memory database) would show
    it another, empty database ("no such table"): refused at once, saying how to build the engine,
    nothing written; built that way (one connection shared), the same run scores every row."""
    if url.startswith("duckdb"):
        pytest.importorskip("duckdb_engine")
    from sqlalchemy.pool import StaticPool

    from ctxprec_ops.warehouse.engine import ThreadBoundEngineError

    async def in_a_loop(engine: sa.Engine):
        return score_partition(PipelineConfig(warehouse=engine, judge="lexical", chunk_size=4), DAY)

    engine = sa.create_engine(url)
    create_logs(engine, _rows(6))
    with pytest.raises(ThreadBoundEngineError, match="poolclass=sqlalchemy.pool.StaticPool"):
        asyncio.run(in_a_loop(engine))
    assert sa.inspect(engine).get_table_names() == ["retrieval_logs"]  # no output table, no run row

    shared = sa.create_engine(
        url,
        poolclass=StaticPool,
        **({"connect_args": {"check_same_thread": False}} if url.startswith("sqlite") else {}),
    )
    create_logs(shared, _rows(6))
    summary = asyncio.run(in_a_loop(shared))
    assert (summary.status, summary.rows_scored) == ("succeeded", 6)
