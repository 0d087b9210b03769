"""The HTML report: parsed structurally (escaping, markers, self-containment), then rendered
in headless Chromium when it is installed."""

from __future__ import annotations

import struct
import zlib
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
import sqlalchemy as sa

from ctxprec_ops.monitoring import load_trend, render_report
from ctxprec_ops.monitoring.alerts import AlertRules
from tests.synthetic_history import Day, beta_scores, day_keys, write_history, write_source_logs

EVIL_NODE = '</node><script>alert("node")</script><img src=x onerror=alert(1)>'
EVIL_REASON = "<script>alert('reason')</script> & <b>bold</b>"
EVIL_INPUT = "What is <iframe src=//evil.example></iframe> the refund window?"
LAST = "2026-11-30"

VOID = {"meta", "br", "img", "input", "link", "hr", "col", "source", "area", "base", "wbr"}


class Node:
    def __init__(self, tag: str, attrs: dict[str, str | None], parent: Node | None) -> None:
        self.tag, self.attrs, self.parent, self.children, self.text = tag, attrs, parent, [], []

    def iter(self):
        yield self
        for c in self.children:
            yield from c.iter()

    def find_all(self, tag: str, cls: str | None = None) -> list[Node]:
        return [n for n in self.iter() if n.tag == tag and (cls is None or cls in (n.attrs.get("class") or "").split())]

    def all_text(self) -> str:
        return "".join(self.text) + "".join(c.all_text() for c in self.children)


