"""A command never outlives its step, with or without the namespace (issue 27).

Without a PID namespace (``--command-sandbox none``, and ``auto`` where the
system cannot make one) a command's processes used to be ended by killing
its first process group: a ``setsid`` child, or one double-forked, escaped
it, kept writing the workspace after the commit and could read the next
Logist process. Now the command runs under a child subreaper
(logist.workspace.sandbox.REAPER) that kills and reaps everything below it.
Real processes throughout; each leftover is found by a tag in its command
line.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from logist.engine.create import create_job
from logist.replay.scripted import answer

from conftest import logist_cli, logist_process

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="child subreapers are Linux's")


def none_left(tag: str) -> None:
    """No process of the command's is left (any that is, is killed: it is the test's own)."""
    left = tagged(tag)
    for pid in left:
        os.kill(pid, signal.SIGKILL)
    assert left == []


def tagged(tag: str) -> list[int]:
    """Live processes whose command line holds ``tag``."""
    found = []
    for name in os.listdir("/proc"):
        if name.isdigit() and int(name) != os.getpid():
            try:
                cmdline = Path(f"/proc/{name}/cmdline").read_bytes()
                state = Path(f"/proc/{name}/stat").read_bytes().rsplit(b")", 1)[1].split()[0]
            except OSError:
                continue
            if tag.encode() in cmdline and state != b"Z":
                found.append(int(name))
    return found


def escaping_command(tag: str, then: str = "echo started") -> str:
    """A writer in a session of its own (setsid) writing w.txt in a loop, and a
    double-forked sleeper: neither is in the command's process group."""
    return (f"setsid sh -c 'while :; do echo x >> w.txt; sleep 0.02; done' writer-{tag} & "
            f"(sh -c 'sleep 1000; :' sleeper-{tag} &) ; "
            f"while [ ! -s w.txt ]; do sleep 0.02; done; {then}")


def step_and_check(jobs, llm, command: str, tag: str, timeout: float = 60, run=logist_cli, env=None) -> Path:
    job = create_job(jobs, "escape", "Anything", allowed_commands=[command], command_sandbox="none",
                     command_timeout=timeout)
    llm.add(answer("CMD", command=command))
    done = run("job", "step", "--oneshot", job.id, "--base-url", llm.base_url, **({"env": env} if env else {}))
    assert done.returncode == 0, done.stderr
    # Nothing is left when the step returns; the workspace is as committed, and stays so.
    none_left(tag)
    written = job.workspace / "w.txt"
    committed = subprocess.run(["git", "show", "HEAD:w.txt"], cwd=job.workspace, capture_output=True).stdout
    assert committed and written.read_bytes() == committed
    time.sleep(0.3)
    assert written.read_bytes() == committed, "the workspace was written after the commit"
    return job.workspace


@pytest.mark.wire  # logist run through the CLI
def test_a_setsid_writer_and_a_double_forked_sleeper_end_with_the_step(jobs, llm):
    tag = uuid.uuid4().hex
    step_and_check(jobs, llm, escaping_command(tag), tag)


@pytest.mark.wire  # logist run through the CLI
def test_they_end_with_a_command_that_times_out(jobs, llm):
    tag = uuid.uuid4().hex
    step_and_check(jobs, llm, escaping_command(tag, then="sleep 1000"), tag, timeout=2)


@pytest.mark.wire
@pytest.mark.slow
def test_auto_without_a_namespace_ends_them_too(jobs, llm, tmp_path):
    """``auto`` where ``unshare`` is not there (a PATH without it: probed per
    process, so the step runs as a process of its own)."""
    tools = tmp_path / "tools"
    tools.mkdir()
    for name in ("sh", "setsid", "sleep", "git", "cat", "echo", "env", "date"):
        found = shutil.which(name)
        if found:
            (tools / name).symlink_to(found)
    tag = uuid.uuid4().hex
    command = escaping_command(tag)
    job = create_job(jobs, "auto", "Anything", allowed_commands=[command], command_sandbox="auto")
    llm.add(answer("CMD", command=command))
    done = logist_process("job", "step", "--oneshot", job.id, "--base-url", llm.base_url,
                          env={"PATH": str(tools)})
    assert done.returncode == 0, done.stderr
    none_left(tag)
    committed = subprocess.run(["git", "show", "HEAD:w.txt"], cwd=job.workspace, capture_output=True).stdout
    time.sleep(0.3)
    assert committed and (job.workspace / "w.txt").read_bytes() == committed
