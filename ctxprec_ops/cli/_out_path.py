"""Files a command writes (``--out``), checked before any work: a path that cannot be written is a
usage error (exit 2) in one line naming the path as the user gave it and what is wrong with it —
not an exception, naming a temporary file, after the work is done."""

from __future__ import annotations

import errno
import os
import tempfile
from collections.abc import Sequence
from pathlib import Path

from ._args import UsageError

__all__ = ["check_out_path"]

#: why a file cannot be created in a directory, by errno (else the system's words)
_WHY = {
    errno.EACCES: "permission denied",
    errno.EPERM: "permission denied",
    errno.EROFS: "it is on a read-only file system",
    errno.ENOENT: "the directory does not accept new files",
    errno.ENOSPC: "no space left on the device",
    errno.EDQUOT: "disk quota exceeded",
}


def check_out_path(
    value: str,
    *,
    flag: str = "--out",
    suffixes: Sequence[str] = (".html", ".htm"),
    what: str = "the report is an HTML file",
) -> Path:
    """``value`` as a ``Path`` when a file can be written there (its directory exists, is a
    directory, and a file can be created in it: tried, so a read-only mount, ``/proc`` or a
    directory the user may not write are found whoever runs the command); else ``UsageError``."""

    def bad(problem: str) -> UsageError:
        return UsageError(f"{flag} {value}: {problem}")

    if not value.strip():
        raise bad("an empty path")
    path = Path(value).expanduser()
    if path.is_dir():
        raise bad(f"is a directory; name the file, e.g. {path / ('report' + suffixes[0] if suffixes else 'out')}")
    if suffixes and path.suffix.lower() not in suffixes:
        raise bad(f"{what}: use a name ending in {suffixes[0]}")
    parent = path.parent
    if not parent.exists():
        missing = parent
        while not missing.parent.exists():
            missing = missing.parent
        raise bad(f"the directory {missing} does not exist")
    if not parent.is_dir():
        raise bad(f"{parent} is not a directory")
    if path.exists() and not path.is_file():
        raise bad("exists and is not a regular file")
    try:
        fd, probe = tempfile.mkstemp(prefix=".ctxprec-", suffix=".probe", dir=parent)
    except OSError as exc:
        why = _WHY.get(exc.errno or 0, (exc.strerror or "cannot create a file").lower())
        raise bad(f"cannot write in {parent}: {why}") from None
    os.close(fd)
    os.unlink(probe)
    return path
