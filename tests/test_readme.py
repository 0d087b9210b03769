"""Every Python example in README.md runs as written (except those that need a live endpoint)."""

import re
from pathlib import Path

import pytest

README = Path(__file__).resolve().parent.parent / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.DOTALL)
RUNNABLE = [b for b in BLOCKS if "not run by tests/test_readme.py" not in b]


def test_readme_has_examples():
    assert len(RUNNABLE) >= 4


@pytest.mark.parametrize("code", RUNNABLE, ids=[f"block{i:02d}" for i in range(len(RUNNABLE))])
def test_readme_example_runs(code, tmp_path, monkeypatch):
    """Each example runs as written, and again in the same directory (a reader runs it twice)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("CTXPREC_JUDGE", raising=False)
    for _run in range(2):
        exec(compile(code, str(README), "exec"), {"__name__": "__readme__"})


def test_endpoint_examples_at_least_construct(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-placeholder")
    for code in BLOCKS:
        if "not run by tests/test_readme.py" in code:
            exec(compile(code, str(README), "exec"), {"__name__": "__readme__"})


def test_the_demo_calibration_figures_are_what_the_demo_computes(tmp_path):
    """README's "F1 ≈ …, κ ≈ …, score MAE ≈ …" of the lexical judge are the default demo's figures
    (same sample, same labels, same calibration as ``ctxprec demo``), to two decimals."""
    import sqlalchemy as sa

    from ctxprec_ops.calibration import calibrate, parse_labels
    from ctxprec_ops.calibration.demo_labels import demo_label_csv
    from ctxprec_ops.demo.job import DEMO_JUDGE
    from ctxprec_ops.demo.sample import create_sample_warehouse

    text = README.read_text(encoding="utf-8")
    found = re.search(r"F1 ≈ ([0-9.]+), κ ≈ ([0-9.]+), score MAE ≈ ([0-9.]+)", text)
    assert found, "the README states the demo's calibration figures"
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'demo.db'}")
    create_sample_warehouse(engine, end_date="2026-11-28")  # the demo's defaults (the days only shift dates)
    labels = parse_labels(demo_label_csv(engine), "demo labels")
    [result] = calibrate(engine, labels, [DEMO_JUDGE], resamples=500)
    a = result.agreement
    assert tuple(f"{x.value:.2f}" for x in (a.f1, a.kappa, a.mae)) == found.groups()
    labels_doc = (README.parent / "docs" / "labels.md").read_text(encoding="utf-8")
    doc = re.search(
        r"precision ≈ ([0-9.]+) but recall ≈ ([0-9.]+).*?κ ≈ ([0-9.]+) and score MAE ≈ ([0-9.]+)", labels_doc, re.DOTALL
    )
    assert doc, "docs/labels.md states the demo's calibration figures"
    assert tuple(f"{x.value:.2f}" for x in (a.precision, a.recall, a.kappa, a.mae)) == doc.groups()
