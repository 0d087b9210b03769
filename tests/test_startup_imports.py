"""Start-up stays light: ``import ctxprec_ops`` and the CLI's ``--help`` load none of the heavy
libraries (each Airflow task, cron ``ctxprec check`` and ``--help`` would pay for them).
Timings are in ``bench/bench_startup.py``; this checks what is imported, in a fresh interpreter."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

HEAVY = ("sqlalchemy", "pandas", "numpy", "scipy", "openai", "httpx", "jinja2", "airflow", "dagster")


def _imported(code: str) -> set[str]:
    probe = f"{code}\nimport json, sys\nprint(json.dumps(sorted(m for m in {HEAVY!r} if m in sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=True)
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


def test_import_ctxprec_ops_loads_no_heavy_library():
    assert _imported("import ctxprec_ops") == set()
    assert _imported("import ctxprec_ops.pipeline, ctxprec_ops.warehouse, ctxprec_ops.monitoring") == set()


def test_public_names_still_import_from_the_package():
    code = (
        "from ctxprec_ops import ContextualPrecisionMetric, TurnContextualPrecisionMetric, LLMTestCase, "
        "ModelTestCase, ConversationalTestCase, Turn, ContextualPrecisionTemplate, JudgeModel, evaluate, "
        "MLLMImage, RetrievedContextData\n"
        "import ctxprec_ops\nassert 'evaluate' in dir(ctxprec_ops)"
    )
    assert "sqlalchemy" not in _imported(code)  # the metric API needs no warehouse either


@pytest.mark.parametrize("argv", [["--help"], ["score", "--help"], ["check", "--help"], ["trend", "--help"]])
def test_cli_help_loads_no_heavy_library(argv):
    code = f"from ctxprec_ops.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass"
    assert _imported(code) == set()


@pytest.mark.parametrize("argv", [["score", "--help"], ["check", "--help"]])
def test_score_and_check_help_load_no_pydantic(argv):
    """Their parsers read the metric registry's names only: no metric class, no verdict model."""
    code = (
        f"from ctxprec_ops.cli import main\ntry:\n    main({argv!r})\nexcept SystemExit:\n    pass\n"
        "import json, sys\nprint(json.dumps(sorted(m for m in ('pydantic', 'pydantic_core') if m in sys.modules)))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(out.stdout.strip().splitlines()[-1]) == []


def test_unknown_public_name_is_an_attribute_error():
    import ctxprec_ops

    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        ctxprec_ops.nope  # noqa: B018
