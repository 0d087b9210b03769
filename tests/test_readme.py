"""Every Python example of README.md and of the pages under docs/ is checked as written.

An example runs as written (twice, in an empty directory: a reader runs it twice) unless an HTML
comment right above its fence says otherwise — invisible on the rendered page:

- ``<!-- example: construct ... -->``: it needs a live endpoint; run with a placeholder API key, it
  must at least construct its objects (no request is made);
- ``<!-- example: compile ... -->``: Airflow or Dagster code, an instrumented app, a fragment —
  it must compile (dedented, so an excerpt of a class or a ``with`` block counts).
"""

from __future__ import annotations

import re
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
PAGES = [README, *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"(?:<!-- example: (?P<mode>[\w-]+)[^\n]*-->\n)?```python\n(?P<code>.*?)```", re.DOTALL)
MODES = ("run", "construct", "compile")


@dataclass(frozen=True)
class Example:
    page: Path
    line: int
    mode: str
    code: str

    @property
    def id(self) -> str:
        return f"{self.page.stem}-L{self.line}"

    def compiled(self):
        return compile(textwrap.dedent(self.code), f"{self.page} (line {self.line})", "exec")


def _examples() -> list[Example]:
    found = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in BLOCK.finditer(text):
            line = text.count("\n", 0, m.start("code")) + 1
            found.append(Example(page, line, m.group("mode") or "run", m.group("code")))
    return found


EXAMPLES = _examples()
RUNNABLE = [e for e in EXAMPLES if e.mode == "run"]

#: a line of each example the README used to run, wherever the example lives now: none of them
#: may stop being run
ONCE_IN_THE_README = (
    'metric = ContextualPrecisionMetric(threshold=0.5, model="lexical", include_reason=True)',
    "class KeywordJudge(JudgeModel):",
    'result = evaluate(cases, [ContextualPrecisionMetric(model="lexical")], concurrency=16)',
    "class KeywordLLM(DeepEvalBaseLLM):  # written for deepeval, unchanged",
    'metric = TurnContextualPrecisionMetric(model="lexical", window_size=1)',
    'again = score_partition(config, "2026-11-28")',
    'Path("renamed.db").unlink(missing_ok=True)',
    "metric = LabelContextualPrecisionMetric()",
    "class Wavering(JudgeModel):",
)


def test_every_example_says_how_it_is_checked():
    assert all(e.mode in MODES for e in EXAMPLES), [(e.id, e.mode) for e in EXAMPLES if e.mode not in MODES]


def test_the_readme_and_the_pages_have_runnable_examples():
    assert len([e for e in RUNNABLE if e.page == README]) >= 2  # the metric and the pipeline quick start
    assert len(RUNNABLE) >= 12


@pytest.mark.parametrize("line", ONCE_IN_THE_README)
def test_the_examples_moved_out_of_the_readme_are_still_run(line):
    assert any(line in e.code for e in RUNNABLE), f"no runnable example of README.md or docs/ has: {line}"


@pytest.mark.parametrize("example", RUNNABLE, ids=[e.id for e in RUNNABLE])
def test_example_runs(example, tmp_path, monkeypatch):
    """Each example runs as written, and again in the same directory (a reader runs it twice)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("CTXPREC_JUDGE", raising=False)
    code = example.compiled()
    for _run in range(2):
        exec(code, {"__name__": "__readme__"})


def test_endpoint_examples_at_least_construct(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-placeholder")
    examples = [e for e in EXAMPLES if e.mode == "construct"]
    assert examples, "the judges page shows how to point the metric at an endpoint"
    for example in examples:
        exec(example.compiled(), {"__name__": "__readme__"})


def test_the_other_examples_compile():
    for example in EXAMPLES:
        example.compiled()  # a SyntaxError names the page and the line


def test_the_demo_calibration_figures_are_what_the_demo_computes(tmp_path):
    """docs/labels.md's "F1 ≈ …, κ ≈ …, score MAE ≈ …" of the lexical judge are the default demo's
    figures (same sample, same labels, same calibration as ``ctxprec demo``), to two decimals."""
    import sqlalchemy as sa

    from ctxprec_ops.calibration import calibrate, parse_labels
    from ctxprec_ops.calibration.demo_labels import demo_label_csv
    from ctxprec_ops.demo.defaults import DEMO_JUDGE
    from ctxprec_ops.demo.sample import create_sample_warehouse

    labels_doc = (ROOT / "docs" / "labels.md").read_text(encoding="utf-8")
    found = re.search(r"F1 ≈ ([0-9]+\.[0-9]+), κ ≈ ([0-9]+\.[0-9]+), score MAE ≈ ([0-9]+\.[0-9]+)", labels_doc)
    assert found, "docs/labels.md states the demo's calibration figures"
    engine = sa.create_engine(f"sqlite:///{tmp_path / 'demo.db'}")
    create_sample_warehouse(engine, end_date="2026-11-28")  # the demo's defaults (the days only shift dates)
    labels = parse_labels(demo_label_csv(engine), "demo labels")
    [result] = calibrate(engine, labels, [DEMO_JUDGE], resamples=500)
    a = result.agreement
    assert tuple(f"{x.value:.2f}" for x in (a.f1, a.kappa, a.mae)) == found.groups()
    doc = re.search(
        r"precision ≈ ([0-9]+\.[0-9]+) but recall ≈ ([0-9]+\.[0-9]+).*?κ ≈ ([0-9]+\.[0-9]+) and score MAE ≈ ([0-9]+\.[0-9]+)",
        labels_doc,
        re.DOTALL,
    )
    assert doc, "docs/labels.md states the demo's calibration figures"
    assert tuple(f"{x.value:.2f}" for x in (a.precision, a.recall, a.kappa, a.mae)) == doc.groups()
