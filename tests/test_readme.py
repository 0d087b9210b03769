"""Every Python example in README.md runs as written (except those that need a live endpoint)."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
RUNNABLE = [b for b in BLOCKS if "not run by tests/test_readme.py" not in b]


def test_readme_has_examples():
    assert len(RUNNABLE) >= 4


@pytest.mark.parametrize("code", RUNNABLE, ids=[f"block{i}" for i in range(len(RUNNABLE))])
def test_readme_example_runs(code, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("CTXPREC_JUDGE", raising=False)
    exec(compile(code, str(README), "exec"), {"__name__": "__readme__"})


def test_endpoint_examples_at_least_construct(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-placeholder")
    for code in BLOCKS:
        if "not run by tests/test_readme.py" in code:
            exec(compile(code, str(README), "exec"), {"__name__": "__readme__"})


def test_the_configuration_table_lists_exactly_the_settings():
    """README's configuration table and ``Settings`` name the same ``CTXPREC_*`` variables."""
    from ctxprec_ops.config import Settings

    text = README.read_text(encoding="utf-8")
    section = text[text.index("### Configuration") :]
    section = section[: section.index("\n## ")]
    rows = [line for line in section.splitlines() if line.startswith("| `CTXPREC_")]
    documented = {re.match(r"\| `(CTXPREC_[A-Z_]+)`", line).group(1) for line in rows}
    assert documented == set(Settings.variables())
