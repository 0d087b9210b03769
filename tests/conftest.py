"""Shared fixtures live in tests/fixtures/ as pytest plugins (one module per real component).

``tests.fixtures.isolation`` comes first: it removes the calling shell's ``CTXPREC_*``,
``OPENAI_*``, ``AIRFLOW_*`` and ``DAGSTER_*`` variables and runs the session in an empty
directory, so a user's ``.env`` (or its exported variables) never reaches a test. It also sets
the suite's fast retry and outage settings (``SUITE_SETTINGS``).

``tests.fixtures.scheduling`` keeps tests that share a per-worker fixture (Airflow's metadata
DB, module-scoped fixtures) on one xdist worker.

To add a component, add its module to ``PLUGINS`` (a module whose optional dependency is not
installed is skipped here; its tests skip themselves).
"""

import importlib.util

from hypothesis import settings

# property tests assert results, not timing: on a shared 2-core machine one example can take
# longer than Hypothesis's 200 ms default deadline (seen: 774 ms in test_scoring.py under load)
settings.register_profile("ctxprec", deadline=None)
settings.load_profile("ctxprec")

PLUGINS = (
    "tests.fixtures.isolation",
    "tests.fixtures.scheduling",
    "tests.fixtures.judge_server",
    "tests.fixtures.postgres",
    "tests.fixtures.mariadb",
    "tests.fixtures.fakesnow_env",
    "tests.fixtures.duckdb_env",
    "tests.fixtures.airflow_env",
    "tests.fixtures.phoenix",
)

pytest_plugins = [name for name in PLUGINS if importlib.util.find_spec(name) is not None]
