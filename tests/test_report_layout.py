"""The HTML report's layout measured in headless Chromium at a phone width (390 px) and a desktop
width (1280 px): no sideways page scroll, every card inside the viewport, wide tables scroll inside
their card, charts keep a readable height and tick labels, the worst cases show the expected output.

Skips (with the reason) where no Chromium is installed: `apt-get install -y chromium`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa

from ctxprec_ops.monitoring import render_report
from scripts.screenshot_report import find_browser, measure_layout
from tests.synthetic_history import Day, beta_scores, day_keys, write_history, write_source_logs

pytestmark = pytest.mark.skipif(find_browser() is None, reason="no chromium installed (apt-get install -y chromium)")

LAST = "2026-11-30"
LONG = "a-very-long-unbroken-token-" * 12  # must wrap, not widen the page
EXPECTED = "Refunds are paid back within five business days to the original payment method."


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("layout")
    eng = sa.create_engine(f"sqlite:///{tmp / 'wh.db'}")
    rng = np.random.default_rng(7)
    days = []
    for k in day_keys("2026-11-01", 30):  # 30 days: the longest default window
        scores = beta_scores(rng, 60, 0.45 if k in ("2026-11-20", LAST) else 0.74)
        verdicts = [
            [{"node": j, "relevant": bool((i + j) % 2), "reason": f"reason {j} " + LONG} for j in (1, 2, 3)]
            for i in range(60)
        ]
        days.append(Day(k, scores, failed=2, verdicts=verdicts, reasons=["why " + LONG] * 60))
    write_history(eng, days)
    write_source_logs(
        eng,
        [
            {
                "id": f"{LAST}-{i}",
                "input": "How long do refunds take? " + LONG,
                "expected_output": EXPECTED,
                "retrieval_context": [LONG, "second node", "third"],
            }
            for i in range(60)
        ],
    )
    eng.dispose()
    out = render_report(
        f"sqlite:///{tmp / 'wh.db'}", tmp / "report.html", days=30, min_mean=0.6, min_pass_rate=0.7, worst=3
    )
    assert EXPECTED in out.read_text(encoding="utf-8")
    return out


@pytest.mark.parametrize("width", [390, 1280])
def test_report_layout_fits_the_screen(report, width):
    m = measure_layout(report, width=width)
    assert m["innerWidth"] == width
    assert m["scrollWidth"] <= width, f"the page scrolls sideways at {width}px ({m['scrollWidth']}px wide)"
    for b in m["boxes"]:
        assert b["left"] >= 0 and b["right"] <= width + 0.5, b
    assert m["tables"], "no table measured"
    for t in m["tables"]:  # a table wider than its card scrolls inside it
        assert t["wrap_right"] <= t["card_right"] + 0.5 and t["scrolls_inside"], t
    assert len(m["charts"]) == 3, m["charts"]
    for c in m["charts"]:
        assert c["right"] <= width, c
        assert c["height"] >= 180, f"chart {c['title']!r} is {c['height']:.0f}px tall at {width}px"
        assert c["min_font"] >= 9.5, f"chart {c['title']!r} has {c['min_font']:.1f}px labels at {width}px"
    assert m["expected"] == 3  # every worst case shows the expected output the judge compared against
