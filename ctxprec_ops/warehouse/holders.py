"""Who holds a claim, and whether it can still be alive.

A claim records its holder's process: the host (with its PID namespace, so two containers that
share a host name are told apart), the pid and the process's start time (so a pid the system has
since given to another process is not taken for the holder). A holder on this host whose process
is gone, or is another process now, cannot be alive: its claims are taken over at once. A holder
on another host is alive until its lease expires (its warehouse family may know better:
``Dialect.claim_holder_gone``).
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache

__all__ = ["ClaimHolder", "Process", "this_process", "process_gone", "describe"]


@dataclass(frozen=True)
class Process:
    """A process: where it runs, its pid, and when it started (seconds since the epoch; None
    where the system does not say)."""

    host: str
    pid: int
    started: float | None

    def same(self, other: Process) -> bool:
        """Whether ``other`` is this very process (not another one that got its pid later)."""
        if (self.host, self.pid) != (other.host, other.pid):
            return False
        return self.started is None or other.started is None or abs(self.started - other.started) < 1.0


@dataclass(frozen=True)
class ClaimHolder:
    """What a claim row says about its holder."""

    #: the holder's id (one per stream of chunks: a process may hold several)
    holder: str
    run_id: str | None
    process: Process | None
    claimed_at: datetime | None
    expires_at: datetime


@cache
def _pid_namespace() -> str:
    try:
        return os.readlink("/proc/self/ns/pid")  # e.g. 'pid:[4026531836]'
    except OSError:
        return ""


@cache
def _boot_time() -> float | None:
    try:
        with open("/proc/stat", encoding="ascii") as f:
            for line in f:
                if line.startswith("btime "):
                    return float(line.split()[1])
    except OSError:
        pass
    return None


#: ``_stat``'s answer for a pid no process has
_NO_PROCESS = ("", None)


def _stat(pid: int) -> tuple[str, float | None] | None:
    """A process's state letter and start time, from ``/proc`` (``_NO_PROCESS``: there is no
    such process; None: there is no ``/proc`` to tell)."""
    if not os.path.isdir("/proc/self"):
        return None
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as f:
            text = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return _NO_PROCESS
    except OSError:
        return None
    # "pid (comm) state ... starttime" (field 22); comm may hold spaces and parentheses
    fields = text[text.rfind(")") + 2 :].split()
    boot = _boot_time()
    started = None
    if boot is not None and len(fields) > 19:
        started = boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    return fields[0], started


def _host() -> str:
    name = socket.gethostname()
    ns = _pid_namespace()
    return f"{name} {ns}" if ns else name


_this: dict[int, Process] = {}


def this_process() -> Process:
    """This process (worked out again after a fork: a child is another process)."""
    pid = os.getpid()
    found = _this.get(pid)
    if found is None:
        stat = _stat(pid)
        found = _this[pid] = Process(_host(), pid, stat[1] if stat else None)
    return found


def process_gone(process: Process) -> str | None:
    """Why ``process`` cannot be alive, or None when it may be: it ran on this host and its pid
    is free now, a zombie, or another process's (started at another time)."""
    if process.host != this_process().host:
        return None
    stat = _stat(process.pid)
    if stat is None:  # no /proc: the pid alone tells
        try:
            os.kill(process.pid, 0)
        except ProcessLookupError:
            return f"process {process.pid} on this host has ended"
        except PermissionError:  # it exists, under another user
            return None
        return None
    state, started = stat
    if stat is _NO_PROCESS or state == "Z":
        return f"process {process.pid} on this host has ended"
    if process.started is not None and started is not None and abs(started - process.started) >= 1.0:
        return f"process {process.pid} on this host has ended (the pid is another process's now)"
    return None


def describe(holder: ClaimHolder) -> str:
    """``run R (pid P on host H, claimed at T; its lease runs until E unless renewed)``."""
    parts = []
    if holder.process is not None:
        parts.append(f"pid {holder.process.pid} on {holder.process.host.split(' ')[0]}")
    if holder.claimed_at is not None:
        parts.append(f"claimed at {_utc(holder.claimed_at)}")
    parts.append(f"its lease runs until {_utc(holder.expires_at)} unless renewed")
    who = f"run {holder.run_id}" if holder.run_id else f"holder {holder.holder[:12]}"
    return f"{who} ({', '.join(parts)})"


def _utc(at: datetime) -> str:
    if at.tzinfo is None:
        at = at.replace(tzinfo=UTC)
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
