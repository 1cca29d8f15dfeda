"""Several real ``logist job step`` processes on the same job at once.

The job's lock must serialise them: the history's sequence numbers stay
unique and consecutive, each call is recorded once and in order, and a
process that finds the job busy says so in one line and exits 1 (or, with
``--wait``, waits its turn and then steps).

The children import Logist first and then wait for a start file, so they
reach the lock together rather than one Python start-up apart; the LLM
answers slowly, so the first one still holds the lock when the others try.
"""

from __future__ import annotations

import json

from logist.store.requests import messages_of
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from logist.engine.create import create_job
from logist.store.jobsdir import JobsDir
from logist.replay.scripted import Reply

pytestmark = pytest.mark.slow

#: ``python -m logist ARGS`` after a start line: pay for the imports first,
#: say so with a ready file, then wait until the test creates the start file.
CHILD = r"""
import os, runpy, sys, time
import openai, logist.cli, logist.engine.step, logist.model.client  # noqa: F401  (start-up cost before the start line)
ready_file, start_file = sys.argv[1:3]
open(ready_file, "w").close()
while not os.path.exists(start_file):
    time.sleep(0.002)
sys.argv = ["logist", *sys.argv[3:]]
runpy.run_module("logist", run_name="__main__", alter_sys=True)
"""

LLM_DELAY = 1.0


def message(n: int) -> str:
    return json.dumps({
        "action": "MESSAGE",
        "message": f"progress note {n}",
        "file_changes": [{"path": f"notes/step-{n}.md", "content": f"note {n}\n"}],
    })


def make_job(jobs: JobsDir):
    return create_job(jobs, "hello", "Write hello.py that prints a greeting", acceptance=["python hello.py prints Hello"])


def git(workspace: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=workspace, capture_output=True, text=True, check=True).stdout


def run_together(tmp_path: Path, n: int, *args: str) -> list[tuple[int, str, str]]:
    """Start ``n`` children running ``logist ARGS``, release them at once when
    all are ready, and wait for them."""
    start_file = tmp_path / "start"
    ready_files = [tmp_path / f"ready-{i}" for i in range(n)]
    children = [
        subprocess.Popen(
            [sys.executable, "-c", CHILD, str(ready), str(start_file), *args],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=dict(os.environ),
        )
        for ready in ready_files
    ]
    try:
        deadline = time.monotonic() + 30
        while not all(ready.exists() for ready in ready_files):
            assert all(child.poll() is None for child in children), "a child died during start-up"
            assert time.monotonic() < deadline, "the children did not start"
            time.sleep(0.01)
        start_file.touch()
        results = []
        for child in children:
            out, err = child.communicate(timeout=60)
            results.append((child.returncode, out, err))
        return results
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait()


def check_history(job, llm, calls: int) -> list[dict]:
    """Sequences 1..N, one llm_call per request the server saw, in its order,
    and manifest / history / workspace in agreement."""
    manifest = json.loads(job.manifest_path.read_text(encoding="utf-8"))
    entries = json.loads(job.history_path.read_text(encoding="utf-8"))["interactions"]
    assert [e["sequence"] for e in entries] == list(range(1, len(entries) + 1))
    assert [e["kind"] for e in entries] == ["user_action"] + ["llm_call"] * calls
    assert len(llm.requests) == calls
    by_number = {e["sequence"]: e for e in entries}
    for entry, request in zip(entries[1:], llm.requests):
        assert messages_of(by_number, entry["sequence"]) == request["messages"], "each entry records the call it made"
    for earlier, later in zip(entries, entries[1:]):
        assert later["state_before"] == earlier["state_after"]
        assert later["state"].get("calls", 0) == earlier["state"].get("calls", 0) + (later["kind"] == "llm_call")
    # Every step saw the one before it: its prompt carries all earlier answers.
    answers = [e["response"]["raw_response"] for e in entries[1:]]
    for i, request in enumerate(llm.requests):
        sent = [m["content"] for m in request["messages"] if m["role"] == "assistant"]
        assert sent == answers[:i]
    assert manifest["last_sequence"] == entries[-1]["sequence"]
    assert manifest["workspace_commit"] == git(job.workspace, "rev-parse", "HEAD").strip()
    assert git(job.workspace, "status", "--porcelain") == ""
    assert sorted(git(job.workspace, "ls-tree", "-r", "--name-only", "HEAD").split()) == [
        f"notes/step-{n}.md" for n in range(1, calls + 1)
    ]
    assert not (job.dir / "step_journal.json").exists()
    assert not (job.dir / "jobHistory.json.append").exists()
    return entries


def step_of(out: str) -> int:
    """The sequence number a successful ``job step --oneshot --json`` took."""
    (result,) = json.loads(out)
    assert result["action"] == "MESSAGE" and result["status"] == "RUNNING"
    return result["sequence"]


def is_busy(rc: int, out: str, err: str) -> bool:
    lines = err.strip().splitlines()
    return rc == 1 and len(lines) == 1 and "is busy" in lines[0] and "hello" in lines[0] and "Traceback" not in err


@pytest.mark.wire
@pytest.mark.parametrize("n", [2, 4], ids=["two", "four"])
def test_steps_at_once_never_interleave(jobs, llm, tmp_path, n):
    job = make_job(jobs)
    llm.add(*[Reply(content=message(i), delay=LLM_DELAY) for i in range(1, n + 1)])

    results = run_together(tmp_path, n, "job", "step", "--oneshot", "hello", "--base-url", llm.base_url, "--json")

    succeeded = [r for r in results if r[0] == 0]
    busy = [r for r in results if is_busy(*r)]
    assert len(succeeded) + len(busy) == n, f"each child succeeds or reports busy: {results}"
    assert succeeded, results
    assert busy, "the children did not overlap, so this run proved nothing"
    for rc, out, err in succeeded:
        assert "Traceback" not in err
    entries = check_history(job, llm, calls=len(succeeded))
    assert sorted(step_of(out) for _, out, _ in succeeded) == [e["sequence"] for e in entries[1:]]


@pytest.mark.wire
def test_wait_lets_both_step_one_after_the_other(jobs, llm, tmp_path):
    job = make_job(jobs)
    llm.add(*[Reply(content=message(i), delay=LLM_DELAY) for i in (1, 2)])

    results = run_together(tmp_path, 2, "job", "step", "--oneshot", "hello", "--base-url", llm.base_url, "--wait", "30", "--json")

    for rc, out, err in results:
        assert rc == 0 and "busy" not in err and "Traceback" not in err, results
    # One took step 2, the other waited for the lock and took step 3.
    assert sorted(step_of(out) for _, out, _ in results) == [2, 3]
    entries = check_history(job, llm, calls=2)
    # The second call was built from the state the first one left.
    assert llm.requests[1]["messages"][2] == {"role": "assistant", "content": message(1)}
    assert entries[-1]["state_after"] == "RUNNING"
