"""No ``logist`` process shows a secret in ``/proc/<pid>/environ`` (issue 27).

The environment block a process was started with is what
``/proc/<pid>/environ`` shows, to every process of the same user that may
read it; a daemon a command left behind read the key there from the next
``logist`` process. The program now takes every secret out of its
environment as it starts (logist.secrets.process): these tests read the block of
real ``logist`` processes while they are alive, well past their start-up:
``job run`` waiting on a slow answer of the scripted server, and ``job
status`` blocked writing its output into a pipe nobody reads yet.
"""

from __future__ import annotations

import os
import select
import subprocess
import sys
import time
from pathlib import Path

import pytest

from logist.engine.create import create_job
from logist.replay.scripted import Reply, answer

from conftest import CANARY_KEY

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc/<pid>/environ")

GH_PAT = "ghp_startupPAT0123456789abcdefABCDEF01"
DB_PASSWORD = "dbpass-startup-5e2b91"
SECRETS = (CANARY_KEY, GH_PAT, DB_PASSWORD)


def secret_env() -> dict:
    # Without RAY_*: the Ray tests leave RAY_AUTH_MODE in the test process's environment for their
    # cluster's life (its processes join without a token), and a name with AUTH in it is held apart
    # too; these tests count the names held apart of those they give.
    base = {name: value for name, value in os.environ.items() if not name.startswith("RAY_")}
    return {**base, "LOGIST_API_KEY": CANARY_KEY, "GH_PAT": GH_PAT,
            "DATABASE_URL": f"postgres://app:{DB_PASSWORD}@db.invalid/app"}


def environ_of(pid: int) -> bytes:
    return Path(f"/proc/{pid}/environ").read_bytes()


def wait_for(condition, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def test_a_running_job_run_shows_no_secret_in_its_environment(jobs, llm):
    job = create_job(jobs, "slow", "Anything")
    llm.add(Reply(content=answer("MESSAGE", message="late"), delay=60))
    proc = subprocess.Popen([sys.executable, "-m", "logist", "job", "run", job.id, "--base-url", llm.base_url],
                            env=secret_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        wait_for(lambda: llm.requests or proc.poll() is not None)
        assert proc.poll() is None, proc.communicate()
        block = environ_of(proc.pid)
        assert b"PATH=" in block and b"LOGIST_JOBS_DIR=" in block, "the block was read"
        assert [s for s in SECRETS if s.encode() in block] == []
        for task in os.listdir(f"/proc/{proc.pid}/task"):  # every thread shows the same block
            assert CANARY_KEY.encode() not in Path(f"/proc/{proc.pid}/task/{task}/environ").read_bytes()
        # The key still reached the endpoint: it is given to the client directly.
        assert {k.lower(): v for k, v in llm.headers[0].items()}["authorization"] == f"Bearer {CANARY_KEY}"
    finally:
        proc.kill()
        proc.communicate()


def test_a_running_job_status_shows_no_secret_in_its_environment(jobs, llm):
    """``job status --json`` of a job whose open question is longer than a
    pipe holds: the process blocks writing its answer until it is read."""
    from logist.engine.loop import run_job

    job = create_job(jobs, "long", "Anything")
    llm.add(answer("ASK", question="why? " * 40_000))
    run_job(job, base_url=llm.base_url)
    proc = subprocess.Popen([sys.executable, "-m", "logist", "job", "status", job.id, "--json"],
                            env=secret_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        # Its answer has begun to come: it is past its start-up, and blocked on the rest.
        assert select.select([proc.stdout], [], [], 60)[0], "no output within 60 s"
        assert proc.poll() is None, "status ended before its answer was read"
        block = environ_of(proc.pid)
        assert b"PATH=" in block, "the block was read"
        assert [s for s in SECRETS if s.encode() in block] == []
    finally:
        out, err = proc.communicate()
    assert proc.returncode == 0, err
    assert len(out) > 200_000


def test_the_program_holds_secrets_apart_and_commands_still_get_what_a_job_names(tmp_path):
    """While a ``logist`` command runs, os.environ holds no secret; the key
    is read from the hold; a variable a job passes to its commands still
    reaches them. The hold lives as long as the run: after it, os.environ
    has its secrets back and nothing is held (the blanked block stays)."""
    probe = (
        "import os, sys\n"
        "import logist.__main__ as program\n"
        "from logist.secrets import environment\n"
        "from logist.workspace import sandbox as processes\n"
        "from logist.store.config import resolve_api_key\n"
        "def seen():\n"
        "    secret = [n for n in ('LOGIST_API_KEY', 'GH_PAT', 'DATABASE_URL') if n in os.environ]\n"
        "    block = open('/proc/self/environ', 'rb').read()\n"
        "    return (secret, resolve_api_key() == os.environ['EXPECTED'], sorted(environment.held()),\n"
        "            processes.command_env(['GH_PAT']).get('GH_PAT') == os.environ['WANTED_GH'],\n"
        "            os.environ['EXPECTED'].encode() in block)\n"
        "program.cli_main = lambda argv: print(*seen())  # the command: what it sees\n"
        "program.main(['workflow'])\n"
        "print(*seen())\n")
    env = {**secret_env(), "EXPECTED": CANARY_KEY, "WANTED_GH": GH_PAT}
    done = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split("\n")[-2] == "['LOGIST_API_KEY', 'GH_PAT', 'DATABASE_URL'] True [] True False"
    assert done.stdout.split("\n")[-3] == "[] True ['DATABASE_URL', 'GH_PAT', 'LOGIST_API_KEY'] True False"
