"""docs/trust.md shows real output: its worked example's commands are run as written (in an empty
directory, ``scripts/`` at hand) and every output line the page shows must come out, in order
(``…`` stands for lines the page leaves out); the gold mean it quotes is the warehouse's; its
simulation table is what ``bench/bench_correction.py --markdown`` prints."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import sqlalchemy as sa

ROOT = Path(__file__).resolve().parents[1]
DOC = ROOT / "docs" / "trust.md"
_VERSION = re.compile(r"v1-[0-9a-f]{12}")  # the prompt's hash changes with the template, not the figures


def _console_blocks(text: str) -> list[tuple[str, list[str]]]:
    """``[(command, shown output lines), ...]`` of the page's ```console blocks."""
    out: list[tuple[str, list[str]]] = []
    for block in re.findall(r"```console\n(.*?)```", text, re.DOTALL):
        for line in block.splitlines():
            if line.startswith("$ "):
                out.append((line[2:], []))
            else:
                out[-1][1].append(line)
    return out


def _in_order(shown: list[str], real: list[str]) -> None:
    real = [_VERSION.sub("v1-…", r.rstrip()) for r in real]
    at = 0
    for line in shown:
        if line == "…":
            continue
        want = _VERSION.sub("v1-…", line.rstrip())
        while at < len(real) and real[at] != want:
            at += 1
        assert at < len(real), f"not in the output (in order): {line!r}\n--- output:\n" + "\n".join(real)
        at += 1


def test_the_worked_example_is_real_output(tmp_path):
    text = DOC.read_text(encoding="utf-8")
    (tmp_path / "scripts").symlink_to(ROOT / "scripts")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("CTXPREC_", "OPENAI_"))}
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    env["COLUMNS"] = "100"
    blocks = _console_blocks(text)
    assert len(blocks) >= 8
    for command, shown in blocks:
        proc = subprocess.run(
            ["bash", "-c", command], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )
        assert proc.returncode in (0, 3), (command, proc.stderr[-2000:])
        _in_order(shown, proc.stdout.splitlines())
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'ctxprec_demo.db'}")
    with engine.connect() as conn:
        gold, rows = conn.exec_driver_sql(
            "SELECT avg(l.score), count(*) FROM ctxprec_scores j JOIN ctxprec_scores l ON l.log_id = j.log_id "
            "AND l.metric = 'label_contextual_precision' "
            "WHERE j.metric = 'contextual_precision' AND j.partition_key = '2026-12-01'"
        ).one()
    engine.dispose()
    assert f"The demo knows the gold mean of\nall {rows} rows — {gold:.3f} —" in text
    assert (tmp_path / "report.html").exists() and 'id="trust"' in (tmp_path / "report.html").read_text("utf-8")


def test_the_simulation_table_is_what_the_bench_prints():
    text = DOC.read_text(encoding="utf-8")
    shown = re.search(r"<!-- simulation: .*? -->\n(.*?)<!-- /simulation -->", text, re.DOTALL)
    assert shown is not None
    printed = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_correction.py"), "--markdown"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    ).stdout
    assert shown.group(1) == printed, "run: .venv/bin/python bench/bench_correction.py --markdown"


@pytest.mark.parametrize("page", ["index.md", "cli.md", "monitoring.md", "labels.md"])
def test_the_other_pages_point_at_it(page):
    assert "(trust.md)" in (ROOT / "docs" / page).read_text(encoding="utf-8")
