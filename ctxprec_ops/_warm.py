"""Import modules a run will need later in a background thread, while it waits on other work.

A partition run imports numpy and ``scipy.special`` (~0.3 s) only when it finalizes, after its last
chunk: on the run's critical path. Imported in a thread while the chunks are judged (the event loop
mostly waits on the network then), they are ready when finalize needs them. Imports that compete
with other Python work for the GIL gain nothing (warming ``openai`` during planning did not). An
import that fails here is left to fail where the module is really imported, with its own message.
"""

from __future__ import annotations

import importlib
import sys
import threading

__all__ = ["warm_imports"]


def _import_all(names: tuple[str, ...]) -> None:
    for name in names:
        try:
            importlib.import_module(name)
        except Exception:  # noqa: BLE001  (reported where the module is really used)
            pass


def warm_imports(*names: str) -> None:
    """Import ``names`` (those not imported yet) in a daemon thread, in order."""
    todo = tuple(n for n in names if n not in sys.modules)
    if todo:
        threading.Thread(target=_import_all, args=(todo,), name="ctxprec-warm-imports", daemon=True).start()
