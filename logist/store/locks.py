"""The file locks Logist holds: a job's, its views', its lease's, the jobs index's.

A lock is a file locked with filelock (``fcntl`` on POSIX); the file stays
after the lock is released on purpose (deleting a lock file another process
waits on would let two processes hold "the same" lock on two files).

The lease's lock (:func:`hold_breakable_lock`) is held only for the moment
a lease is read and replaced, but a runner can be stopped (SIGSTOP, a
debugger) in that moment, and then nobody could take the lease over until it
goes on. So that lock is broken when its holder is a stopped process of
this host: a new lock file is renamed over the old one, and the stopped
holder, let go on, finds its lock is no longer the file's
(:meth:`BreakableLock.intact`) and writes nothing under it.
"""

from __future__ import annotations

import fcntl
import os
import tempfile
import time
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional

from ..errors import JobBusyError
from ..workspace.sandbox import stopped


@contextmanager
def hold_lock(lock_path: Path, what: str, timeout: float) -> Iterator[None]:
    """Hold a filelock; ``timeout`` 0 fails at once, -1 waits forever."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(lock_path), timeout=timeout, thread_local=False)
    try:
        lock.acquire()
    except Timeout:
        raise _busy(lock_path, what, timeout) from None
    try:
        yield
    finally:
        lock.release()


def _busy(lock_path: Path, what: str, timeout: float) -> JobBusyError:
    waited = "" if timeout == 0 else f" after waiting {timeout:g}s"
    return JobBusyError(f"{what} is busy: another logist command holds {lock_path}{waited} "
                        "(try again, or pass --wait SECONDS)")


#: How often a breakable lock that is busy is tried again (seconds).
_RETRY = 0.01


@dataclass
class BreakableLock:
    """A lock :func:`hold_breakable_lock` holds: the open, locked file."""

    path: Path
    fd: int

    def intact(self) -> bool:
        """Whether the lock is still the file's: False once another process
        broke it (this one was stopped while it held it). Checked just before
        each write made under it."""
        try:
            return os.fstat(self.fd).st_ino == os.stat(self.path).st_ino
        except OSError:
            return False


@contextmanager
def hold_breakable_lock(lock_path: Path, what: str, timeout: float) -> Iterator[BreakableLock]:
    """Hold the lock file ``lock_path`` (``flock``), waiting up to ``timeout``
    seconds; one held by a stopped process of this host is broken at once
    (see the module's doc). Whoever writes under it checks
    :meth:`BreakableLock.intact` just before the write."""
    lock_path = Path(lock_path)
    deadline = time.monotonic() + timeout
    while True:
        fd = os.open(lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _flock_holder(fd)
            os.close(fd)
            if holder is not None and stopped(holder):
                fd = _replace_locked(lock_path)
            elif time.monotonic() >= deadline:
                raise _busy(lock_path, what, timeout) from None
            else:
                time.sleep(_RETRY)
                continue
        lock = BreakableLock(lock_path, fd)
        if lock.intact():
            break
        os.close(fd)  # broken (or replaced again) while this one waited for it: take the file's own
    try:
        yield lock
    finally:
        os.close(fd)  # closing the file lets go of its flock


def _replace_locked(lock_path: Path) -> int:
    """Break the lock: a new lock file, locked, renamed over ``lock_path``; its fd."""
    fd, name = tempfile.mkstemp(prefix=f".{lock_path.name}.", suffix=".tmp", dir=lock_path.parent)
    try:
        os.fchmod(fd, 0o644)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.replace(name, lock_path)
    except BaseException:
        os.close(fd)
        try:
            os.unlink(name)
        except FileNotFoundError:
            pass
        raise
    return fd


def _flock_holder(fd: int) -> Optional[int]:
    """The process of this host holding a ``flock`` on ``fd``'s file (Linux:
    ``/proc/locks``), or None where that cannot be told."""
    info = os.fstat(fd)
    file_id = (os.major(info.st_dev), os.minor(info.st_dev), info.st_ino)
    try:
        with open("/proc/locks", encoding="ascii", errors="replace") as handle:
            lines = handle.readlines()
    except OSError:
        return None
    for line in lines:
        fields = line.split()
        # "1: FLOCK  ADVISORY  WRITE 4121 fe:00:4473853 0 EOF"; a waiter's line has "->" after the number.
        if len(fields) < 6 or fields[1] != "FLOCK":
            continue
        try:
            major, minor, inode = fields[5].split(":")
            if (int(major, 16), int(minor, 16), int(inode)) == file_id:
                return int(fields[4])
        except ValueError:
            continue
    return None
