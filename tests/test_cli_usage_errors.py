"""Usage errors a new user makes, through the console script as they run it: a mistyped flag or
command is named with the closest real one, and an ``--out`` that cannot be written is refused up
front — each in at most two lines, exit code 2, no usage dump and no Python exception names."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

CTXPREC = Path(sys.executable).with_name("ctxprec")
DAY = "2026-11-28"
#: what a Python exception looks like in a message (``ValueError:``, ``[Errno 30]``)
LEAK = re.compile(r"\b[A-Z][A-Za-z]*(Error|Exception)\b|\[Errno \d+\]|Traceback")


def _ctxprec(*argv: str, prefix: list[str] | None = None, cwd: Path | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*(prefix or []), str(CTXPREC), *argv], capture_output=True, text=True, timeout=120, cwd=cwd,
        env=dict(os.environ, COLUMNS="100"),
    )  # fmt: skip


def _usage_error(proc: subprocess.CompletedProcess) -> str:
    """The error's text, checked: exit 2, at most two lines on stderr, no usage, nothing Python."""
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2, proc.stderr
    assert 1 <= len(lines) <= 2, proc.stderr
    assert "usage:" not in proc.stderr and not LEAK.search(proc.stderr), proc.stderr
    return proc.stderr


# -- flag and command typos ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "typo", "meant"),
    [
        (["score", "--warehouse", "sqlite:///x.db", "--partiton", DAY], "--partiton", "--partition"),
        (["score", "--warehouse", "sqlite:///x.db", "--partition", DAY, "--judeg", "lexical"], "--judeg", "--judge"),
        (["score", "--partiton=2026-11-28"], "--partiton", "--partition"),  # the --flag=value form
        (["trend", "--dyas", "3"], "--dyas", "--days"),
        (
            ["compare", "--partition", DAY, "--by", "v", "--baseline", "a", "--candidate", "b", "--pair-one", "q"],
            "--pair-one",
            "--pair-on",
        ),  # fmt: skip
        (["report", "--out", "r.html", "--wrost", "5"], "--wrost", "--worst"),
        (["scroe", "--partition", DAY], "scroe", "score"),
        (["chekc"], "chekc", "check"),
    ],
)
def test_a_typo_is_named_with_the_closest_real_name(argv, typo, meant):
    err = _usage_error(_ctxprec(*argv))
    assert f"unknown {'option' if typo.startswith('-') else 'command'} {typo} (did you mean {meant}?)" in err
    assert "required" not in err  # the typo is reported, not the flag it hid


@pytest.mark.parametrize(
    ("argv", "typo", "meant"),
    [
        (["trend", "--metric", "contextual_precison"], "contextual_precison", "contextual_precision"),
        (["batches", "--warehouse", "sqlite:///x.db", "lst"], "lst", "list"),
    ],
)
def test_a_value_outside_the_choices_is_named_with_the_closest_choice(argv, typo, meant):
    err = _usage_error(_ctxprec(*argv))
    assert f"invalid value {typo!r} (did you mean {meant}?)" in err


def test_a_flag_like_no_other_gets_no_suggestion():
    err = _usage_error(_ctxprec("trend", "--zzzzzz"))
    assert "unknown option --zzzzzz" in err and "did you mean" not in err


def test_right_command_lines_are_not_flagged(tmp_path):
    """Values that start with '-' (negative numbers), abbreviations argparse accepts, and the
    errors of a correct command line are left to the parser and the command."""
    proc = _ctxprec("check", "--warehouse", f"sqlite:///{tmp_path / 'missing.db'}", "--partition", DAY)
    assert proc.returncode == 1 and "does not exist" in proc.stderr  # got as far as the warehouse
    proc = _ctxprec("check", "--warehouse", "sqlite:///x.db", "--partition", DAY, "--min-drop", "-0.5")
    assert proc.returncode == 2 and "between 0 and 1" in proc.stderr and "unknown" not in proc.stderr
    proc = _ctxprec("trend", "--warehouse", f"sqlite:///{tmp_path / 'missing.db'}", "--day", "3")  # --days
    assert proc.returncode == 1 and "does not exist" in proc.stderr
    proc = _ctxprec("score", "--warehouse", "sqlite:///x.db")  # a missing flag is still argparse's message
    assert proc.returncode == 2 and "required: --partition" in proc.stderr


# -- --out ------------------------------------------------------------------------------------------


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory another user may enter (pytest's tmp_path is the test user's alone)."""
    d = Path(tempfile.mkdtemp(prefix="ctxprec-out-"))
    d.chmod(0o755)
    try:
        yield d
    finally:
        for p in d.rglob("*"):
            if p.is_dir():
                p.chmod(0o755)
        shutil.rmtree(d, ignore_errors=True)


def _bad_outs(base: Path) -> list[tuple[str, str]]:
    (base / "a_file").write_text("x")
    return [
        ("/nonexistent/dir/r.html", "the directory /nonexistent does not exist"),
        ("/proc/report.html", "cannot write in /proc"),
        (str(base), "is a directory"),
        (str(base / "r.txt"), "use a name ending in .html"),
        (str(base / "a_file" / "r.html"), "is not a directory"),
    ]


@pytest.mark.parametrize("command", ["report", "demo"])
def test_a_bad_out_is_one_usage_line_naming_the_path_given(command, shared_dir):
    """Refused before any work: the warehouse named does not even exist (``report``) or would be
    generated for minutes (``demo``), and no file is left behind."""
    warehouse = f"sqlite:///{shared_dir / 'wh.db'}"
    for out, problem in _bad_outs(shared_dir):
        argv = [command, "--warehouse", warehouse, "--out", out] + (
            ["--days", "1", "--quiet"] if command == "demo" else []
        )
        err = _usage_error(_ctxprec(*argv))
        assert f"--out {out}: " in err and problem in err, err
        assert ".report-" not in err and ".ctxprec-" not in err  # no temporary file the user never named
    assert sorted(p.name for p in shared_dir.iterdir()) == ["a_file"]


def test_a_read_only_directory_is_named_as_such(shared_dir):
    """The directory is read-only for the user running the command (as root, who may write
    anywhere, the command runs as ``nobody``)."""
    ro = shared_dir / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    prefix = []
    if os.geteuid() == 0:
        setpriv = shutil.which("setpriv")
        if setpriv is None:  # pragma: no cover - util-linux is installed here
            pytest.skip("running as root without setpriv")
        prefix = [setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"]
    out = str(ro / "r.html")
    err = _usage_error(
        _ctxprec("report", "--warehouse", "sqlite:///none.db", "--out", out, prefix=prefix, cwd=shared_dir)
    )
    assert f"--out {out}: cannot write in {ro}: permission denied" in err
    assert list(ro.iterdir()) == []
