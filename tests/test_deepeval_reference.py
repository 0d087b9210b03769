"""Comparisons against the deepeval package itself (issue 36): same case, same verdicts, same
score; the same errors, private attributes, field coercions and ``ToolCall`` hashes; deepeval's
own objects (cases, grouped items, images) scored by ctxprec-ops; and ``test_deepeval_style.py``
run on deepeval with only its import block replaced.

deepeval is not a dependency of the project, nor of its ``test`` extra: deepeval 4.3.1 pins
``tabulate<0.10`` against the ``tabulate==0.10.0`` that constraints.txt holds for Airflow and
Dagster, and it installs a pytest plugin (plus pytest-asyncio, -xdist, -rerunfailures, -repeat)
that would load into every run of this suite. These tests run where deepeval is installed
(``pip install deepeval==4.3.1`` into the test environment) and are skipped otherwise.
"""

from __future__ import annotations

import os
import random
import re
import subprocess
import sys
from pathlib import Path

import pytest

os.environ.setdefault("DEEPEVAL_TELEMETRY_OPT_OUT", "YES")
deepeval = pytest.importorskip(
    "deepeval",
    reason="deepeval is not installed here (not in the test extra: it conflicts with the pinned tabulate "
    "and installs pytest plugins); `pip install deepeval==4.3.1` to compare against it",
)
import deepeval.metrics as de_metrics  # noqa: E402
import deepeval.models as de_models  # noqa: E402
import deepeval.test_case as de  # noqa: E402

import ctxprec_ops as cp  # noqa: E402
from ctxprec_ops.cases.contexts import context_nodes  # noqa: E402
from tests.test_deepeval_test_case_parity import BAD_INPUT  # noqa: E402

CAT = "https://images.example.com/cat.png"
_OURS_TO_THEIRS = {
    cp.LLMTestCase: de.LLMTestCase,
    cp.Turn: de.Turn,
    cp.ConversationalTestCase: de.ConversationalTestCase,
}


def _scripted(base: type) -> type:
    """A custom model class on ``base`` (deepeval's or our ``DeepEvalBaseLLM``) answering the
    verdicts it is given, in node order."""

    class Scripted(base):  # type: ignore[misc, valid-type]
        def __init__(self, verdicts: list[str], multimodal: bool = False) -> None:
            self.verdicts, self.reads_images, self.prompts = verdicts, multimodal, []
            super().__init__("scripted")

        def load_model(self):
            return self

        def get_model_name(self):
            return "scripted"

        def supports_multimodal(self):
            return self.reads_images

        def generate(self, prompt, schema=None):
            self.prompts.append(prompt)
            if "verdicts" not in schema.model_fields:
                return schema(reason="r")
            items = [
                {"node": k, "relevant": v == "yes", "verdict": v, "reason": v} for k, v in enumerate(self.verdicts, 1)
            ]
            return schema(verdicts=items)

        async def a_generate(self, prompt, schema=None):
            return self.generate(prompt, schema)

    return Scripted


TheirJudge, OurJudge = _scripted(de_models.DeepEvalBaseLLM), _scripted(cp.DeepEvalBaseLLM)


def _random_items(rng: random.Random, lib) -> list:
    sources = ["faq.md", "policy.md", "guide.md"]
    items = []
    for i in range(rng.randint(1, 8)):
        if rng.random() < 0.6:
            items.append(lib.RetrievedContextData(context=f"passage {i}", source=rng.choice(sources)))
        else:
            items.append(f"plain passage {i}")
    return items


def _node_count(items) -> int:
    return len({i.source for i in items if not isinstance(i, str)}) + sum(isinstance(i, str) for i in items)


def test_grouped_context_same_verdicts_same_score_as_deepeval():
    rng = random.Random(43)
    for _ in range(40):
        seed = rng.random()
        theirs_items, ours_items = _random_items(random.Random(seed), de), _random_items(random.Random(seed), cp)
        n = _node_count(ours_items)
        verdicts = [rng.choice(["yes", "no"]) for _ in range(n)]
        kw = dict(input="q", expected_output="a")
        their_metric = de_metrics.ContextualPrecisionMetric(model=TheirJudge(verdicts), include_reason=False)
        our_metric = cp.ContextualPrecisionMetric(model=OurJudge(verdicts), include_reason=False)
        their_score = their_metric.measure(de.LLMTestCase(**kw, retrieval_context=theirs_items))
        our_score = our_metric.measure(cp.LLMTestCase(**kw, retrieval_context=ours_items))
        assert our_score == pytest.approx(their_score, abs=1e-12), (theirs_items, verdicts)
        # the same nodes in the same order: each node holds the same passages
        theirs_nodes = their_metric._group_retrieval_contexts(theirs_items)
        ours_nodes = context_nodes(ours_items)
        assert len(theirs_nodes) == len(ours_nodes) == n
        for t, o in zip(theirs_nodes, ours_nodes):
            assert re.findall(r"passage \d+", t) == re.findall(r"passage \d+", o)


