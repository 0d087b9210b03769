"""Screenshot an HTML report in headless Chromium (Debian ``chromium``), to check it renders.

    python scripts/screenshot_report.py report.html report.png [--width 1280] [--height 1600]
    python scripts/screenshot_report.py --warehouse sqlite:///ctxprec.db report.png

With ``--warehouse`` the report is rendered first (to a temporary file). The browser runs
offline-safe: no network services, a throw-away profile. Exit 0 and the PNG path on success.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")


def find_browser() -> str | None:
    return next((p for p in (shutil.which(b) for b in BROWSERS) if p), None)


def screenshot(html: Path, png: Path, *, width: int = 1280, height: int = 1600, timeout: float = 90) -> Path:
    browser = find_browser()
    if browser is None:
        raise FileNotFoundError("no chromium found (apt-get install -y chromium)")
    png = png.resolve()
    png.unlink(missing_ok=True)
    with tempfile.TemporaryDirectory(prefix="ctxprec-chromium-") as profile:
        cmd = [
            browser, "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
            "--disable-background-networking", "--disable-component-update", "--disable-sync",
            "--hide-scrollbars", f"--user-data-dir={profile}", f"--screenshot={png}",
            f"--window-size={width},{height}", html.resolve().as_uri(),
        ]  # fmt: skip
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    if not png.exists() or png.stat().st_size == 0:
        raise RuntimeError(f"chromium wrote no screenshot (exit {proc.returncode}): {proc.stderr.strip()[-500:]}")
    return png


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("html", nargs="?", help="the report to screenshot (omit with --warehouse)")
    ap.add_argument("png", help="where to write the PNG")
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
    print(screenshot(html, Path(args.png), width=args.width, height=args.height))
    return 0


if __name__ == "__main__":
    sys.exit(main())
