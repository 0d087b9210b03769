"""Run a coroutine from sync code, even when an event loop is already running in this thread
(Jupyter, async web servers) — without patching the loop: the coroutine runs on a fresh loop in
a worker thread and the caller blocks until it is done."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

T = TypeVar("T")

__all__ = ["run_sync"]


def run_sync(factory: Callable[[], Coroutine[Any, Any, T]]) -> T:
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(factory())
    ctx = contextvars.copy_context()
    with concurrent.futures.ThreadPoolExecutor(max_workers=1, thread_name_prefix="ctxprec-sync") as pool:
        return pool.submit(ctx.run, lambda: asyncio.run(factory())).result()
