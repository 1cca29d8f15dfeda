"""Logist's private directory: where a credential Logist keeps on disk
lives, out of every sandboxed process's sight.

A model's command, a check and a coding agent run as the same user as
Logist, so a file that user can read (``0600`` included) is readable by
them too, unless the sandbox hides it. The sandbox cannot hide a file that
is made after the command started, nor the folder the jobs directory
happens to sit in; it can hide one folder known in advance. So every
credential Logist writes (``logist serve``'s token; later, whatever must
survive a restart) is a ``0600`` file in this one folder, ``0700``, and the
sandbox mounts an empty, read-only file system over the folder before a
command starts (:mod:`logist.workspace.sandbox`): in there the folder is
empty, whatever is written into it later, and the mount is locked.
The sandbox keeps two folders of its own here, hidden with the rest:
``mount-tables/``, the tables its mounts are made from (a table a command
could edit would decide what the next command may write), and
``throwaway-writes/``, what a check wrote on its throwaway view of a
workspace while it runs (:mod:`logist.workspace.sandbox`).

The folder is ``$XDG_STATE_HOME/logist`` when that variable holds an
absolute path, else ``~/.local/state/logist``. Without the namespace's
mounts (``command_sandbox: none``, or a system where mounts fail) a command
can read it as it can read every file of its user (docs/safety.md).
"""

from __future__ import annotations

import os
import pwd
import stat
from pathlib import Path

from ..errors import LogistError


def directory() -> Path:
    """The private directory's path (made by :func:`ensure`)."""
    state = os.environ.get("XDG_STATE_HOME", "")
    if not os.path.isabs(state):
        home = os.environ.get("HOME") or pwd.getpwuid(os.getuid()).pw_dir
        state = os.path.join(home, ".local", "state")
    return Path(state) / "logist"


def ensure() -> Path:
    """The private directory, made if missing (``0700``); a LogistError
    when it cannot be made, is not a folder (a link included), belongs to
    another user, or cannot be made private."""
    path = directory()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.mkdir(path, 0o700)
        except FileExistsError:
            pass
        found = os.lstat(path)
        if not stat.S_ISDIR(found.st_mode):
            raise LogistError(f"Logist's private directory {path} is not a folder; remove it (it is made again)")
        if found.st_uid != os.getuid():
            raise LogistError(f"Logist's private directory {path} belongs to another user (uid {found.st_uid})")
        if stat.S_IMODE(found.st_mode) != 0o700:
            os.chmod(path, 0o700)
    except OSError as exc:
        raise LogistError(f"cannot make Logist's private directory {path}: {exc.strerror or exc}") from None
    return path


def write_secret(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` (in the private directory), readable by its owner only."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o600)
    try:
        os.fchmod(fd, 0o600)  # an older file may have had other permissions
        os.write(fd, text.encode())
    finally:
        os.close(fd)
