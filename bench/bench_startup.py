"""Start-up time of the everyday commands, as ratios to a bare ``python -c pass``.

Run from the repository root:  .venv/bin/python bench/bench_startup.py [--runs 5] [--other DIR]

Each command is started ``--runs`` times as a fresh process (interleaved, so a busy moment of the
shared machine hits every command alike); the medians and their ratio to ``python -c pass`` in the
same venv are printed. ``--other DIR`` times another checkout's venv (``DIR/.venv``) in the same
rounds, e.g. ``git worktree add /tmp/before <commit>`` with its own ``make venv``. Bytecode is
written first and ``PYTHONDONTWRITEBYTECODE`` is cleared: an installed package has its bytecode.
Targets: ``--help``, ``score --help``, ``check --help`` <= 10x, ``import ctxprec_ops`` <= 8x.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
#: label -> (the venv's program, its arguments): the console script as a user starts it
COMMANDS = {
    "python -c pass": ("python", ["-c", "pass"]),
    "import ctxprec_ops": ("python", ["-c", "import ctxprec_ops"]),
    "ctxprec --help": ("ctxprec", ["--help"]),
    "ctxprec score --help": ("ctxprec", ["score", "--help"]),
    "ctxprec check --help": ("ctxprec", ["check", "--help"]),
}
TARGETS = {
    "import ctxprec_ops": 8.0,
    "ctxprec --help": 10.0,
    "ctxprec score --help": 10.0,
    "ctxprec check --help": 10.0,
}


def _env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}


def _time(tree: Path, command: tuple[str, list[str]]) -> float:
    program, args = command
    started = time.perf_counter()
    subprocess.run(
        [str(tree / ".venv" / "bin" / program), *args],
        cwd=tree,
        env=_env(),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        check=True,
    )
    return time.perf_counter() - started


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--runs", type=int, default=5)
    p.add_argument("--other", type=Path, help="another checkout (with its own .venv) timed in the same rounds")
    args = p.parse_args()
    trees = {"this tree": ROOT}
    if args.other:
        trees["other"] = args.other.resolve()
    for tree in trees.values():  # bytecode, as an installed package has it
        python = str(tree / ".venv" / "bin" / "python")
        subprocess.run([python, "-m", "compileall", "-q", str(tree / "ctxprec_ops")], env=_env(), check=False)
        for command in COMMANDS.values():  # warm the OS cache and the site-packages bytecode
            _time(tree, command)
    times: dict[tuple[str, str], list[float]] = {(t, c): [] for t in trees for c in COMMANDS}
    for _ in range(args.runs):
        for cmd, command in COMMANDS.items():
            for name, tree in trees.items():
                times[(name, cmd)].append(_time(tree, command))
    load = os.getloadavg()[0]
    print(f"medians of {args.runs} runs (load average {load:.1f} on {os.cpu_count()} cores)")
    ok = True
    for name in trees:
        base = statistics.median(times[(name, "python -c pass")])
        print(f"\n{name} ({trees[name]})")
        for cmd in COMMANDS:
            med = statistics.median(times[(name, cmd)])
            ratio = med / base
            target = TARGETS.get(cmd)
            mark = "" if target is None else (" ok" if ratio <= target else f" MISSED (<= {target:g}x)")
            if name == "this tree" and target is not None and ratio > target:
                ok = False
            print(f"  {cmd:24s} {med * 1000:8.0f} ms  {ratio:5.1f}x{mark}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
