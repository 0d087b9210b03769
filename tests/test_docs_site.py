"""The documentation site: every page of docs/ is in mkdocs.yml's nav, the README and the site's
home page index every page, no page sends users to internal notes, and ``mkdocs build --strict``
passes (no broken link or anchor, no page left out)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(p.name for p in DOCS.glob("*.md"))


def _nav_pages(nav) -> list[str]:
    out = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        out += _nav_pages(value) if isinstance(value, list) else [value]
    return out


def test_every_page_is_in_the_nav_once():
    yaml = pytest.importorskip("yaml")
    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    nav = _nav_pages(config["nav"])
    assert sorted(nav) == PAGES, set(PAGES) ^ set(nav)


@pytest.mark.parametrize("index", ["README.md", "docs/index.md"])
def test_the_indexes_link_every_page(index):
    text = (ROOT / index).read_text(encoding="utf-8")
    prefix = "docs/" if index == "README.md" else ""
    linked = set(re.findall(rf"\]\({re.escape(prefix)}([\w-]+\.md)\)", text))
    assert set(PAGES) - {"index.md"} <= linked, set(PAGES) - {"index.md"} - linked


def test_the_readme_is_short():
    assert len((ROOT / "README.md").read_text(encoding="utf-8").splitlines()) <= 300
    assert len((ROOT / "bench" / "README.md").read_text(encoding="utf-8").splitlines()) <= 400


def test_no_page_points_users_at_internal_notes():
    """The user docs stand alone: no design notes outside the repository, no issue numbers."""
    for page in [ROOT / "README.md", ROOT / "bench" / "README.md", *DOCS.glob("*.md")]:
        text = page.read_text(encoding="utf-8")
        assert "DESIGN.md" not in text, page.name
        assert not re.search(r"\b[Ii]ssues? #?\d+", text), (page.name, re.search(r".{40}\b[Ii]ssues? #?\d+.{20}", text))


def test_the_site_builds_in_strict_mode(tmp_path):
    pytest.importorskip("mkdocs", reason="the docs extra is not installed (make test installs it)")
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "mkdocs",
            "build",
            "--strict",
            "-f",
            str(ROOT / "mkdocs.yml"),
            "-d",
            str(tmp_path / "site"),
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert (tmp_path / "site" / "index.html").exists()
    for page in PAGES:  # every page is built
        name = page.removesuffix(".md")
        assert (tmp_path / "site" / ("index.html" if name == "index" else f"{name}/index.html")).exists(), page
