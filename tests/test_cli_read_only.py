"""The read commands (``trend``, ``check``, ``compare``, ``report``, ``estimate``, ``batches list``)
need read rights only, as an analyst with read-only credentials has them.

- SQLite: a writable file is not written (its header's file change counter, bytes 24-27, and its
  mtime stay as they were; no ``-wal``/``-shm`` left beside it), and a read-only file in a
  read-only directory works for a user who may only read it (as root, who ignores file
  permissions, the commands run as ``nobody`` through ``setpriv``).
- PostgreSQL: a role granted nothing but SELECT runs every read command.

Each command runs as the user runs it: the console script, in a subprocess.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.segment_data import BAD_DAY, DAYS, build

CTXPREC = Path(sys.executable).with_name("ctxprec")
#: two scored days before the checked one, so trend/check have a baseline to read
SCORED = [DAYS[-4], DAYS[-3], BAD_DAY]


def _read_commands(url: str, out_dir: Path) -> dict[str, list[str]]:
    w = ["--warehouse", url]
    return {
        "trend": ["trend", *w],
        "check": ["check", *w, "--partition", BAD_DAY],
        "check --by": ["check", *w, "--partition", BAD_DAY, "--by", "tenant"],
        "compare": [
            "compare",
            *w,
            "--partition",
            BAD_DAY,
            "--by",
            "retriever_version",
            "--baseline",
            "v1",
            "--candidate",
            "v2",
            "--pair-on",
            "query_id",
            "--within",
            "tenant",
        ],  # fmt: skip
        "report": ["report", *w, "--out", str(out_dir / "report.html")],
        "estimate": ["estimate", *w, "--partition", BAD_DAY, "--judge", "lexical"],
        "batches list": ["batches", *w, "list"],
    }


#: exit codes: check may fire an alert (3) or not (0); everything else succeeds
EXPECTED_EXIT = {"check": (0, 3), "check --by": (0, 3)}


def _run(argv: list[str], *, as_user: list[str] = (), env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    env = dict(os.environ if env is None else env, COLUMNS="120")
    return subprocess.run([*as_user, str(CTXPREC), *argv], capture_output=True, text=True, env=env, timeout=180)


def _assert_ran(name: str, proc: subprocess.CompletedProcess) -> None:
    assert proc.returncode in EXPECTED_EXIT.get(name, (0,)), f"{name}: exit {proc.returncode}\n{proc.stderr}"
    assert "readonly" not in proc.stderr and "Permission" not in proc.stderr, (name, proc.stderr)


def _header(path: Path) -> tuple[int, bytes, int, str]:
    """(file change counter, journal mode bytes, mtime_ns, content hash) of a SQLite file."""
    data = path.read_bytes()
    return int.from_bytes(data[24:28], "big"), data[18:20], path.stat().st_mtime_ns, hashlib.sha256(data).hexdigest()


@pytest.fixture(scope="module")
def sqlite_file(tmp_path_factory) -> Path:
    """A scored warehouse, left as the ``ctxprec`` command leaves it (rollback journal, no WAL)."""
    from ctxprec_ops.warehouse.engine import release_sqlite_files

    path = tmp_path_factory.mktemp("ro") / "wh.db"
    build(f"sqlite:///{path}", days=SCORED)
    release_sqlite_files()
    return path


def test_read_commands_do_not_write_a_writable_sqlite_file(sqlite_file, tmp_path):
    path = tmp_path / "wh.db"
    shutil.copy2(sqlite_file, path)
    before = _header(path)
    assert before[1] == b"\x01\x01"  # rollback-journal mode, as the CLI leaves a file
    for name, argv in _read_commands(f"sqlite:///{path}", tmp_path).items():
        _assert_ran(name, _run(argv))
        assert _header(path) == before, f"{name} wrote to the warehouse file"
        assert sorted(p.name for p in tmp_path.glob("wh.db*")) == ["wh.db"], name


@pytest.fixture
def nobody_dir() -> Iterator[Path]:
    """A directory every user may enter (pytest's tmp_path is the test user's alone)."""
    d = Path(tempfile.mkdtemp(prefix="ctxprec-ro-"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        for p in d.rglob("*"):
            if p.is_dir():
                p.chmod(0o755)
        shutil.rmtree(d, ignore_errors=True)


def _as_reader() -> list[str]:
    """The command prefix that runs as a user without write rights to the warehouse: ``nobody``
    when the tests run as root (root ignores file permissions), else the test user itself."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:  # pragma: no cover - util-linux is installed here
        pytest.skip("running as root without setpriv: cannot drop to a user that file permissions apply to")
    return [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]


