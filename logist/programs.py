"""The programs Logist runs itself (git, unshare, mount, setpriv): found in the
system's own directories, never through ``PATH``.

Logist holds the API key, and a model's command runs as the same user. A
command can write the directories a user's ``PATH`` usually lists
(``~/.local/bin``, a user-owned virtualenv's ``bin``, the working directory
when ``PATH`` starts or ends with ``:``), so a program Logist looked up
through ``PATH`` could be one a command planted: a ``git`` that runs outside
the sandbox, in Logist's own process tree, with Logist's files writable.
So each program is looked up once per process (:func:`program`) in
:data:`SYSTEM_DIRS` alone, and taken only where the file and every folder
above it belong to root and no one else may write them
(:func:`owned_by_root`); the absolute path found is what runs. A program
found nowhere there is an error naming the folders searched: Logist does
not fall back to ``PATH``.

What this does not cover: a command running as root can write those
folders too (the docs' safety page says what root still exposes).
"""

from __future__ import annotations

import functools
import os
import stat
from pathlib import Path
from typing import Optional

#: Where Logist looks for the programs it runs, in this order: folders only
#: root writes on a usual system.
SYSTEM_DIRS = ("/usr/local/bin", "/usr/bin", "/bin", "/usr/local/sbin", "/usr/sbin", "/sbin")


def owned_by_root(path: Path) -> bool:
    """Whether ``path`` (resolved through its links) and every folder above
    it belong to root and are writable by no one else (no group or other
    write bit; a sticky folder such as ``/tmp`` is not enough)."""
    try:
        real = Path(os.path.realpath(path))
        for part in (real, *real.parents):
            info = os.stat(part)
            if info.st_uid != 0 or info.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
                return False
    except OSError:
        return False
    return True


@functools.lru_cache(maxsize=None)
def program(name: str) -> Optional[str]:
    """The absolute path of the program ``name`` in :data:`SYSTEM_DIRS`, the
    first one that is an executable file :func:`owned_by_root`; None if
    there is none. Looked up once per process."""
    for folder in SYSTEM_DIRS:
        candidate = Path(folder) / name
        if candidate.is_file() and os.access(candidate, os.X_OK) and owned_by_root(candidate):
            return str(candidate)
    return None


def where_looked() -> str:
    """The folders :func:`program` searches, for an error message."""
    return ", ".join(SYSTEM_DIRS)
