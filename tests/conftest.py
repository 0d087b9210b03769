"""Shared fixtures live in tests/fixtures/ as pytest plugins (one module per real component)."""

import importlib.util

pytest_plugins = [
    name
    for name in (
        "tests.fixtures.judge_server",
        "tests.fixtures.postgres",
    )
    if importlib.util.find_spec(name) is not None
]
