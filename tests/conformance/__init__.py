"""The conformance suite: the invariants every warehouse backend must keep, one set of tests run
on each backend (a parameter id: ``sqlite``, ``postgresql``, ``mariadb``, ``duckdb``,
``snowflake``, ``clickhouse``, ``redshift``).

- ``backends/``: one module per backend (its databases, column types, capabilities as data);
  ``backends/__init__.py`` says how to add one;
- ``conftest.py``: the ``backend`` and ``warehouse`` fixtures and the ``known_bug`` marker;
- ``invariants.py``: rows written and assertions shared by the tests;
- ``test_*.py``: one invariant (or a few close ones) per module.

Tests of what only one backend does live outside, in ``tests/test_<backend>_backend.py``.
"""
