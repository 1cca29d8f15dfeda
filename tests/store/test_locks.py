"""hold_lock: the lock a job, its views and the jobs index are changed under."""

from __future__ import annotations

import os
import time

import pytest

from logist.errors import JobBusyError
from logist.store.locks import hold_lock


def test_a_held_lock_is_busy_until_let_go_and_a_waiter_waits_its_timeout(tmp_path):
    path = tmp_path / ".lock"
    with hold_lock(path, "job 'x'", 0):
        with pytest.raises(JobBusyError, match="job 'x' is busy"):
            with hold_lock(path, "job 'x'", 0):  # a second holder in this process too: a flock is its open file's
                pass
        started = time.monotonic()
        with pytest.raises(JobBusyError, match="after waiting 0.2s"):
            with hold_lock(path, "job 'x'", 0.2):
                pass
        assert time.monotonic() - started >= 0.2
    with hold_lock(path, "job 'x'", 0):  # let go: taken at once
        pass
    assert path.is_file()  # the file stays (see the module's doc)


def test_a_link_in_the_lock_files_place_is_not_followed(tmp_path):
    target = tmp_path / "elsewhere"
    target.write_text("")
    path = tmp_path / ".lock"
    os.symlink(target, path)
    with pytest.raises(OSError):
        with hold_lock(path, "job 'x'", 0):
            pass
