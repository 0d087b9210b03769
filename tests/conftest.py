"""Shared fixtures live in tests/fixtures/ as pytest plugins (one module per real component)."""

import importlib.util
import os

from hypothesis import settings

# property tests assert results, not timing: on a shared 2-core machine one example can take
# longer than Hypothesis's 200 ms default deadline (seen: 774 ms in test_scoring.py under load)
settings.register_profile("ctxprec", deadline=None)
settings.load_profile("ctxprec")

# fast retry backoff for the whole suite (the production default starts at 0.5 s)
os.environ.setdefault("CTXPREC_RETRY_INITIAL_WAIT", "0.01")
os.environ.setdefault("CTXPREC_RETRY_MAX_WAIT", "0.2")
# a judge that fails every request is given up after 5 s (production default: 600 s, or 30 s when
# it never answered); tests of the outage behaviour set their own tolerance
os.environ.setdefault("CTXPREC_OUTAGE_TOLERANCE", "5")

pytest_plugins = [
    name
    for name in (
        "tests.fixtures.judge_server",
        "tests.fixtures.postgres",
        "tests.fixtures.airflow_env",
    )
    if importlib.util.find_spec(name) is not None
]
