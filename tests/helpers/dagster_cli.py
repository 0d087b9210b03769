"""``dagster asset materialize`` as a user runs it: the real CLI, in a subprocess."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from tests.fixtures.isolation import run_isolated

DAGSTER = str(Path(sys.executable).with_name("dagster"))


def materialize(
    partition: str,
    env: Mapping[str, str],
    *,
    select: str = "contextual_precision_scores",
    cwd: str | Path | None = None,
    timeout: float = 200,
) -> subprocess.CompletedProcess[str]:
    """Materialize one partition of ``select`` from ``dagster_defs``; ``env`` is all the child's
    ctxprec/judge/Dagster settings (``DAGSTER_HOME`` included), ``cwd`` defaults to an empty
    directory (Dagster reads the ``.env`` of its working directory)."""
    cmd = [DAGSTER, "asset", "materialize", "-m", "dagster_defs", "--select", select, "--partition", partition]
    return run_isolated(cmd, {"PYTHONWARNINGS": "ignore", **env}, cwd=cwd, timeout=timeout)