def test_the_issues_example_on_both():
    items = [("faq.md", "a"), None, ("policy.md", "refunds"), ("faq.md", "b")]

    def build(lib):
        return [
            lib.RetrievedContextData(source=s, context=c) if s else "plain"
            for s, c in (x or (None, None) for x in items)
        ]

    verdicts = ["no", "no", "yes"]
    theirs = de_metrics.ContextualPrecisionMetric(model=TheirJudge(verdicts)).measure(
        de.LLMTestCase(input="q", expected_output="a", retrieval_context=build(de))
    )
    ours = cp.ContextualPrecisionMetric(model=OurJudge(verdicts)).measure(
        cp.LLMTestCase(input="q", expected_output="a", retrieval_context=build(cp))
    )
    assert theirs == ours == pytest.approx(1 / 3)


def test_turn_metric_items_are_not_grouped_on_either():
    def conv(lib):
        R = lib.RetrievedContextData
        return lib.ConversationalTestCase(
            turns=[
                lib.Turn(role="user", content="refunds?"),
                lib.Turn(
                    role="assistant",
                    content="5 days",
                    retrieval_context=[
                        R(context="a", source="faq.md"),
                        R(context="b", source="faq.md"),
                        R(context="c", source="p.md"),
                    ],
                ),
            ],
            expected_outcome="x",
        )

    verdicts = ["no", "no", "yes"]
    theirs = de_metrics.TurnContextualPrecisionMetric(model=TheirJudge(verdicts), include_reason=False).measure(
        conv(de)
    )
    ours = cp.TurnContextualPrecisionMetric(model=OurJudge(verdicts), include_reason=False).measure(conv(cp))
    assert theirs == ours == pytest.approx(1 / 3)


def test_deepevals_own_image_case_scored_by_ctxprec_with_the_image():
    cat = de.MLLMImage(url=CAT)
    items = [f"{cat}", de.RetrievedContextData(context="dogs", source="pets.md"), "birds"]
    case = de.LLMTestCase(input=f"Which is {cat}?", expected_output="a cat", retrieval_context=items)
    assert case.multimodal is True
    verdicts = ["yes", "no", "yes"]
    theirs = de_metrics.ContextualPrecisionMetric(model=TheirJudge(verdicts, multimodal=True), include_reason=False)
    judge = OurJudge(verdicts, multimodal=True)
    ours = cp.ContextualPrecisionMetric(model=judge, include_reason=False)
    assert ours.measure(case) == pytest.approx(theirs.measure(case))
    (prompt,) = judge.prompts
    assert [i.url for i in prompt.images] == [CAT, CAT]  # the question's and the node's, from deepeval's registry
    # deepeval's own helper finds the images of our prompt too
    from deepeval.utils import convert_to_multi_modal_array

    found = [p for p in convert_to_multi_modal_array(str(prompt)) if isinstance(p, de.MLLMImage)]
    assert [p.url for p in found] == [CAT, CAT]
    with pytest.raises(ValueError, match="multimodal"):
        de_metrics.ContextualPrecisionMetric(model=TheirJudge(verdicts)).measure(case)
    with pytest.raises(ValueError, match="multimodal"):
        cp.ContextualPrecisionMetric(model=OurJudge(verdicts)).measure(case)


def test_mllm_image_fields_match(tmp_path):
    path = tmp_path / "p.gif"
    path.write_bytes(b"GIF89a fake")
    for kw in (
        dict(url=CAT),
        dict(url=str(path)),
        dict(url=path.as_uri()),
        dict(dataBase64="QUJD", mimeType="image/png"),
    ):
        theirs, ours = de.MLLMImage(**kw), cp.MLLMImage(**kw)
        fields = ("dataBase64", "mimeType", "url", "local", "filename")
        assert {f: getattr(ours, f) for f in fields} == {f: getattr(theirs, f) for f in fields}, kw
        assert ours.as_data_uri() == theirs.as_data_uri()
        assert str(ours).startswith("[DEEPEVAL:IMAGE:") and str(theirs).startswith("[DEEPEVAL:IMAGE:")
    for kw in (dict(), dict(dataBase64="QUJD"), dict(url="ftp://x/a.png"), dict(url="/no/such.png")):
        with pytest.raises(ValueError):
            de.MLLMImage(**kw)
        with pytest.raises(ValueError):
            cp.MLLMImage(**kw)


