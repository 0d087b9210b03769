"""The code's comments and the docs stand alone and stay true to the tree: no issue numbers (the
history lives in git), no pointer to the project's design notes, and every source file they name
exists (a module moved or removed takes its mentions with it)."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
TREES = ("ctxprec_ops", "dags", "dagster_defs", "scripts", "bench", "docs")
TOP = ("README.md",)
SUFFIXES = {".py", ".md", ".j2", ".sh", ".yml", ".yaml", ".toml", ".html"}

ISSUE = re.compile(r"\bissues? #?\d+|\(issue\b|\bDESIGN\.md\b", re.IGNORECASE)
PACKAGES = "airflow|batch|calibration|cases|cli|config|dagster|demo|evaluation|judge|metrics|monitoring|pipeline|scoring|traces|warehouse"
#: a path to a source file of this tree: ``ctxprec_ops/x/y.py``, ``warehouse/rows.py``, ``tests/test_x.py``
SOURCE_PATH = re.compile(
    rf"(?<![\w/.-])((?:ctxprec_ops|{PACKAGES}|tests|bench|scripts|dags|dagster_defs)/[\w/]*\w\.py)\b"
)


def _texts() -> list[tuple[Path, str]]:
    paths = [ROOT / name for name in TOP]
    for tree in TREES:
        paths += [p for p in sorted((ROOT / tree).rglob("*")) if p.is_file() and p.suffix in SUFFIXES]
    return [(p, p.read_text(errors="replace")) for p in paths]


def _exists(path: str) -> bool:
    if (ROOT / path).exists():
        return True
    return (ROOT / "ctxprec_ops" / path.removeprefix("ctxprec_ops/")).exists()


def issue_mentions(text: str) -> list[str]:
    return [m.group(0) for m in ISSUE.finditer(text)]


def missing_sources(text: str) -> list[str]:
    return [m.group(1) for m in SOURCE_PATH.finditer(text) if not _exists(m.group(1))]


def test_no_issue_numbers_or_design_notes_in_code_comments_and_docs():
    found = [
        f"{p.relative_to(ROOT)}:{n}: {line.strip()[:120]}"
        for p, text in _texts()
        for n, line in enumerate(text.splitlines(), start=1)
        if issue_mentions(line)
    ]
    assert found == [], "say what the code does and why, without the history (it lives in git)"


def test_every_source_file_named_in_comments_and_docs_exists():
    found = [
        f"{p.relative_to(ROOT)}:{n}: {path}"
        for p, text in _texts()
        for n, line in enumerate(text.splitlines(), start=1)
        for path in missing_sources(line)
    ]
    assert found == [], "name the module where the code lives now"


def test_the_searches_find_what_they_are_for():
    assert issue_mentions("bench/README.md, issue 16's sixth pass)") == ["issue 16"]
    assert issue_mentions("Targets (issue 30): --help") != []
    assert issue_mentions("see issues #12") != []
    assert issue_mentions("the public columns (DESIGN.md)") == ["DESIGN.md"]
    assert issue_mentions("a chat about one issue: the first question") == []
    assert missing_sources("each row into a test case (`warehouse/rows.py`)") == ["warehouse/rows.py"]
    assert missing_sources("see ctxprec_ops/judging.py and tests/test_nothing_here.py") == [
        "ctxprec_ops/judging.py",
        "tests/test_nothing_here.py",
    ]
    assert missing_sources("rows into cases (`pipeline/rows.py`, tests/test_pipeline.py)") == []
    assert missing_sources("the user's own rag_app.py, deepeval's test_multi_turn/test_turn.py") == []
