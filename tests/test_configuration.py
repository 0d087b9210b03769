"""The one declaration of the settings (``ctxprec_ops.config.Settings``): every ``CTXPREC_*`` name
in the code is declared and documented, docs/configuration.md is what the script prints, one parser
per type (booleans above all), bounds declared once and applied the same way, the environment read
in one place, and the library leaving its host process alone."""

from __future__ import annotations

import ast
import json
import re
import runpy
import subprocess
import sys
from dataclasses import MISSING, fields
from pathlib import Path

import pytest

from ctxprec_ops.config import ENV_PREFIX, Settings, SettingsError, parse_bool
from ctxprec_ops.config.parsing import Kind
from ctxprec_ops.pipeline import PipelineConfig

ROOT = Path(__file__).resolve().parents[1]
CODE = [ROOT / "ctxprec_ops", ROOT / "dags", ROOT / "dagster_defs"]
DOC = ROOT / "docs" / "configuration.md"
BOOL_FIELDS = [
    name
    for name, info in Settings.model_fields.items()
    if any(isinstance(m, Kind) and m.text == "boolean" for m in info.metadata)
]


def _code_files() -> list[Path]:
    return [p for root in CODE for p in root.rglob("*.py")]


def test_every_ctxprec_name_in_the_code_is_declared():
    """Every ``CTXPREC_*`` string in ctxprec_ops/, dags/ and dagster_defs/ is a declared variable (a
    name ending in ``_`` — ``CTXPREC_SMTP_*`` in prose — is the prefix of one)."""
    declared = set(Settings.variables())
    undeclared = {}
    for path in _code_files():
        for name in set(re.findall(r"CTXPREC_[A-Z_]+", path.read_text(encoding="utf-8"))):
            known = name in declared if not name.endswith("_") else any(v.startswith(name) for v in declared)
            if not known:
                undeclared.setdefault(name, []).append(str(path.relative_to(ROOT)))
    assert not undeclared


def test_docs_configuration_is_what_the_script_prints_and_lists_every_variable():
    script = runpy.run_path(str(ROOT / "scripts" / "configuration_doc.py"))
    page = script["page"]()
    assert DOC.read_text(encoding="utf-8") == page, "run: python scripts/configuration_doc.py > docs/configuration.md"
    documented = set(re.findall(r"^\| `([A-Z_]+)` \|", page, re.MULTILINE))
    assert documented == set(Settings.variables())
    assert "`1`/`0`, `true`/`false`, `yes`/`no`, `on`/`off`" in page
    row = next(line for line in page.splitlines() if line.startswith("| `CTXPREC_CONCURRENCY`"))
    assert "`16`" in row and "at least 1" in row


def test_every_variable_is_its_fields_name_with_the_prefix():
    """``CTXPREC_`` + the field in capitals, but for the OpenAI client's own variables."""
    for name in Settings.model_fields:
        var = Settings.variable(name)
        assert var == ENV_PREFIX + name.upper() or var in ("OPENAI_API_KEY", "AZURE_OPENAI_API_KEY", "OPENAI_BASE_URL")


# -- one parser per type ------------------------------------------------------------------------


@pytest.mark.parametrize("name", BOOL_FIELDS)
def test_booleans_accept_exactly_the_eight_words_in_any_case(name):
    var = Settings.variable(name)
    for word, value in [("1", True), ("TRUE", True), ("Yes", True), ("on", True)] + [
        ("0", False), ("false", False), ("NO", False), ("Off", False)
    ]:  # fmt: skip
        assert getattr(Settings.from_env({var: word}), name) is value, (var, word)
    for bad in ("maybe", "t", "y", "2", "enabled"):
        with pytest.raises(SettingsError, match=f"{var} must be true or false"):
            Settings.from_env({var: bad})


def test_the_boolean_words_are_the_ones_for_every_face():
    """``parse_bool`` (for a face's own text) takes the same words and refuses the same others."""
    assert [parse_bool(w, "X") for w in ("1", "true", "YES", "On", "0", "False", "no", "OFF")] == [True] * 4 + [
        False
    ] * 4
    with pytest.raises(SettingsError, match="X must be true or false"):
        parse_bool("t", "X")


def test_the_asset_triggered_dags_switch_takes_every_boolean_word():
    """``CTXPREC_AIRFLOW_ON_NEW_LOGS=on`` loads the DAGs (it took 1/true/yes only), ``maybe`` is an error."""
    assert Settings.from_env({"CTXPREC_AIRFLOW_ON_NEW_LOGS": "on"}).airflow_on_new_logs is True
    with pytest.raises(SettingsError, match="CTXPREC_AIRFLOW_ON_NEW_LOGS"):
        Settings.from_env({"CTXPREC_AIRFLOW_ON_NEW_LOGS": "maybe"})


