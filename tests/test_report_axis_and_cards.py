"""Two details of the HTML report, read from a report written by ``ctxprec report``: the volume
chart's y-axis has whole-number ticks where they belong (never 2.5 rounded to "2"), and each
worst-case card labels its log id."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa

from tests.synthetic_history import Day, beta_scores, day_keys, write_history
from tests.test_report_render import parse

CTXPREC = Path(sys.executable).with_name("ctxprec")
VOLUME = "Rows per partition (scored and failed)"


def _report(tmp_path: Path, rows: list[int], worst: int = 4) -> str:
    rng = np.random.default_rng(7)
    path = tmp_path / "wh.db"
    eng = sa.create_engine(f"sqlite:///{path}")
    days = [Day(k, beta_scores(rng, n, 0.7)) for k, n in zip(day_keys("2026-11-20", len(rows)), rows)]
    write_history(eng, days)
    eng.dispose()
    out = tmp_path / "report.html"
    proc = subprocess.run(
        [str(CTXPREC), "report", "--warehouse", f"sqlite:///{path}", "--out", str(out), "--worst", str(worst)],
        capture_output=True, text=True, timeout=120, env=dict(os.environ),
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return out.read_text(encoding="utf-8")


def _y_ticks(html: str) -> list[list[tuple[float, str]]]:
    """(y position, label) of the y-axis ticks of each volume chart (the wide and the narrow one)."""
    svgs = [s for s in parse(html).find_all("svg") if s.attrs.get("aria-label") == VOLUME]
    assert svgs
    return [
        [
            (float(t.attrs["y"]), t.all_text())
            for t in svg.find_all("text", "tick")
            if t.attrs.get("text-anchor") == "end"  # the y axis (the x axis's dates are centred)
        ]
        for svg in svgs
    ]


@pytest.mark.parametrize("top", [10, 3, 7, 25, 130])
def test_volume_axis_ticks_are_evenly_spaced_whole_numbers(tmp_path, top):
    for ticks in _y_ticks(_report(tmp_path, [top, max(1, top // 2), top - 1, max(1, top // 3)])):
        labels = [label for _y, label in ticks]
        assert all(re.fullmatch(r"\d[\d,]*", label) for label in labels), labels
        values = [int(label.replace(",", "")) for label in labels]
        steps = {b - a for a, b in zip(values, values[1:])}
        assert len(steps) == 1, values  # evenly spaced: what a rounded 2.5 step (0, 2, 5, 8, 10) is not
        assert values[0] == 0 and values[-1] + steps.pop() > top, values  # up to the tallest bar
        # and each label stands where its value is: the positions are linear in the labels
        (y0, _), (y1, _) = ticks[0], ticks[1]
        per_unit = (y1 - y0) / (values[1] - values[0])
        for (y, _label), v in zip(ticks, values):
            assert y == pytest.approx(y0 + per_unit * v, abs=0.15), (labels, [t[0] for t in ticks])


def test_each_worst_case_card_labels_its_log_id(tmp_path):
    html = _report(tmp_path, [30, 30, 30], worst=4)
    cases = parse(html).find_all("div", "case")
    assert len(cases) == 4
    for case in cases:
        [head] = case.find_all("div", "case-head")
        text = " ".join(head.all_text().split())
        assert re.search(r"log id 2026-11-22-\d+\b", text), text
