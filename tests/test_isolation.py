"""A user's ``.env`` (in the clone, or exported by the shell) never reaches a test.

The README suggests a ``.env``; Dagster's CLI reads the ``.env`` of its working directory and
lets it override the environment. ``tests/fixtures/isolation.py`` scrubs the shell's settings and
runs every subprocess in an empty directory with a clean environment; these tests plant a hostile
``.env`` in a clone-like directory and check that the Dagster subprocess case still scores with
the settings the test gives — and, as a control, that the same command run the old way (from the
clone) does pick the hostile file up.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
import sqlalchemy as sa

from tests.fixtures.isolation import SUITE_SETTINGS, SUITE_TERMINAL, clean_cwd, clean_env, scrub_environment
from tests.fixtures.warehouse_data import create_logs, day_rows, query

ROOT = Path(__file__).resolve().parent.parent
DAY = "2026-11-28"
HOSTILE_KEY = "sk-hostile-0123456789"


def test_scrub_environment_removes_user_settings_and_keeps_the_rest() -> None:
    environ = {
        "CTXPREC_WAREHOUSE_URL": "postgresql://u:pw@warehouse.internal/db",
        "CTXPREC_JUDGE": "gpt-4o-mini",
        "CTXPREC_SLOW_TESTS": "1",  # a switch of the suite, not a setting
        "CTXPREC_RETRY_INITIAL_WAIT": "5",  # replaced by the suite's value
        "OPENAI_API_KEY": HOSTILE_KEY,
        "AZURE_OPENAI_API_KEY": "az",
        "AIRFLOW_HOME": "/somewhere",
        "AIRFLOW__CORE__DAGS_FOLDER": "/somewhere/dags",
        "AIRFLOW_CONN_CTXPREC_WAREHOUSE": "sqlite:///x.db",
        "DAGSTER_HOME": "/somewhere/dh",
        "PATH": "/usr/bin",
        "HOME": "/root",
    }
    removed = scrub_environment(environ)
    assert environ == {
        "CTXPREC_SLOW_TESTS": "1",
        "PATH": "/usr/bin",
        "HOME": "/root",
        **SUITE_SETTINGS,
        **SUITE_TERMINAL,
    }
    assert "OPENAI_API_KEY" in removed and "CTXPREC_SLOW_TESTS" not in removed


def test_the_session_runs_in_an_empty_directory_without_user_settings() -> None:
    assert Path.cwd() == clean_cwd() and not (clean_cwd() / ".env").exists()
    assert Path.cwd() != ROOT
    leaked = [k for k in os.environ if k.startswith(("OPENAI_", "AIRFLOW", "DAGSTER_"))]
    assert leaked == []
    assert {k: os.environ[k] for k in SUITE_SETTINGS} == SUITE_SETTINGS


def test_clean_env_drops_settings_a_test_did_not_pass(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", HOSTILE_KEY)
    monkeypatch.setenv("CTXPREC_JUDGE", "gpt-4o-mini")
    env = clean_env({"CTXPREC_JUDGE": "lexical"})
    assert "OPENAI_API_KEY" not in env and env["CTXPREC_JUDGE"] == "lexical"
    assert env["PATH"] == os.environ["PATH"]


def _clone_like(tmp_path: Path) -> Path:
    """A directory shaped like a clone (the repository's files, linked) holding a hostile ``.env``."""
    clone = tmp_path / "clone"
    clone.mkdir()
    for entry in ROOT.iterdir():
        if entry.name not in (".git", ".venv", ".env") and not entry.name.startswith("."):
            (clone / entry.name).symlink_to(entry)
    (clone / ".env").write_text(
        "\n".join(
            [
                "CTXPREC_WAREHOUSE_URL=sqlite:///hostile.db",
                "CTXPREC_JUDGE=gpt-4o-mini",
                f"OPENAI_API_KEY={HOSTILE_KEY}",
                "OPENAI_BASE_URL=http://127.0.0.1:9/v1",
                "CTXPREC_MIN_MEAN=0.99",
            ]
        )
        + "\n",
        encoding="utf-8",
    )
    return clone


@pytest.mark.timeout(300)
def test_a_hostile_env_file_in_the_clone_does_not_reach_the_dagster_subprocess(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.helpers.dagster_cli import materialize

    clone = _clone_like(tmp_path)
    # as after the README's `set -a; . ./.env; set +a`, with pytest started from the clone
    for line in (clone / ".env").read_text().splitlines():
        name, _, value = line.partition("=")
        monkeypatch.setenv(name, value)
    monkeypatch.chdir(clone)

    url = f"sqlite:///{tmp_path / 'wh.db'}"
    create_logs(sa.create_engine(url), day_rows(4))
    (tmp_path / "dh").mkdir()
    given = {"DAGSTER_HOME": str(tmp_path / "dh"), "CTXPREC_WAREHOUSE_URL": url, "CTXPREC_JUDGE": "lexical"}

    proc = materialize(DAY, given)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out[-3000:]
    assert query(url, "SELECT DISTINCT judge_model FROM ctxprec_scores") == [("lexical",)]
    assert query(url, "SELECT COUNT(*) FROM ctxprec_scores") == [(4,)]
    assert HOSTILE_KEY not in out
    assert not (clone / "hostile.db").exists()

    # the control: the same command from the clone (the old harness: cwd = the repository) is
    # given the same settings, and Dagster's .env loading overrides them
    url2 = f"sqlite:///{tmp_path / 'wh2.db'}"
    create_logs(sa.create_engine(url2), day_rows(4))
    (tmp_path / "dh2").mkdir()
    control = materialize(
        DAY, {**given, "DAGSTER_HOME": str(tmp_path / "dh2"), "CTXPREC_WAREHOUSE_URL": url2}, cwd=clone
    )
    out2 = control.stdout + control.stderr
    assert control.returncode != 0, out2[-3000:]  # pointed at the hostile warehouse, which does not exist
    assert "the SQLite warehouse file 'hostile.db'" in out2 and "CTXPREC_WAREHOUSE_URL" in out2
    assert not (clone / "hostile.db").exists()  # refused, not created (a missing file is an error)
    assert sa.inspect(sa.create_engine(url2)).has_table("ctxprec_scores") is False


def test_env_example_names_only_real_settings_and_env_is_ignored() -> None:
    import re
    import shutil
    import subprocess

    from ctxprec_ops.config import Settings

    text = (ROOT / ".env.example").read_text(encoding="utf-8")
    names = set(re.findall(r"^#? ?([A-Z][A-Z0-9_]+)=", text, re.MULTILINE))
    assert {"CTXPREC_WAREHOUSE_URL", "CTXPREC_JUDGE", "OPENAI_API_KEY"} <= names
    assert names - {"OPENAI_API_KEY", "OPENAI_BASE_URL"} <= set(Settings.variables())
    assert not re.search(r"^[A-Z_]+=", text, re.MULTILINE)  # everything commented: copying it changes nothing
    if shutil.which("git") and (ROOT / ".git").exists():
        ignored = subprocess.run(
            ["git", "-C", str(ROOT), "check-ignore", "--no-index", ".env", ".env.example"],
            capture_output=True,
            text=True,
        )
        assert ignored.stdout.split() == [".env"]  # .env ignored, the example tracked