def test_empty_and_blank_variables_are_unset_and_values_are_trimmed():
    s = Settings.from_env({"CTXPREC_CHUNK_SIZE": " 7 ", "CTXPREC_MAX_RPM": "", "CTXPREC_THRESHOLD": "   "})
    assert (s.chunk_size, s.max_rpm, s.threshold) == (7, None, 0.5)
    assert s.is_set("CTXPREC_CHUNK_SIZE") and not s.is_set("max_rpm")


@pytest.mark.parametrize(
    "var,value,message",
    [
        ("CTXPREC_CHUNK_SIZE", "ten", "must be a whole number"),
        ("CTXPREC_CHUNK_SIZE", "1.5", "must be a whole number"),
        ("CTXPREC_THRESHOLD", "nan", "must be a number"),
        ("CTXPREC_SOURCE_COLUMNS", "{bad", "must be a JSON object"),
        ("CTXPREC_SEGMENTS", '["a", 1]', "must be a JSON list of column names"),
        ("CTXPREC_PRICES", '{"m": [1]}', "must be JSON like"),
        ("CTXPREC_JUDGE_MODE", "later", "must be one of sync, batch"),
        ("CTXPREC_START_DATE", "2025-13-01", "must be a date YYYY-MM-DD"),
        ("CTXPREC_DEPLOYMENT", "staging", "must be one of local, production"),
    ],
)
def test_a_bad_value_is_an_error_naming_the_variable(var, value, message):
    with pytest.raises(SettingsError, match=f"^{var} {message}"):
        Settings.from_env({var: value})


# -- bounds, declared once -------------------------------------------------------------------------


def _outside(field: str) -> object:
    """A value just outside ``field``'s bounds (None when it has none to step over)."""
    b = Settings.bounds(field)
    if b is None or b.choices:
        return None
    if b.odd:
        return 2
    if b.ge is not None:
        return b.ge - 1
    if b.gt is not None:
        return b.gt
    return None


RUN_BOUNDED = [name for name in Settings.model_fields if "run" in Settings.extra(name) and _outside(name) is not None]


@pytest.mark.parametrize("name", RUN_BOUNDED)
def test_a_run_settings_bound_is_the_same_for_the_variable_and_for_pipeline_config(name):
    """One bound, two readers: the variable is refused with the same words ``PipelineConfig``
    refuses the value with (the bound is declared once, on the ``PipelineConfig`` field)."""
    run = Settings.extra(name)["run"]
    bad = _outside(name)
    with pytest.raises(ValueError) as from_config:
        PipelineConfig(**{run: bad})
    with pytest.raises(SettingsError) as from_env:
        Settings.from_env({Settings.variable(name): str(bad)})
    problem = str(from_config.value).split(" must ", 1)[1].rsplit(", got", 1)[0]
    assert f"{Settings.variable(name)} must {problem}" in str(from_env.value)


def test_run_settings_default_to_pipeline_configs_defaults():
    """The defaults are written once: a run setting's is its ``PipelineConfig`` field's (as declared:
    ``chunk_size``'s None is the warehouse's, resolved when a config is made)."""
    declared = {f.name: f.default if f.default is not MISSING else f.default_factory() for f in fields(PipelineConfig)}  # type: ignore[misc]
    for name in Settings.model_fields:
        run = Settings.extra(name).get("run")
        if run is not None:
            value = declared[run]
            assert (list(value) if isinstance(value, tuple) else value) == Settings.default(name), name
    assert Settings.default("chunk_size") is None
    assert PipelineConfig().chunk_size == PipelineConfig().rows_per_chunk == 500  # SQLite's


def test_the_default_concurrency_is_one_literal():
    """``16`` is written once, in judge/defaults.py; everything else names it."""
    from ctxprec_ops.judge import defaults

    hits = []
    for path in _code_files():
        for line in path.read_text(encoding="utf-8").splitlines():
            code = line.split("#", 1)[0]
            if re.search(r"concurrency\W{0,4}(int\s*=|=|:)\s*16\b|AdaptiveLimiter\(16\)|CONCURRENCY = 16", code):
                hits.append(str(path.relative_to(ROOT)))
    assert hits == ["ctxprec_ops/judge/defaults.py"] and defaults.CONCURRENCY == 16
    assert Settings.default("concurrency") == PipelineConfig().concurrency == defaults.CONCURRENCY


