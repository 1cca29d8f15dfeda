"""A person's suspend or cancel while a step holds the job: asked of the
step's runner, which applies it once the step ends; no command fails as
busy, and the paid call in flight is recorded."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import time

import pytest

from logist.replay.scripted import Reply, answer

from conftest import logist_cli

pytestmark = pytest.mark.wire


def _wait_for_request(llm, count: int, seconds: float = 60) -> None:
    deadline = time.monotonic() + seconds
    while len(llm.requests) < count:
        assert time.monotonic() < deadline, "the runner never made its call"
        time.sleep(0.05)


@pytest.mark.parametrize("action, status", [("suspend", "SUSPENDED"), ("cancel", "CANCELED")])
def test_a_stop_asked_mid_call_is_applied_once_the_step_ends(jobs, llm, action, status):
    assert logist_cli("job", "create", "hi", "-o", "Say hi", "--allow", "echo hi").returncode == 0
    # The first answer goes on with the turn (a command): without the stop, the runner would call again. It is
    # held until the stop is asked and seen (released then: the test waits no fixed time).
    answered = threading.Event()
    llm.add(Reply(content=answer("CMD", command="echo hi"), delay=600, release=answered))
    llm.add(answer("COMPLETED", summary="said hi", evidence_files=[]))
    runner = subprocess.Popen([sys.executable, "-m", "logist", "job", "run", "hi", "--base-url", llm.base_url],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_request(llm, 1)
        asked = logist_cli("job", action, "hi")
        assert asked.returncode == 0, asked.stderr
        assert f"running a step: {action} asked for" in asked.stderr
        shown = logist_cli("job", "status", "hi")
        assert f"Asked:   {action}" in shown.stdout
        assert runner.poll() is None and len(llm.requests) == 1, "the step was still in its call"
        answered.set()
        out, err = runner.communicate(timeout=120)
    finally:
        runner.kill()
    assert "is busy" not in err and "is busy" not in asked.stderr
    assert runner.returncode == (3 if action == "suspend" else 0), err
    assert len(llm.requests) == 1, "no call after the step in progress"
    manifest = json.loads((jobs.path / "hi" / "job_manifest.json").read_text())
    assert manifest["status"] == status
    last = json.loads((jobs.path / "hi" / "jobHistory.json").read_text())["interactions"][-1]
    assert last["user_input"]["action"] == action and "while a step ran" in last["note"]
    assert not (jobs.path / "hi" / "stop_request.json").exists()
    assert json.loads(logist_cli("job", "status", "hi", "--json").stdout)["stop_request"] is None


def test_a_decision_made_under_the_lock_replaces_an_asked_stop(jobs):
    assert logist_cli("job", "create", "idle", "-o", "Say hi").returncode == 0
    (jobs.path / "idle" / "stop_request.json").write_text(json.dumps({"action": "suspend", "requested_at": "x"}))
    assert logist_cli("job", "cancel", "idle").returncode == 0
    assert not (jobs.path / "idle" / "stop_request.json").exists()