def test_read_commands_work_on_a_read_only_file_in_a_read_only_directory(sqlite_file, nobody_dir):
    warehouse = nobody_dir / "warehouse"
    warehouse.mkdir()
    path = warehouse / "wh.db"
    shutil.copy2(sqlite_file, path)
    path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)  # 0444
    warehouse.chmod(0o555)
    out = nobody_dir / "out"
    out.mkdir()
    out.chmod(0o777)  # the report is written here
    home = nobody_dir / "home"
    home.mkdir()
    home.chmod(0o777)
    prefix = _as_reader()
    env = dict(os.environ, HOME=str(home))
    if prefix:  # the user really cannot write the warehouse (checked, not assumed)
        probe = subprocess.run([*prefix, "sh", "-c", f"touch {warehouse}/x 2>/dev/null || echo denied"],
                               capture_output=True, text=True)  # fmt: skip
        assert probe.stdout.strip() == "denied"
    before = _header(path)
    for name, argv in _read_commands(f"sqlite:///{path}", out).items():
        _assert_ran(name, _run(argv, as_user=prefix, env=env))
    assert (out / "report.html").stat().st_size > 10_000
    assert _header(path) == before
    assert sorted(p.name for p in warehouse.iterdir()) == ["wh.db"]


def test_read_commands_work_for_a_select_only_postgresql_role(pg_server, pg_url, tmp_path):
    """A role with CONNECT, USAGE on the schema and SELECT on the tables, nothing else: every read
    command runs, and none leaves a new table behind."""
    build(pg_url, days=SCORED)
    db = sa.engine.make_url(pg_url).database
    role = f"reader_{db[-8:]}"
    pg_server.admin(f'CREATE ROLE "{role}" LOGIN')
    try:
        engine = sa.create_engine(pg_url)
        with engine.begin() as conn:
            conn.exec_driver_sql(f'REVOKE ALL ON SCHEMA public FROM PUBLIC; GRANT USAGE ON SCHEMA public TO "{role}"')
            conn.exec_driver_sql(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{role}"')
            tables = set(sa.inspect(conn).get_table_names())
        reader_url = sa.engine.make_url(pg_url).set(username=role).render_as_string(hide_password=False)
        with sa.create_engine(reader_url).connect() as conn:  # the role really may not write
            with pytest.raises(sa.exc.ProgrammingError, match="permission denied"):
                conn.exec_driver_sql("CREATE TABLE ctxprec_probe (x int)")
        for name, argv in _read_commands(reader_url, tmp_path).items():
            _assert_ran(name, _run(argv))
        with engine.connect() as conn:
            assert set(sa.inspect(conn).get_table_names()) == tables
        engine.dispose()
    finally:
        cleanup = sa.create_engine(pg_url)
        with cleanup.begin() as conn:  # its grants in this database, then the role
            conn.exec_driver_sql(f'DROP OWNED BY "{role}"')
        cleanup.dispose()
        pg_server.admin(f'DROP ROLE "{role}"')


def test_the_read_only_engine_cannot_write(sqlite_file, tmp_path):
    """The guarantee under the commands: the read-only engine's connections refuse any write
    (SQLite ``mode=ro``), while the URL it shows stays the user's."""
    from ctxprec_ops.warehouse.engine import display_url, get_engine, release_sqlite_files

    path = tmp_path / "wh.db"
    shutil.copy2(sqlite_file, path)
    before = _header(path)
    url = f"sqlite:///{path}"
    engine = get_engine(url, read_only=True)
    assert engine is get_engine(url, read_only=True) and engine is not get_engine(url)
    assert display_url(engine) == url
    with engine.connect() as conn:
        assert conn.exec_driver_sql("SELECT count(*) FROM ctxprec_scores").scalar_one() > 0
        with pytest.raises(sa.exc.OperationalError, match="readonly|read-only|query_only"):
            conn.exec_driver_sql("CREATE TABLE ctxprec_probe (x int)")
    release_sqlite_files()
    assert _header(path) == before


def test_read_commands_work_for_a_select_only_mariadb_user(mariadb_server, mariadb_url, tmp_path):
    """The same on MariaDB: a user granted SELECT on the database and nothing else. (Scored without
    segment columns, which compare then reads from the input table: ``ctxprec_segments``'s key is
    too long for MariaDB today.)"""
    from ctxprec_ops.pipeline import PipelineConfig, score_partition
    from tests.segment_data import write_source

    engine = sa.create_engine(mariadb_url)
    write_source(engine)
    engine.dispose()
    for day in SCORED:
        score_partition(PipelineConfig(warehouse=mariadb_url, judge="lexical"), day)
    url = sa.engine.make_url(mariadb_url)
    user = f"reader_{url.database[-8:]}"
    mariadb_server.admin(f"CREATE USER '{user}'@'localhost' IDENTIFIED BY 'r3ad-only'")
    try:
        mariadb_server.admin(f"GRANT SELECT ON `{url.database}`.* TO '{user}'@'localhost'")
        reader_url = url.set(username=user, password="r3ad-only").render_as_string(hide_password=False)
        engine = sa.create_engine(mariadb_url)
        with engine.connect() as conn:
            tables = set(sa.inspect(conn).get_table_names())
        for name, argv in _read_commands(reader_url, tmp_path).items():
            if name != "check --by":  # per-segment checks read recorded segments only
                _assert_ran(name, _run(argv))
        with engine.connect() as conn:
            assert set(sa.inspect(conn).get_table_names()) == tables
        engine.dispose()
    finally:
        mariadb_server.admin(f"DROP USER '{user}'@'localhost'")
