"""`make demo` installs the core only; `make test` every extra (checked with `make -n`, nothing runs)."""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")


def _dry_run(target: str, venv: Path) -> str:
    proc = subprocess.run(
        ["make", "-n", "-C", str(ROOT), target, f"VENV={venv}"], capture_output=True, text=True, check=True, timeout=60
    )
    return proc.stdout


def _install_line(out: str) -> str:
    lines = [ln for ln in out.splitlines() if " pip install " in ln and " -e " in ln]
    assert len(lines) == 1, out
    return lines[0]


def test_make_demo_installs_only_the_core(tmp_path):
    out = _dry_run("demo", tmp_path / "venv")
    line = _install_line(out)
    assert re.search(r'-e "\."$', line), line  # no extras: no Airflow, Dagster or embedded PostgreSQL
    assert "ctxprec demo" in out


def test_make_test_installs_every_extra(tmp_path):
    line = _install_line(_dry_run("test", tmp_path / "venv"))
    extras = set(re.search(r'-e "\.\[(.*)\]"', line).group(1).split(","))  # type: ignore[union-attr]
    assert {"test", "postgres", "airflow", "dagster", "docs"} <= extras  # docs: the site is built by a test


def test_make_test_installs_the_warehouse_extras_and_the_bigquery_emulator(tmp_path):
    """The BigQuery and Databricks extras in the project's environment; the emulator in its own
    (its pins conflict with the project's), both before the suite runs."""
    proc = subprocess.run(
        ["make", "-n", "-C", str(ROOT), "test", f"VENV={tmp_path / 'venv'}", f"BQEMU_VENV={tmp_path / 'bq'}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    extras = set(re.search(r'-e "\.\[(.*)\]"', _install_line(proc.stdout)).group(1).split(","))  # type: ignore[union-attr]
    assert {"bigquery", "databricks"} <= extras
    emulator = [ln for ln in proc.stdout.splitlines() if f"-p {tmp_path / 'bq'}/bin/python" in ln]
    assert emulator and "bqemulator==" in emulator[0], proc.stdout
    assert proc.stdout.index("bqemulator==") < proc.stdout.index("-m pytest")


def test_demo_then_test_use_separate_stamps(tmp_path):
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").touch()
    (venv / ".installed-core").touch()  # `make demo` ran: `make test` must still install the extras
    assert "airflow" in _install_line(_dry_run("test", venv))


def test_ci_runs_make_test():
    assert "make test" in (ROOT / ".ci" / "run").read_text()


def test_make_clean_and_gitignore_cover_the_demo_files():
    clean = (ROOT / "Makefile").read_text().split("\nclean:", 1)[1]
    for name in (
        "ctxprec_demo.db",
        "ctxprec_demo.db-wal",
        "ctxprec_demo.db-shm",
        "ctxprec.db-wal",
        "ctxprec_report.html",
        "ctxprec_report_conversations.html",
    ):
        assert name in clean, name
    ignore = (ROOT / ".gitignore").read_text().split()
    for pattern in (
        "*.db",
        "*.db-wal",
        "*.db-shm",
        "*.db-journal",
        "ctxprec_report.html",
        "ctxprec_report_conversations.html",
    ):
        assert pattern in ignore, pattern


def test_make_clean_removes_every_file_the_demo_writes_and_git_ignores_them(tmp_path, monkeypatch):
    """Run the demo with its default paths in an empty directory, then `make clean` there: nothing
    is left, and git ignores every file the demo wrote in between."""
    from ctxprec_ops.cli import main

    work = tmp_path / "clone"
    work.mkdir()
    monkeypatch.chdir(work)
    args = ["demo", "--days", "2", "--rows-per-day", "30", "--conversations-per-day", "2", "--quiet"]
    assert main([*args, "--end-date", "2026-11-28"]) == 0
    written = sorted(p.name for p in work.iterdir())
    assert {"ctxprec_demo.db", "ctxprec_report.html", "ctxprec_report_node_labels.csv"} <= set(written), written
    if shutil.which("git") and (ROOT / ".git").exists():
        ignored = subprocess.run(
            ["git", "-C", str(ROOT), "check-ignore", "--no-index", *written], capture_output=True, text=True
        )
        assert sorted(ignored.stdout.split()) == written  # nothing shows up in `git status`
    subprocess.run(
        ["make", "-s", "-f", str(ROOT / "Makefile"), "-C", str(work), "clean", f"VENV={tmp_path / 'no-venv'}"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    assert list(work.iterdir()) == []


BUILD_OUTPUT = ("build", "dist", "site", "ctxprec_ops.egg-info")


def test_make_clean_removes_the_build_output_and_git_ignores_it(tmp_path):
    """What `pip wheel -w dist .` (the installation page's wheel recipe), an editable install and
    `mkdocs build` leave in a clone: git ignores it, and `make clean` removes it."""
    work = tmp_path / "clone"
    for name in BUILD_OUTPUT:
        (work / name / "sub").mkdir(parents=True)
        (work / name / "sub" / "file.txt").write_text("x")
    (work / "dist" / "ctxprec_ops-0.1.0-py3-none-any.whl").write_bytes(b"PK")
    if shutil.which("git") and (ROOT / ".git").exists():
        paths = [f"{name}/sub/file.txt" for name in BUILD_OUTPUT] + ["dist/ctxprec_ops-0.1.0-py3-none-any.whl"]
        ignored = subprocess.run(
            ["git", "-C", str(ROOT), "check-ignore", "--no-index", *paths], capture_output=True, text=True
        )
        assert sorted(ignored.stdout.split()) == sorted(paths)
    subprocess.run(
        ["make", "-s", "-f", str(ROOT / "Makefile"), "-C", str(work), "clean", f"VENV={tmp_path / 'no-venv'}"],
        check=True,
        capture_output=True,
        timeout=60,
    )
    assert list(work.iterdir()) == []


def test_make_test_runs_in_parallel_and_lists_the_slowest(tmp_path):
    out = _dry_run("test", tmp_path / "venv")
    (line,) = [ln for ln in out.splitlines() if " -m pytest" in ln]
    assert "-n auto --dist loadgroup" in line and "--durations=15" in line
    assert "PYTHONDONTWRITEBYTECODE= " in line  # bytecode cached for the suite's many child processes
    assert "--compile-bytecode" in _install_line(out)
