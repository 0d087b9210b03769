"""Screenshot an HTML report in headless Chromium (Debian ``chromium``), to check it renders.

    python scripts/screenshot_report.py report.html report.png [--width 1280] [--height 1600]
    python scripts/screenshot_report.py report.html report.png --width 390      # a phone
    python scripts/screenshot_report.py --warehouse sqlite:///ctxprec.db report.png
    python scripts/screenshot_report.py report.html --measure --width 390       # layout figures as JSON

Headless Chromium will not make a window narrower than 500 px, so narrower widths render the
report inside an iframe of exactly that width (a real viewport for the page's media queries).

With ``--warehouse`` the report is rendered first (to a temporary file). The browser runs
offline-safe: no network services, a throw-away profile. Exit 0 and the PNG path on success.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_browser() -> str | None:
    return next((p for p in (shutil.which(b) for b in BROWSERS) if p), None)


MIN_WINDOW = 500  # headless Chromium's narrowest window

#: measured inside the page once it has loaded; posted to the harness page, which --dump-dom prints
PROBE = """<script>
window.addEventListener('load', function () {
  var d = document.documentElement, vw = window.innerWidth;
  function box(e) { var r = e.getBoundingClientRect(); return {left: r.left, right: r.right, width: r.width,
                                                             height: r.height}; }
  function visible(e) { var r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0; }
  var out = {innerWidth: vw, scrollWidth: d.scrollWidth, boxes: [], charts: [], tables: [], expected: 0,
             messages: [], sections: []};
  document.querySelectorAll('section.card, .kpi, .banner, .case, header').forEach(function (e) {
    if (visible(e)) { var b = box(e); b.what = e.id || e.className || e.tagName; out.boxes.push(b); } });
  document.querySelectorAll('svg.chart').forEach(function (s) {
    if (!visible(s)) return;
    var b = box(s), fonts = [];
    s.querySelectorAll('text.tick').forEach(function (t) { fonts.push(t.getBoundingClientRect().height); });
    b.min_font = fonts.length ? Math.min.apply(null, fonts) : 0; b.title = s.getAttribute('aria-label');
    out.charts.push(b); });
  document.querySelectorAll('table').forEach(function (t) {
    if (!visible(t)) return;
    var card = t.closest('section.card'), wrap = t.parentElement;
    out.tables.push({wrap_right: wrap.getBoundingClientRect().right,
                     card_right: card ? card.getBoundingClientRect().right : vw,
                     scrolls_inside: getComputedStyle(wrap).overflowX === 'auto'}); });
  document.querySelectorAll('.case .expected').forEach(function (e) { if (visible(e)) out.expected++; });
  document.querySelectorAll('td.msg').forEach(function (e) {  // alert messages: whole, not scrolled off
    if (!visible(e)) return;
    var card = e.closest('section.card'), r = e.getBoundingClientRect();
    out.messages.push({left: r.left, right: r.right, card_left: card.getBoundingClientRect().left,
                       card_right: card.getBoundingClientRect().right}); });
  document.querySelectorAll('section.card').forEach(function (e) { if (e.id) out.sections.push(e.id); });
  parent.postMessage(JSON.stringify(out), '*');
});
</script>"""


def _chromium(args: list[str], timeout: float) -> subprocess.CompletedProcess[str]:
    browser = find_browser()
    if browser is None:
        raise FileNotFoundError("no chromium found (apt-get install -y chromium)")
    with tempfile.TemporaryDirectory(prefix="ctxprec-chromium-") as profile:
        cmd = [
            browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--hide-scrollbars", f"--user-data-dir={profile}", *args,
        ]  # fmt: skip
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)


def _harness(page: Path, width: int, height: int, script: str = "") -> str:
    """A page showing ``page`` in an iframe of exactly ``width`` x ``height`` CSS pixels."""
    return (
        '<!DOCTYPE html><html><body style="margin:0;overflow:hidden"><pre id="probe"></pre>'
        f'<iframe src="{page.name}" style="display:block;border:0;width:{width}px;height:{height}px"></iframe>'
        f"{script}</body></html>"
    )


def screenshot(html: Path, png: Path, *, width: int = 1280, height: int = 1600, timeout: float = 90) -> Path:
    png = png.resolve()
    png.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="ctxprec-shot-") as tmp:
        target = html.resolve()
        if width < MIN_WINDOW:
            page = Path(tmp) / "report.html"
            shutil.copyfile(html, page)
            target = Path(tmp) / "harness.html"
            target.write_text(_harness(page, width, height), encoding="utf-8")
        proc = _chromium(
            [f"--screenshot={png}", f"--window-size={max(width, MIN_WINDOW)},{height}", target.as_uri()], timeout
        )
    if not png.exists() or png.stat().st_size == 0:
        raise RuntimeError(f"chromium wrote no screenshot (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    return png


def measure_layout(html: Path, *, width: int, height: int = 900, timeout: float = 90) -> dict[str, Any]:
    """Load the report at a viewport ``width`` CSS px wide and return what the page measured:
    ``innerWidth``, ``scrollWidth`` (> innerWidth means the page scrolls sideways), the boxes of the
    cards/KPIs/banners/cases, the visible charts (size, smallest tick label), the tables (the right
    edge of their wrapper vs their card's), the number of visible expected outputs, the alert
    message cells (their edges vs their card's) and the ids of the sections."""
    listen = (
        "<script>window.addEventListener('message', function (e) {"
        " document.getElementById('probe').textContent = e.data; });</script>"
    )
    with tempfile.TemporaryDirectory(prefix="ctxprec-layout-") as tmp:
        page = Path(tmp) / "report.html"
        page.write_text(html.read_text(encoding="utf-8").replace("</body>", PROBE + "</body>"), encoding="utf-8")
        harness = Path(tmp) / "harness.html"
        harness.write_text(_harness(page, width, height, listen), encoding="utf-8")
        proc = _chromium(
            [
                f"--window-size={max(width, MIN_WINDOW) + 20},{height + 100}",
                "--virtual-time-budget=10000",
                "--dump-dom",
                harness.as_uri(),
            ],
            timeout,
        )
    start = proc.stdout.find('<pre id="probe">')
    end = proc.stdout.find("</pre>", start)
    if start < 0 or end < 0 or end == start + len('<pre id="probe">'):
        raise RuntimeError(
            f"chromium returned no layout figures (exit {proc.returncode}): {proc.stderr.strip()[-500:]}"
        )
    import html as _html

    return json.loads(_html.unescape(proc.stdout[start + len('<pre id="probe">') : end]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("html", nargs="?", help="the report to screenshot (omit with --warehouse)")
    ap.add_argument("png", nargs="?", help="where to write the PNG")
    ap.add_argument("--measure", action="store_true", help="print the layout figures (JSON) instead")
    ap.add_argument("--warehouse", help="render the report of this warehouse first")
    ap.add_argument("--days", type=int, default=30)
    ap.add_argument("--width", type=int, default=1280)
    ap.add_argument("--height", type=int, default=1600)
    args = ap.parse_args(argv)
    if args.warehouse:
        from ctxprec_ops.monitoring.report import render_report

        html = render_report(args.warehouse, Path(tempfile.mkdtemp()) / "report.html", days=args.days)
    elif args.html:
        html = Path(args.html)
    else:
        ap.error("give the HTML file or --warehouse")
    if args.measure:
        print(json.dumps(measure_layout(html, width=args.width), indent=2))
    elif args.png:
        print(screenshot(html, Path(args.png), width=args.width, height=args.height))
    else:
        ap.error("give the PNG path or --measure")
    return 0


if __name__ == "__main__":
    sys.exit(main())
