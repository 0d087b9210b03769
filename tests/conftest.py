"""Shared fixtures live in tests/fixtures/ as pytest plugins (one module per real component)."""

import importlib.util
import os

# fast retry backoff for the whole suite (the production default starts at 0.5 s)
os.environ.setdefault("CTXPREC_RETRY_INITIAL_WAIT", "0.01")
os.environ.setdefault("CTXPREC_RETRY_MAX_WAIT", "0.2")

pytest_plugins = [
    name
    for name in (
        "tests.fixtures.judge_server",
        "tests.fixtures.postgres",
        "tests.fixtures.airflow_env",
    )
    if importlib.util.find_spec(name) is not None
]
