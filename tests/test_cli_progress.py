"""Progress rendering of real pipeline runs: rich bars on a terminal, log lines otherwise."""

from __future__ import annotations

import io

from rich.console import Console

from ctxprec_ops.cli.progress import ProgressDisplay
from ctxprec_ops.demo.sample import create_sample_warehouse
from ctxprec_ops.pipeline import PipelineConfig, ProgressEvent, score_partition

DAY = "2026-11-28"


def _config(tmp_path) -> PipelineConfig:
    url = f"sqlite:///{tmp_path / 'p.db'}"
    create_sample_warehouse(url, days=1, rows_per_day=(45, 45), conversations_per_day=(1, 1), end_date=DAY, seed=2)
    return PipelineConfig(warehouse=url, judge="lexical", chunk_size=10)


def test_interactive_bars_follow_the_run(tmp_path):
    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=120)
    seen: list[ProgressEvent] = []
    with ProgressDisplay(console, interactive=True, total_runs=1) as display:
        bar = display.callback(f"{DAY} cp")

        def both(ev: ProgressEvent) -> None:
            seen.append(ev)
            bar(ev)

        summary = score_partition(_config(tmp_path), DAY, progress=both)
        assert display._runs_done == 1
    assert summary.rows_total == 45
    assert [e.kind for e in seen][0] == "planned" and seen[-1].kind == "finished"
    assert sum(e.kind == "chunk_done" for e in seen) == 5
    dones = [e.done for e in seen if e.kind in ("rows_done", "chunk_done")]
    assert dones == sorted(dones) and dones[-1] == 45  # partition-wide, never going backwards
    assert "cp" in buf.getvalue()


def test_plain_lines_full_and_compact(tmp_path):
    config = _config(tmp_path)
    full, compact = io.StringIO(), io.StringIO()
    with ProgressDisplay(Console(file=full, width=200), interactive=False) as display:
        score_partition(config, DAY, progress=display.callback("run-a"))
    lines = full.getvalue().splitlines()
    assert lines[0] == "run-a: 45 rows in 5 chunks"
    assert sum("rows (chunk" in line for line in lines) == 5
    assert lines[-1].startswith("run-a: ") and "45 rows in" in lines[-1]
    with ProgressDisplay(Console(file=compact, width=200), interactive=False, compact=True, total_runs=1) as display:
        score_partition(config, DAY, progress=display.callback("run-b"))
    assert len(compact.getvalue().splitlines()) == 1 and "[1/1]" in compact.getvalue()
    quiet = io.StringIO()
    with ProgressDisplay(Console(file=quiet), enabled=False) as display:
        score_partition(config, DAY, progress=display.callback("run-c"))
    assert quiet.getvalue() == ""
