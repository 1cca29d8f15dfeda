"""``job run --all`` on the serial and threads engines: the same jobs, the
same results; every call served once and recorded once; two runners on one
jobs directory share the work through the jobs' leases.
(The ray engine: tests/engine/test_ray_engine.py.)"""

from __future__ import annotations

import json
import subprocess
import sys
import os

import pytest

from logist.store.session import LEASE_NAME
from logist.store.jobsdir import JobsDir
from logist.replay.server import ReplayLLMServer

from conftest import REPO_ROOT
from engine.batch_helpers import WORDCOUNT, corrupt_files, fingerprint, make_jobs, recorded_calls, run_all

pytestmark = pytest.mark.slow


@pytest.fixture
def reference(tmp_path) -> dict:
    """One job of the recording, run alone and serially."""
    jobs = JobsDir(tmp_path / "reference")
    jobs.init()
    make_jobs(jobs, 1)
    with ReplayLLMServer(WORDCOUNT) as server:
        result = run_all(jobs, server, "--engine", "serial")
    assert result.returncode == 3, result.stderr
    return fingerprint(jobs.path / "job-00")


def test_twenty_jobs_on_eight_threads_end_as_a_serial_run(jobs, reference):
    ids = make_jobs(jobs, 20)
    with ReplayLLMServer(WORDCOUNT, latency=0.2) as server:
        result = run_all(jobs, server, "--engine", "threads", "--concurrency", "8", "--json")
    assert result.returncode == 3, result.stderr  # every job waits for approval
    assert "Traceback" not in result.stderr
    assert [o["job_id"] for o in json.loads(result.stdout)] == ids, "the outcomes in queue order"
    for job_id in ids:
        assert fingerprint(jobs.path / job_id) == reference, job_id
        assert not (jobs.path / job_id / LEASE_NAME).exists(), "released"
    # The server saw exactly the calls the histories record, each job its own.
    assert len(server.ledger) == sum(recorded_calls(jobs.path / j) for j in ids) == 80
    assert sorted(e["job"] for e in server.ledger) == sorted(ids * 4)
    assert server.mismatches == [] and not any(e["repeat"] for e in server.ledger)
    # A line as each job finishes, with where the batch stands, then the batch's line.
    finished = [line for line in result.stderr.splitlines() if line.split()[:1] and line.split()[0] in ids]
    assert len(finished) == 20 and finished[-1].endswith("[20/20: 0 done, 20 waiting for a person, 0 failed; 0 running]")
    assert "Batch of 20 jobs (threads)" in result.stderr.splitlines()[-1]
    assert corrupt_files(jobs) == []


def test_two_runners_on_one_jobs_dir_run_every_job_once(jobs, tmp_path):
    ids = make_jobs(jobs, 12)
    env = dict(os.environ)
    with ReplayLLMServer(WORDCOUNT, latency=0.1) as server:
        command = [sys.executable, "-m", "logist", "--jobs-dir", str(jobs.path), "job", "run", "--all",
                   "--base-url", server.base_url, "--model", "gpt-4o-mini", "--concurrency", "4", "--json"]
        runners = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
                   for _ in range(2)]
        results = [(r.wait(timeout=300), *r.communicate()) for r in runners]
    for code, stdout, stderr in results:
        assert code in (0, 3), stderr  # by the exit-code table: no error for a job the other runner held
        assert "error" not in stderr and "Traceback" not in stderr
        assert all(o["error"] is None for o in json.loads(stdout))
    ran = [[o for o in json.loads(stdout) if o["steps"]] for _, stdout, _ in results]
    assert sorted(o["job_id"] for side in ran for o in side) == ids, "each job run by exactly one of them"
    skipped = [o for _, stdout, _ in results for o in json.loads(stdout) if o["skipped"]]
    assert all("run by another runner: host" in o["skipped"] for o in skipped)
    # Every job: its four calls, served once and recorded once.
    assert sorted(e["job"] for e in server.ledger) == sorted(ids * 4) and server.mismatches == []
    for job_id in ids:
        assert recorded_calls(jobs.path / job_id) == 4
        assert json.loads((jobs.path / job_id / "job_manifest.json").read_text())["status"] == "APPROVAL_REQUIRED"
    assert corrupt_files(jobs) == []


def _lease(job_dir, *, seconds: float) -> None:
    from datetime import datetime, timedelta, timezone

    now = datetime.now(timezone.utc)
    (job_dir / LEASE_NAME).write_text(json.dumps(
        {"host": "node-7", "pid": 42, "engine": "ray", "task": "abc", "token": "t", "renewed_at": now.isoformat(),
         "expires_at": (now + timedelta(seconds=seconds)).isoformat()}))


