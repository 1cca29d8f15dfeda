"""What Logist does so that no other process reads a secret from it.

:func:`withdraw_secrets` runs first in every ``logist`` command
(:func:`logist.__main__.main`, through :func:`secrets_withdrawn`, which puts
them back when the command ends), before Logist starts any thread or
process: every secret of its environment (the API key and whatever
:func:`logist.secrets.redact.known_secrets` takes for a secret) is moved out of
``os.environ`` into :mod:`logist.secrets.environment`'s hold, and
:func:`hide_secrets_from_proc` blanks them where other processes look:

* ``/proc/<pid>/environ`` shows the environment block the process was
  started with, not ``os.environ``: the secret values in that block are
  overwritten with ``*`` (Linux; elsewhere the strings ``environ`` points to);
* the process is made non-dumpable, so ``/proc/<pid>/environ`` and ``mem``
  refuse other processes of its user that lack ``CAP_SYS_PTRACE``.

What stays: the interpreter's start-up, before Logist's first line runs
(a few milliseconds in which the block still holds the key, as it does in
the shell that exported it); root, who reads any process's memory. The
library (a program that imports :mod:`logist`) keeps its environment: it
hides itself before its first command instead (:mod:`logist.workspace.sandbox`).
"""

from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import sys
from typing import Iterator

from . import environment
from .redact import known_secrets

_PR_SET_DUMPABLE = 4


@functools.lru_cache(maxsize=1)
def _libc():
    try:
        return ctypes.CDLL(None, use_errno=True)
    except OSError:  # pragma: no cover
        return None


def secret_variables(env) -> list[str]:
    """The names of the variables of ``env`` whose value is, or holds, a known secret."""
    return [name for name, value in env.items() if known_secrets({name: value})]


def withdraw_secrets() -> list[str]:
    """Take every secret out of this process's environment (see the
    module's doc); returns the names of the variables taken."""
    names = environment.hold(secret_variables(os.environ))
    hide_secrets_from_proc()
    return names


@contextlib.contextmanager
def secrets_withdrawn() -> Iterator[list[str]]:
    """The secrets out of ``os.environ`` (:func:`withdraw_secrets`) for the
    length of one run of the ``logist`` program, and back in it after: the
    hold lives as long as the run, so a program (or a test) that calls the
    entry point in its own process goes on with its environment as it was
    (the blanked ``/proc/self/environ`` block and the non-dumpable flag stay)."""
    names = withdraw_secrets()
    try:
        yield names
    finally:
        environment.release()


def hide_secrets_from_proc() -> None:
    """Make this process's environment unreadable, and blank the secrets in
    the block ``/proc/self/environ`` shows (Linux; elsewhere the process's
    ``environ`` strings), so a command cannot read them from Logist."""
    libc = _libc()
    if libc is None:
        return
    secrets = [s.encode() for s in known_secrets()]
    if sys.platform.startswith("linux"):
        libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
        try:
            with open("/proc/self/stat", "rb") as handle:
                fields = handle.read().rsplit(b")", 1)[1].split()
            start, end = int(fields[47]), int(fields[48])  # env_start, env_end: fields 50 and 51 of stat
        except (OSError, IndexError, ValueError):
            return
        block = ctypes.string_at(start, end - start)
        for secret in secrets:
            at = block.find(secret)
            while at != -1:
                ctypes.memset(start + at, ord("*"), len(secret))
                at = block.find(secret, at + len(secret))
        return
    try:  # pragma: no cover - not Linux: the strings environ points to
        environ = ctypes.POINTER(ctypes.c_void_p).in_dll(libc, "environ")
        i = 0
        while environ[i]:
            entry = ctypes.string_at(environ[i])
            for secret in secrets:
                if secret in entry:
                    ctypes.memset(environ[i] + entry.index(secret), ord("*"), len(secret))
            i += 1
    except (ValueError, AttributeError):
        pass