@pytest.mark.parametrize("cls, kwargs, error, message", BAD_INPUT, ids=lambda v: repr(v)[:40])
def test_deepeval_raises_what_the_parity_table_says(cls, kwargs, error, message):
    """The table our own errors are checked against is deepeval's behaviour: check it on deepeval."""
    theirs = _OURS_TO_THEIRS.get(cls, de.ToolCall if cls is cp.ToolCall else cls)
    with pytest.raises(error, match=re.escape(message)):
        theirs(**kwargs)


def test_private_attributes_and_fields_match():
    for ours, theirs in _OURS_TO_THEIRS.items():
        assert set(theirs.model_fields) <= set(ours.model_fields), set(theirs.model_fields) - set(ours.model_fields)
        assert set(theirs.__private_attributes__) <= set(ours.__private_attributes__)
    a, b = cp.LLMTestCase(input="q"), de.LLMTestCase(input="q")
    for name in de.LLMTestCase.__private_attributes__:
        if name == "_identifier":
            assert isinstance(getattr(a, name), str) and isinstance(getattr(b, name), str)
        else:
            assert getattr(a, name) == getattr(b, name) is None, name
    conv_a = cp.ConversationalTestCase(turns=[{"role": "user", "content": "x"}])
    conv_b = de.ConversationalTestCase(turns=[{"role": "user", "content": "x"}])
    for name in de.ConversationalTestCase.__private_attributes__:
        assert getattr(conv_a, name) == getattr(conv_b, name), name


@pytest.mark.parametrize(
    "kwargs",
    [
        dict(input="q", flaky="yes", token_cost="1.5", completion_time=2, input_token_count="3"),
        dict(input="q", tags=["a"], expectedOutput="e", actualOutput="o", retrievalContext=["n"]),
        dict(input="q", additional_metadata={"k": 1}, name="n", comments="c"),
    ],
)
def test_coercions_match(kwargs):
    ours, theirs = cp.LLMTestCase(**kwargs), de.LLMTestCase(**kwargs)
    for name in de.LLMTestCase.model_fields:
        assert getattr(ours, name) == getattr(theirs, name), name


def test_tool_calls_hash_alike_and_compare_from_our_side():
    class Opaque:
        __hash__ = None  # type: ignore[assignment]

        def __eq__(self, other):
            return isinstance(other, Opaque)

    shapes = [
        dict(name="t"),
        dict(name="t", input_parameters={"b": 1, "a": [1, {"c": 2}]}, output={"x": [1, 2]}),
        dict(name="t", input_parameters={"s": {1, 2}}, output=("a", "b")),
        dict(name="t", output=Opaque()),
        dict(name="t", input_parameters={"o": Opaque()}, description="ignored", reasoning="ignored"),
    ]
    for kw in shapes:
        theirs, ours = de.ToolCall(**kw), cp.ToolCall(**kw)
        assert hash(ours) == hash(theirs), kw
        assert ours == theirs, kw
    converted = cp.LLMTestCase(input="q", tools_called=[de.ToolCall(name="t", input_parameters={"a": 1})])
    assert converted.tools_called == [cp.ToolCall(name="t", input_parameters={"a": 1})]
    assert de.ToolCall(name="t") != cp.ToolCall(name="t")  # deepeval's side: only its own class (documented)


def test_the_deepeval_style_suite_runs_on_deepeval_with_only_the_imports_changed(tmp_path):
    source = (Path(__file__).parent / "test_deepeval_style.py").read_text()
    start, end = source.index("# -- imports:"), source.index("# -- end of imports")
    imports = (
        "from deepeval.metrics import ContextualPrecisionMetric\n"
        "from deepeval.models import DeepEvalBaseLLM\n"
        "from deepeval.test_case import ConversationalTestCase, LLMTestCase, MLLMImage, RetrievedContextData, ToolCall, Turn\n\n"
    )
    suite = tmp_path / "test_deepeval_style_on_deepeval.py"
    suite.write_text(source[:start] + imports + source[end:])
    assert "ctxprec_ops" not in suite.read_text()
    tests = len(re.findall(r"^def test_", source, re.M))
    out = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", str(suite)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "DEEPEVAL_TELEMETRY_OPT_OUT": "YES"},
    )
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-2000:]
    passed = int(re.search(r"(\d+) passed", out.stdout).group(1))
    assert passed >= tests  # parametrized tests count more than once