@pytest.mark.wire  # logist job run --all, through the CLI
def test_a_leased_job_is_skipped_and_said_so(jobs, llm):
    import threading

    make_jobs(jobs, 1)
    # Another host's runner holds the job and renews its lease, as a live one does.
    stop = threading.Event()
    _lease(jobs.path / "job-00", seconds=30)

    def renew() -> None:
        while not stop.wait(0.3):
            _lease(jobs.path / "job-00", seconds=30)

    renewer = threading.Thread(target=renew)
    renewer.start()
    try:
        result = run_all(jobs, llm)
    finally:
        stop.set()
        renewer.join()
    assert result.returncode == 0, result.stderr
    assert "job-00" in result.stderr and "skipped: run by another runner: host node-7, pid 42 (ray task abc)" in result.stderr
    assert llm.requests == []


@pytest.mark.wire  # logist job run --all, through the CLI
def test_a_job_whose_lease_nobody_renews_is_taken_over_when_it_lapses(jobs, llm):
    # A batch rerun after its driver crashed: the dead runners' leases (another
    # host's, not yet expired) are not renewed. They are watched until they lapse
    # and the jobs are run, not skipped with the batch exiting 0 and them left.
    make_jobs(jobs, 1)
    _lease(jobs.path / "job-00", seconds=3)
    with ReplayLLMServer(WORDCOUNT) as server:
        result = run_all(jobs, server)
    assert result.returncode == 3, result.stderr
    assert "took over the lease of host node-7" in result.stderr and "skipped" not in result.stderr
    assert recorded_calls(jobs.path / "job-00") == 4


@pytest.mark.wire  # logist job run --all, through the CLI
def test_engine_options_are_checked(jobs, llm):
    make_jobs(jobs, 1)
    single = run_all(jobs, llm, "--engine", "threads")
    assert single.returncode != 2  # with --all: fine
    named = subprocess.run([sys.executable, "-m", "logist", "job", "run", "job-00", "--engine", "ray"],
                           capture_output=True, text=True)
    assert named.returncode == 2 and "go with --all" in named.stderr
    address = run_all(jobs, llm, "--address", "auto")
    assert address.returncode == 2 and "the threads engine has none" in address.stderr


LONE_ENGINE = '''
import sys

from logist.engine.engines import run_one


class LoneEngine:
    """A third party's engine: one job after another, each said on stderr."""

    name = "lone"
    concurrency = 1

    @classmethod
    def create(cls, concurrency, address):
        return cls()

    def run(self, jobs_path, job_ids, kwargs, on_step):
        for job_id in job_ids:
            print(f"lone engine runs {job_id}", file=sys.stderr)
            yield run_one(jobs_path, job_id, kwargs, engine=self.name, task="lone", on_step=on_step)
'''


def test_an_engine_registered_by_another_package_runs_the_queue(jobs, tmp_path):
    """An engine is an entry point of the group logist.engines, as serial,
    threads and ray are in Logist's own pyproject.toml: a package installed
    beside Logist (here a dist-info folder on PYTHONPATH) adds one."""
    from conftest import logist_process

    from engine.batch_helpers import MODEL

    site = tmp_path / "site"
    (site / "lone_engine-1.0.dist-info").mkdir(parents=True)
    (site / "lone_engine.py").write_text(LONE_ENGINE)
    (site / "lone_engine-1.0.dist-info" / "METADATA").write_text("Metadata-Version: 2.1\nName: lone-engine\nVersion: 1.0\n")
    (site / "lone_engine-1.0.dist-info" / "entry_points.txt").write_text("[logist.engines]\nlone = lone_engine:LoneEngine\n")
    ids = make_jobs(jobs, 2)
    env = {"PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")])}
    with ReplayLLMServer(WORDCOUNT) as server:
        ran = logist_process("--jobs-dir", str(jobs.path), "job", "run", "--all", "--engine", "lone", "--base-url",
                             server.base_url, "--model", MODEL, env=env, timeout=300)
        shown = logist_process("job", "run", "--help", env=env)
        alone = logist_process("--jobs-dir", str(jobs.path), "job", "run", "--all", "--engine", "lone", env={})
    assert ran.returncode == 3, ran.stderr  # both jobs wait for approval
    assert [line for line in ran.stderr.splitlines() if line.startswith("lone engine runs")] == [
        f"lone engine runs {job_id}" for job_id in ids]
    assert "Batch of 2 jobs (lone)" in ran.stderr
    assert "[lone|ray|serial|threads]" in " ".join(shown.stdout.split())
    assert alone.returncode == 2 and "'lone' is not one of 'ray', 'serial', 'threads'" in alone.stderr
