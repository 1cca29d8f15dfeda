"""The file locks Logist holds: a job's, its views', its lease's, the jobs index's.

A lock is a file locked with filelock (``fcntl`` on POSIX); the file stays
after the lock is released on purpose (deleting a lock file another process
waits on would let two processes hold "the same" lock on two files).
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from ..errors import JobBusyError


@contextmanager
def hold_lock(lock_path: Path, what: str, timeout: float) -> Iterator[None]:
    """Hold a filelock; ``timeout`` 0 fails at once, -1 waits forever."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(lock_path), timeout=timeout, thread_local=False)
    try:
        lock.acquire()
    except Timeout:
        waited = "" if timeout == 0 else f" after waiting {timeout:g}s"
        raise JobBusyError(
            f"{what} is busy: another logist command holds {lock_path}{waited} "
            "(try again, or pass --wait SECONDS)"
        ) from None
    try:
        yield
    finally:
        lock.release()