# -- the environment is read in one place -----------------------------------------------------------


def test_the_environment_is_read_by_the_configuration_only():
    """No ``os.environ``/``getenv`` outside ``ctxprec_ops/config/`` (but the CLI's terminal width,
    ``COLUMNS``); no ``Settings.read`` anywhere; ``Settings.from_env`` only at the faces."""
    faces = ("ctxprec_ops/cli/", "ctxprec_ops/airflow/", "ctxprec_ops/dagster/", "dags/", "dagster_defs/")
    env_reads, settings_reads = [], []
    for path in _code_files():
        rel = str(path.relative_to(ROOT))
        if rel.startswith("ctxprec_ops/config/"):
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if re.search(r"os\.environ|getenv\(|environ\.get", line) and 'os.environ.get("COLUMNS")' not in line:
                env_reads.append(f"{rel}:{number}")
            if "Settings.read" in line or ("Settings.from_env" in line and not rel.startswith(faces)):
                settings_reads.append(f"{rel}:{number}")
    assert env_reads == []
    assert settings_reads == []


def _imports(path: Path) -> set[str]:
    """The absolute names of the modules ``path`` imports from (relative imports resolved)."""
    package = ".".join(path.relative_to(ROOT).with_suffix("").parts[:-1])
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            base = package.split(".")[: len(package.split(".")) - node.level + 1] if node.level else []
            out.add(".".join([*base, *(node.module.split(".") if node.module else [])]))
        elif isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
    return out


def test_the_core_imports_no_configuration():
    """Below the faces nothing imports ``ctxprec_ops.config`` (lint-imports keeps it too; the metric
    API's ``model=None`` gets the configured judge from the package face, ``ctxprec_ops/__init__``)."""
    faces = ("ctxprec_ops/config/", "ctxprec_ops/cli/", "ctxprec_ops/airflow/", "ctxprec_ops/dagster/")
    faces += ("ctxprec_ops/__init__.py",)  # the Python API's face
    hits = []
    for path in (ROOT / "ctxprec_ops").rglob("*.py"):
        rel = str(path.relative_to(ROOT))
        if not rel.startswith(faces) and any(m.startswith("ctxprec_ops.config") for m in _imports(path)):
            hits.append(rel)
    assert hits == []


def test_the_metric_apis_default_judge_follows_the_settings(monkeypatch):
    from ctxprec_ops import ContextualPrecisionMetric

    monkeypatch.delenv("CTXPREC_JUDGE", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    assert ContextualPrecisionMetric().evaluation_model == "lexical"
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-key-0000")
    assert ContextualPrecisionMetric().evaluation_model == "gpt-4o-mini"
    monkeypatch.setenv("CTXPREC_JUDGE", "gpt-4o")
    assert ContextualPrecisionMetric().evaluation_model == "gpt-4o"


# -- the host process is left alone -------------------------------------------------------------


def test_a_library_run_leaves_the_garbage_collector_alone(tmp_path):
    """``score_partition`` called as a library (an Airflow or Dagster worker) changes neither the
    collector's thresholds nor what is frozen; ``quiet_gc=True`` (the CLI's own process) tunes them
    during the run and restores them after. Run in a fresh interpreter (the suite's own state)."""
    code = f"""
import gc, json
from ctxprec_ops.pipeline import PipelineConfig, score_partition
from ctxprec_ops.warehouse.engine import get_engine
from tests.fixtures.warehouse_data import create_logs, day_rows
url = "sqlite:///{tmp_path / "w.db"}"
create_logs(get_engine(url), day_rows(3))
seen = {{}}
import ctxprec_ops.pipeline.stream as stream
real = stream._stream
async def spy(*a, **k):
    seen.setdefault("during", []).append((gc.get_threshold()[0], gc.get_freeze_count() > 0))
    return await real(*a, **k)
stream._stream = spy
before = (gc.get_threshold(), gc.get_freeze_count())
score_partition(PipelineConfig(warehouse=url), "{"2026-11-28"}")
library = (gc.get_threshold(), gc.get_freeze_count())
score_partition(PipelineConfig(warehouse=url, quiet_gc=True), "{"2026-11-28"}")
after = (gc.get_threshold(), gc.get_freeze_count())
print(json.dumps({{"before": before, "library": library, "after": after, "during": seen["during"]}}))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["before"] == r["library"] == r["after"]
    assert r["during"][0] == [r["before"][0][0], False]  # the library run: untouched
    assert r["during"][1][0] > r["before"][0][0] and r["during"][1][1] is True  # quiet_gc=True: tuned
