"""A workspace file git cannot read stops the job for a person (issue 27).

A command that ``chmod 000``s a file or a folder of the workspace, run as a
user that is not root, left git unable to read it: ``git add -A`` failed
(a file) or skipped it without a word (a folder), and ``git clean`` could
not remove it, so every later ``rerun``, ``cancel`` or recovery failed at
it. Now the step commits everything else and the job stops at
INTERVENTION_REQUIRED with the paths named; what cannot reset the
workspace says so by name, and once a person makes them readable the job
goes on. Root reads any file, so this runs as ``nobody`` (``runuser``),
with the real library, git and scripted server in that user's process.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(os.geteuid() != 0 or shutil.which("runuser") is None or not sys.platform.startswith("linux"),
                                reason="needs root to become an unprivileged user (runuser)")

SCRIPT = r"""
import json, os, subprocess, sys
from pathlib import Path
from logist.engine.create import create_job
from logist.engine.decide import user_action
from logist.engine.loop import run_job
from logist.engine.step import step_once
from logist.store.jobsdir import JobsDir
from logist.engine.rewind import rewind
from logist.errors import LogistError
from logist.replay.scripted import ScriptedLLMServer, answer
top, command = Path(sys.argv[1]), sys.argv[2]
os.chdir(top)
jobs = JobsDir(top / "jobs")
jobs.init()
job = create_job(jobs, "u", "Anything", allowed_commands=[command], command_sandbox="none")
out = {}
with ScriptedLLMServer([answer("CMD", command=command), answer("MESSAGE", message="on")]) as llm:
    run_job(job, base_url=llm.base_url)
    m = job.manifest()
    out["status"], out["reason"] = m.status.value, m.reason
    out["committed"] = subprocess.run(["git", "ls-tree", "-r", "--name-only", m.workspace_commit],
                                      cwd=job.workspace, capture_output=True, text=True).stdout.split()
    try:
        rewind(job, baseline=True)
        out["rerun"] = "done"
    except LogistError as exc:
        out["rerun"] = str(exc)
    out["journal left"] = (job.dir / "step_journal.json").exists()
    for name in ("d", "f"):
        if (job.workspace / name).exists():
            os.chmod(job.workspace / name, 0o755)
    user_action(job, "resubmit", "go on")
    step_once(job, base_url=llm.base_url)
    out["after"] = job.manifest().status.value
    out["clean"] = subprocess.run(["git", "status", "--porcelain"], cwd=job.workspace, capture_output=True,
                                  text=True).stdout
print(json.dumps(out))
"""


def as_nobody(command: str) -> dict:
    import pydantic

    top = Path(tempfile.mkdtemp(prefix="logist-nobody-"))
    try:
        os.chmod(top, 0o777)
        (top / "run.py").write_text(SCRIPT)
        paths = os.pathsep.join([str(Path(__file__).resolve().parents[2]), str(Path(pydantic.__file__).parent.parent)])
        env = {"PATH": os.environ["PATH"], "HOME": str(top), "PYTHONPATH": paths, "GIT_CONFIG_NOSYSTEM": "1",
               "PYTHONDONTWRITEBYTECODE": "1", "LANG": "C.UTF-8"}
        python = shutil.which("python3", path="/usr/bin") or sys.executable
        done = subprocess.run(["runuser", "-u", "nobody", "--", python, str(top / "run.py"), str(top), command],
                              cwd=top, env=env, capture_output=True, text=True, timeout=120)
        if done.returncode != 0 and ("ModuleNotFoundError" in done.stderr or "ImportError" in done.stderr):
            pytest.skip(f"nobody cannot import Logist here: {done.stderr.splitlines()[-1]}")
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.splitlines()[-1])
    finally:
        subprocess.run(["chmod", "-R", "u+rwX", str(top)], capture_output=True)
        shutil.rmtree(top, ignore_errors=True)


@pytest.mark.parametrize("command,unreadable", [
    ("echo ok > ok.txt; mkdir d; echo y > d/g; chmod 000 d", "d/"),
    ("echo ok > ok.txt; echo x > f; chmod 000 f", "f"),
], ids=["folder", "file"])
def test_an_unreadable_workspace_path_stops_the_job_by_name(command, unreadable):
    out = as_nobody(command)
    assert out["status"] == "INTERVENTION_REQUIRED"
    assert f"git cannot read {unreadable} in " in out["reason"] and "permission denied" in out["reason"]
    assert "ok.txt" in out["committed"], "everything else was committed"
    # Going back to the baseline cannot commit or remove it: said by name, nothing else done.
    doing = "cannot put the workspace back at " if unreadable == "d/" else "cannot commit all of the workspace"
    assert out["rerun"].startswith(doing) and f"git cannot read {unreadable} in " in out["rerun"]
    assert not out["journal left"], "refused before anything was begun: later commands are not stuck on it"
    # Made readable, the job goes on from where it stopped.
    assert out["after"] == "RUNNING", out
