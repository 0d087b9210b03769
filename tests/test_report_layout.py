"""The HTML reports' layout measured in headless Chromium at a phone width (390 px) and a desktop
width (1280 px): no sideways page scroll, every card inside the viewport, wide tables scroll inside
their card, alert messages whole inside their card, charts keep a readable height and tick labels.

Covered: every report ``ctxprec demo`` writes (retrievals, conversations, labels — with the
calibration table), a report of long unbroken tokens, and a report with per-segment sections and a
version comparison. Without Chromium the test skips locally; in CI (``CI`` or
``CTXPREC_SLOW_TESTS`` set, as ``.ci/run`` does after ``apt-get install -y chromium``) it fails.
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa

from ctxprec_ops.monitoring import render_report
from scripts.screenshot_report import find_browser, measure_layout
from tests.synthetic_history import Day, beta_scores, day_keys, write_history, write_source_logs

IN_CI = bool(os.environ.get("CI") or os.environ.get("CTXPREC_SLOW_TESTS"))

pytestmark = pytest.mark.skipif(
    find_browser() is None and not IN_CI, reason="no chromium installed (apt-get install -y chromium)"
)

LAST = "2026-11-30"
LONG = "a-very-long-unbroken-token-" * 12  # must wrap, not widen the page
EXPECTED = "Refunds are paid back within five business days to the original payment method."
WIDTHS = [390, 1280]


@pytest.fixture(scope="module", autouse=True)
def _browser() -> None:
    if find_browser() is None:  # only reached in CI: the layout must be measured there
        pytest.fail(
            "CI runs the report layout test: chromium is missing (.ci/run installs it: apt-get install -y chromium)"
        )


@pytest.fixture(scope="module")
def long_tokens(tmp_path_factory) -> Path:
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


@pytest.fixture(scope="module")
def demo_reports(tmp_path_factory) -> dict[str, Path]:
    """The three reports the demo writes (small volumes, the demo's own 14-day shape)."""
    from ctxprec_ops.demo.job import run_demo

    tmp = tmp_path_factory.mktemp("demo")
    result = run_demo(
        f"sqlite:///{tmp / 'demo.db'}", rows_per_day=(40, 60), conversations_per_day=(4, 6),
        out=str(tmp / "ctxprec_report.html"),
    )  # fmt: skip
    assert set(result.reports) == {"contextual_precision", "turn_contextual_precision", "label_contextual_precision"}
    return {name: Path(p) for name, p in result.reports.items()}


@pytest.fixture(scope="module")
def segments_report(tmp_path_factory) -> Path:
    from tests.segment_data import BAD_DAY, build

    tmp = tmp_path_factory.mktemp("seg")
    url = build(f"sqlite:///{tmp / 'wh.db'}")
    out = render_report(
        url, tmp / "segments.html", days=9, by=["tenant"],
        comparison={"by": "retriever_version", "baseline": "v1", "candidate": "v2", "pair_on": "query_id",
                    "within": "tenant", "partition": BAD_DAY},
    )  # fmt: skip
    return out


def _fits(m: dict, width: int, *, charts: int = 3) -> None:
    assert m["innerWidth"] == width
    assert m["scrollWidth"] <= width, f"the page scrolls sideways at {width}px ({m['scrollWidth']}px wide)"
    for b in m["boxes"]:
        assert b["left"] >= 0 and b["right"] <= width + 0.5, b
    assert m["tables"], "no table measured"
    for t in m["tables"]:  # a table wider than its card scrolls inside it
        assert t["wrap_right"] <= t["card_right"] + 0.5 and t["scrolls_inside"], t
    for msg in m["messages"]:  # an alert message is read whole, without scrolling the table
        assert msg["left"] >= msg["card_left"] - 0.5 and msg["right"] <= msg["card_right"] + 0.5, msg
    assert len(m["charts"]) == charts, m["charts"]
    for c in m["charts"]:
        assert c["right"] <= width, c
        assert c["height"] >= 180, f"chart {c['title']!r} is {c['height']:.0f}px tall at {width}px"
        assert c["min_font"] >= 9.5, f"chart {c['title']!r} has {c['min_font']:.1f}px labels at {width}px"


@pytest.mark.parametrize("width", WIDTHS)
def test_long_tokens_report_fits_the_screen(long_tokens, width):
    m = measure_layout(long_tokens, width=width)
    _fits(m, width)
    assert m["messages"], "the alert table was not measured"
    assert m["expected"] == 3  # every worst case shows the expected output the judge compared against


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("metric", ["contextual_precision", "turn_contextual_precision", "label_contextual_precision"])
def test_every_demo_report_fits_the_screen(demo_reports, metric, width):
    m = measure_layout(demo_reports[metric], width=width)
    _fits(m, width)
    assert "calibration" in m["sections"]  # the judge calibration table is measured too
    assert m["messages"], "the demo's dip days raise alerts: their table must be measured"


@pytest.mark.parametrize("width", WIDTHS)
def test_segments_and_comparison_fit_the_screen(segments_report, width):
    m = measure_layout(segments_report, width=width)
    _fits(m, width)
    assert {"segments-tenant", "comparison"} <= set(m["sections"])
