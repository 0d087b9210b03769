"""Every read command — ``check``, ``trend``, ``compare``, ``report``, ``estimate`` — works on a
scored warehouse, for its owner and for an account that may only SELECT (where the backend has
such accounts; SQLite: the file opened read-only). Monitoring is what analysts do with read-only
credentials.

One warehouse per backend is scored once (through ``ctxprec score``) for the whole module:
``retrieval_logs``, and ``ab_logs`` scored with ``--segment variant`` for ``compare``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path

import pytest

from ctxprec_ops.cli import main

from .backends import Backend, Warehouse
from .invariants import DAY, logs

IDS = list(range(1, 21))


@dataclass
class Seeded:
    warehouse: Warehouse
    #: exit codes and stderr of the scoring runs, by source table
    scored: dict[str, tuple[int, str]]


def _score(url: str, table: str, *extra: str) -> tuple[int, str]:
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        code = main(
            [
                "score",
                "--warehouse",
                url,
                "--partition",
                DAY,
                "--judge",
                "lexical",
                "--source-table",
                table,
                "--quiet",
                *extra,
            ]
        )
    return code, err.getvalue()


@pytest.fixture(scope="module")
def seeded(backend: Backend) -> Iterator[Seeded]:
    with backend.database() as wh:
        wh.open()
        try:
            wh.create_source(logs(IDS))
            ab = [dict(r, variant="v1" if i % 2 else "v2") for i, r in enumerate(logs(IDS))]
            wh.create_source(ab, table="ab_logs", extra={"variant": "label"})
            scored = {
                "retrieval_logs": _score(wh.url, "retrieval_logs"),
                "ab_logs": _score(wh.url, "ab_logs", "--segment", "variant"),
            }
        finally:
            wh.close()
        assert scored["retrieval_logs"][0] == 0, scored["retrieval_logs"][1]
        yield Seeded(wh, scored)


def _check(url: str, out: Path) -> list[str]:
    return ["check", "--warehouse", url, "--partition", DAY, "--json"]


def _trend(url: str, out: Path) -> list[str]:
    return ["trend", "--warehouse", url, "--end", DAY]


def _compare(url: str, out: Path) -> list[str]:
    return ["compare", "--warehouse", url, "--partition", DAY, "--source-table", "ab_logs"] + [
        "--by",
        "variant",
        "--baseline",
        "v1",
        "--candidate",
        "v2",
        "--json",
    ]


def _report(url: str, out: Path) -> list[str]:
    return ["report", "--warehouse", url, "--end", DAY, "--out", str(out / "report.html")]


def _estimate(url: str, out: Path) -> list[str]:
    return ["estimate", "--warehouse", url, "--partition", DAY, "--judge", "lexical", "--json"]


def _checked_check(stdout: str, out: Path) -> None:
    figures = json.loads(stdout)["figures"]
    assert (figures["rows"], figures["n"], figures["rows_failed"]) == (len(IDS), len(IDS), 0)


def _checked_trend(stdout: str, out: Path) -> None:
    assert DAY in stdout


def _checked_compare(stdout: str, out: Path) -> None:
    result = json.loads(stdout)
    assert (result["baseline_rows"], result["candidate_rows"]) == (len(IDS) // 2, len(IDS) // 2)
    assert result["baseline_mean"] is not None and result["candidate_mean"] is not None


def _checked_report(stdout: str, out: Path) -> None:
    assert DAY in (out / "report.html").read_text()


def _checked_estimate(stdout: str, out: Path) -> None:
    result = json.loads(stdout)
    assert (result["rows_total"], result["rows_already_scored"], result["judge_calls"]) == (len(IDS), len(IDS), 0)


#: command -> (its argv for a warehouse URL and an output directory, what its output must show)
COMMANDS: dict[str, tuple[Callable[[str, Path], list[str]], Callable[[str, Path], None]]] = {
    "check": (_check, _checked_check),
    "trend": (_trend, _checked_trend),
    "compare": (_compare, _checked_compare),
    "report": (_report, _checked_report),
    "estimate": (_estimate, _checked_estimate),
}


@pytest.mark.parametrize("access", ["owner", "select-only"])
@pytest.mark.parametrize("command", list(COMMANDS))
def test_read_commands_run_for_the_owner_and_with_select_only_rights(
    seeded, backend, command, access, tmp_path, capsys
):
    if access == "select-only":
        backend.require("select_only")
    code, err = seeded.scored["ab_logs" if command == "compare" else "retrieval_logs"]
    assert code == 0, f"scoring the table this command reads failed: {err}"
    argv, checked = COMMANDS[command]
    wh = seeded.warehouse
    wh.open()
    try:
        with backend.select_only(wh) if access == "select-only" else nullcontext(wh.url) as url:
            capsys.readouterr()
            code = main(argv(url, tmp_path))
            captured = capsys.readouterr()
    finally:
        wh.close()
    assert code == 0, f"ctxprec {command} exited {code}: {captured.err.strip()}"
    checked(captured.out, tmp_path)