class Tree(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.root = self.cur = Node("#root", {}, None)

    def handle_starttag(self, tag, attrs):
        node = Node(tag, dict(attrs), self.cur)
        self.cur.children.append(node)
        if tag not in VOID:
            self.cur = node

    def handle_startendtag(self, tag, attrs):
        self.cur.children.append(Node(tag, dict(attrs), self.cur))

    def handle_endtag(self, tag):
        n = self.cur
        while n is not None and n.tag != tag:
            n = n.parent
        assert n is not None and n.parent is not None, f"unbalanced </{tag}>"
        self.cur = n.parent

    def handle_data(self, data):
        self.cur.text.append(data)


def parse(html: str) -> Node:
    t = Tree()
    t.feed(html)
    t.close()
    assert t.cur is t.root, "unclosed elements"
    return t.root


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> str:
    path = tmp_path_factory.mktemp("report") / "wh.db"
    eng = sa.create_engine(f"sqlite:///{path}")
    rng = np.random.default_rng(42)
    days = []
    for k in day_keys("2026-11-16", 15):
        if k == "2026-11-22":
            continue  # a silent day
        n = 80
        scores = beta_scores(rng, n, 0.55 if k == LAST else 0.74)
        verdicts = [
            [
                {"node": j, "relevant": bool((i + j) % 2), "reason": EVIL_REASON if j == 1 else f"reason {j}"}
                for j in (3, 1, 2)
            ]
            for i in range(n)
        ]  # deliberately out of order: the report sorts by rank
        days.append(Day(k, scores, failed=40 if k == "2026-11-25" else 1, verdicts=verdicts, reasons=[EVIL_REASON] * n))
    write_history(eng, days)
    write_source_logs(
        eng,
        [
            {"id": f"{LAST}-{i}", "input": EVIL_INPUT, "retrieval_context": [EVIL_NODE, "second node", "third node"]}
            for i in range(80)
        ],
    )
    eng.dispose()
    return f"sqlite:///{path}"


@pytest.fixture(scope="module")
def report(warehouse, tmp_path_factory) -> tuple[Path, Node, str]:
    out = tmp_path_factory.mktemp("out") / "report.html"
    assert render_report(warehouse, out, days=15, min_mean=0.6, worst=5) == out
    html = out.read_text(encoding="utf-8")
    return out, parse(html), html


def test_report_is_self_contained(report):
    _, root, html = report
    assert not root.find_all("script") and not root.find_all("link") and not root.find_all("iframe")
    assert not root.find_all("img")
    for node in root.iter():
        for name, value in node.attrs.items():
            assert name not in ("src", "href") and not name.startswith("on"), (node.tag, name, value)
    css = "".join(s.all_text() for s in root.find_all("style"))
    assert "url(" not in css and "@import" not in css
    # the only URL-looking string is the SVG namespace
    assert html.replace("http://www.w3.org/2000/svg", "").count("http") == 0


def test_untrusted_text_is_escaped(report):
    _, root, html = report
    assert EVIL_NODE not in html and EVIL_REASON not in html and EVIL_INPUT not in html
    cases = root.find_all("div", "case")
    assert len(cases) == 5
    text = cases[0].all_text()
    assert EVIL_NODE in text and EVIL_REASON in text and EVIL_INPUT in text  # shown, as text


def test_alert_markers_on_alerting_days(report, warehouse):
    _, root, _ = report
    df = load_trend(warehouse, days=15, rules=AlertRules(min_mean=0.6))
    alert_idx = {i for i, a in enumerate(df["alerts"]) if a}
    days = list(df["partition_key"])
    assert {days[i] for i in alert_idx} >= {LAST, "2026-11-22", "2026-11-25"}  # regression+min_mean, volume, failures
    mean_chart = root.find_all("section", None)
    mean_chart = next(s for s in root.find_all("section") if s.attrs.get("id") == "chart-mean")
    marks = {int(g.attrs["data-day-index"]) for g in mean_chart.find_all("g", "alert-marker")}
    assert marks == alert_idx
    volume = next(s for s in root.find_all("section") if s.attrs.get("id") == "chart-volume")
    assert {days[int(g.attrs["data-day-index"])] for g in volume.find_all("g", "alert-marker")} == {
        "2026-11-22",
        "2026-11-25",
    }
    # the partition table highlights the same days, and the alert list names them
    rows = {
        tr.attrs["data-partition"]: tr
        for tr in root.find_all("tr")
        if "data-partition" in tr.attrs and "alert-row" not in (tr.attrs.get("class") or "")
    }
    assert {k for k, tr in rows.items() if "alerting" in (tr.attrs.get("class") or "")} == {days[i] for i in alert_idx}
    banner = next(d for d in root.find_all("div") if d.attrs.get("id") == "latest-alerts")
    assert "regression" in banner.all_text() and "min_mean" in banner.all_text()


def test_charts_have_band_threshold_and_worst_cases_sorted(report):
    _, root, _ = report
    mean_chart = next(s for s in root.find_all("section") if s.attrs.get("id") == "chart-mean")
    assert mean_chart.find_all("polygon", "ci-band")
    labels = [t.all_text() for t in mean_chart.find_all("text", "hlabel")]
    assert any(lbl.startswith("min_mean") and "0.60" in lbl for lbl in labels)
    assert any(lbl.startswith("case threshold") for lbl in labels)
    scores = [float(c.find_all("span", "score")[0].all_text()) for c in root.find_all("div", "case")]
    assert scores == sorted(scores)
    ranks = [td.all_text() for td in root.find_all("div", "case")[0].find_all("td", "rank")]
    assert ranks == ["#1", "#2", "#3"]
    verdict_cells = root.find_all("div", "case")[0].find_all("td", "verdict")
    assert all(td.all_text() in ("✓", "✗") for td in verdict_cells)


def test_empty_warehouse_and_bad_path(tmp_path):
    eng = sa.create_engine(f"sqlite:///{tmp_path / 'e.db'}")
    write_history(eng, [])
    out = render_report(eng, tmp_path / "r.html")
    assert "No data" in out.read_text()
    with pytest.raises(ValueError, match=r"\.html"):
        render_report(eng, tmp_path / "r.txt")
    with pytest.raises(ValueError, match="does not exist"):
        render_report(eng, tmp_path / "missing" / "r.html")


def _png_pixels_vary(png: bytes) -> tuple[int, int, bool]:
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, w, h = 8, b"", 0, 0
    while pos < len(png):
        (length,) = struct.unpack(">I", png[pos : pos + 4])
        kind, data = png[pos + 4 : pos + 8], png[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            w, h = struct.unpack(">II", data[:8])
        elif kind == b"IDAT":
            idat += data
        pos += 12 + length
    raw = zlib.decompress(idat)
    return w, h, len(set(raw[:200_000])) > 20


def test_renders_in_headless_chromium(report, tmp_path):
    pytest.importorskip("scripts.screenshot_report")
    from scripts.screenshot_report import find_browser, screenshot

    if find_browser() is None:
        pytest.skip("chromium is not installed")
    out, _, _ = report
    png = screenshot(out, tmp_path / "report.png", width=1280, height=1600)
    w, h, varied = _png_pixels_vary(png.read_bytes())
    assert (w, h) == (1280, 1600) and varied


def test_turn_metric_windows_render_separately(tmp_path):
    """Turn-metric verdicts are window lists back to back (ids restart): one table per window."""
    eng = sa.create_engine(f"sqlite:///{tmp_path / 't.db'}")
    v = [{"node": 2, "relevant": True, "reason": "w1 n2"}, {"node": 1, "relevant": False, "reason": "w1 n1"},
         {"node": 1, "relevant": True, "reason": "w2 n1"}]  # fmt: skip
    write_history(eng, [Day(LAST, [0.25, 0.9], verdicts=[v, v[:1]])], metric="turn_contextual_precision")
    out = render_report(eng, tmp_path / "t.html", metric="turn_contextual_precision", worst=1)
    [case] = parse(out.read_text()).find_all("div", "case")
    tables = case.find_all("table", "nodes")
    assert len(tables) == 2
    assert [td.all_text() for td in tables[0].find_all("td", "rank")] == ["#1", "#2"]
    assert "w2 n1" in tables[1].all_text() and "window 2 of 2" in case.all_text()


def test_worst_cases_show_the_expected_output(report):
    _, root, _ = report
    case = root.find_all("div", "case")[0]
    expected = case.find_all("div", "expected")
    assert expected and "".join(expected[0].text) == "x"  # the fixture's expected_output
