"""tests/forked.py: a forked ``logist`` is a process of its own that ends,
reads, writes and dies as ``python -m logist`` does, and says so as
``subprocess`` would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from forked import ForkedPopen, run_forked

LOGIST = [sys.executable, "-m", "logist"]


def test_exit_codes_streams_and_environment_are_a_process_s(jobs, monkeypatch, tmp_path):
    # No jobs directory here or in this process's environment: the one the given environment names is used.
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("LOGIST_JOBS_DIR")
    done = run_forked(["--version"])
    assert done.returncode == 0 and done.stdout.startswith("logist, version ") and done.stderr == ""
    refused = run_forked(["nonsense"])
    assert refused.returncode == 2 and "No such command 'nonsense'" in refused.stderr
    # The environment and the working directory are the ones given, not the zygote's or the test's.
    env = {**os.environ, "LOGIST_JOBS_DIR": str(jobs.path)}
    listed = run_forked(["job", "list", "--json"], env=env)
    assert listed.returncode == 0, listed.stderr
    assert json.loads(listed.stdout)["jobs"] == []
    assert "LOGIST_JOBS_DIR" not in os.environ, "the test's own environment is left alone"


def test_a_kill_is_a_negative_return_code_and_the_pid_is_the_child_s(jobs):
    child = ForkedPopen([*LOGIST, "--jobs-dir", str(jobs.path), "serve", "--port", "0"], stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        assert child.stdout.readline().startswith(f"Logist serves {jobs.path} at http://127.0.0.1:")
        assert child.poll() is None
        assert child.pid not in (os.getpid(), os.getppid())
        assert os.getsid(child.pid) == child.pid, "start_new_session: a session of its own"
        with pytest.raises(subprocess.TimeoutExpired):
            child.wait(0.1)
        child.send_signal(signal.SIGKILL)
        assert child.wait(10) == -signal.SIGKILL
        assert child.poll() == -signal.SIGKILL
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()


def test_only_logist_is_run():
    with pytest.raises(ValueError, match="python -m logist only"):
        ForkedPopen([sys.executable, "-c", "pass"])


def test_an_ended_child_keeps_its_pid_until_the_test_has_seen_it_end():
    """As a Popen's child, which stays a zombie until it is waited for: a
    signal a test sends to a pid it has not seen end reaches nothing else
    (the machine's pids wrap around within seconds under the suite)."""
    child = ForkedPopen([*LOGIST, "--version"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert child.stdout.read().startswith("logist, version ") and child.stderr.read() == ""
    deadline = time.monotonic() + 10
    while _state(child.pid) != "Z":
        assert time.monotonic() < deadline, f"the child did not end: state {_state(child.pid)!r}"
        time.sleep(0.01)
    time.sleep(0.2)
    assert _state(child.pid) == "Z", "reaped before the test saw it end"
    assert child.wait(10) == 0
    while _state(child.pid) == "Z":
        assert time.monotonic() < deadline, "not reaped once the test saw it end"
        time.sleep(0.01)
    child.stdout.close()
    child.stderr.close()


def _state(pid: int) -> str:
    """The process's state letter in /proc (Z: a zombie), or "" when there is no such process."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return ""
