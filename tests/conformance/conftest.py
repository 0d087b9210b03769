"""The conformance suite: one set of tests, run on every backend (a parameter id each).

Fixtures:

- ``backend`` (session, parametrized over ``backends.IDS``): the backend on this worker
  (``tests/conformance/backends/``). Where its server or driver cannot start it is skipped with
  the reason — unless ``CTXPREC_SLOW_TESTS`` is set (as in CI): then it fails;
- ``warehouse`` (function): a fresh, empty database of that backend, open in this process.

Known product bugs: ``@pytest.mark.known_bug(backends, reason, **params)`` on a test (or on one
of its ``pytest.param`` cases) marks it ``xfail(strict=True)`` on those backends (and only for
those values of the test's other parameters, when given), so the mark must go when the bug is
fixed. Tests never branch on a backend's name: what differs is data on the
backend (``types``, ``lacks``) and its methods.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from .backends import IDS, Backend, Warehouse, backend_class


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "known_bug(backends, reason, **params): a product bug fails this test on these backends "
        "(for these parameter values): strict xfail there",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        callspec = getattr(item, "callspec", None)
        name = callspec.params.get("backend") if callspec is not None else None
        if name is None:
            continue
        for mark in item.iter_markers("known_bug"):
            backends, reason = mark.args
            if name not in ((backends,) if isinstance(backends, str) else backends):
                continue
            if all(callspec.params.get(param) == value for param, value in mark.kwargs.items()):
                item.add_marker(pytest.mark.xfail(strict=True, reason=reason))


@pytest.fixture(scope="session", params=IDS)
def backend(request: pytest.FixtureRequest) -> Backend:
    cls = backend_class(request.param)
    try:
        return cls.start(request)
    except pytest.skip.Exception as exc:
        if os.environ.get("CTXPREC_SLOW_TESTS"):
            pytest.fail(f"backend {request.param} cannot start (CTXPREC_SLOW_TESTS is set): {exc}")
        raise


@pytest.fixture
def warehouse(backend: Backend) -> Iterator[Warehouse]:
    with backend.database() as wh:
        wh.open()
        try:
            yield wh
        finally:
            wh.close()
