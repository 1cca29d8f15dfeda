"""``job run --all --engine ray`` on a local Ray cluster started once for the
session (2 CPUs): the same results as a serial run, every call served and
recorded once, and a batch that survives a worker killed mid-step."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time

import pytest

from logist.store.session import JobFiles, LEASE_NAME
from logist.store.jobsdir import JobsDir
from logist.replay.scripted import ScriptedLLMServer
from logist.replay.server import ReplayLLMServer

from conftest import logist_cli
from engine.batch_helpers import (
    MODEL, NEEDS_RAY, WORDCOUNT, corrupt_files, fingerprint, make_jobs, recorded_calls, run_all, unknown_call_keys,
)

pytestmark = [pytest.mark.slow, NEEDS_RAY]


@pytest.fixture(scope="session")
def ray_cluster():
    """The address of a local Ray cluster (num_cpus=2) for the whole session."""
    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # child processes join without a token file
    # A cluster of its own, whatever Ray state the machine has (a RAY_ADDRESS,
    # a stale ray_current_cluster file, another cluster running).
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="ERROR")
    try:
        yield ray.get_runtime_context().gcs_address
    finally:
        ray.shutdown()


def test_twenty_jobs_as_ray_tasks_end_as_a_serial_run(jobs, tmp_path, ray_cluster):
    reference_jobs = JobsDir(tmp_path / "reference")
    reference_jobs.init()
    make_jobs(reference_jobs, 1)
    with ReplayLLMServer(WORDCOUNT) as server:
        assert run_all(reference_jobs, server, "--engine", "serial").returncode == 3
    reference = fingerprint(reference_jobs.path / "job-00")

    ids = make_jobs(jobs, 20)
    with ReplayLLMServer(WORDCOUNT) as server:
        result = run_all(jobs, server, "--engine", "ray", "--address", ray_cluster, "--json", process=True)
    assert result.returncode == 3, result.stderr
    assert [o["job_id"] for o in json.loads(result.stdout)] == ids
    for job_id in ids:
        assert fingerprint(jobs.path / job_id) == reference, job_id
    assert len(server.ledger) == sum(recorded_calls(jobs.path / j) for j in ids) == 80
    assert sorted(e["job"] for e in server.ledger) == sorted(ids * 4) and server.mismatches == []
    assert "Batch of 20 jobs (ray)" in result.stderr


def test_a_runner_killed_mid_batch_the_batch_completes(jobs, ray_cluster):
    ids = make_jobs(jobs, 8)
    with ReplayLLMServer(WORDCOUNT, latency=0.4, repeats=True) as server:
        batch = subprocess.Popen(
            [sys.executable, "-m", "logist", "--jobs-dir", str(jobs.path), "job", "run", "--all", "--engine", "ray",
             "--address", ray_cluster, "--base-url", server.base_url, "--model", MODEL, "--json"],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        killed = None
        deadline = time.monotonic() + 120
        while killed is None and time.monotonic() < deadline and batch.poll() is None:
            for job_id in ids:
                lease = JobFiles(jobs.path / job_id).read_lease()
                if lease and lease.get("engine") == "ray" and len(server.ledger) >= 6:
                    os.kill(lease["pid"], signal.SIGKILL)  # a Ray worker, mid-job
                    killed = (job_id, lease["pid"])
                    break
            time.sleep(0.05)
        stdout, stderr = batch.communicate(timeout=300)
    assert killed is not None, "a runner was killed while it held a job"
    assert batch.returncode == 3, stderr
    outcomes = {o["job_id"]: o for o in json.loads(stdout)}
    assert all(o["status"] == "APPROVAL_REQUIRED" and o["error"] is None and not o["skipped"]
               for o in outcomes.values()), stdout
    for job_id in ids:
        assert recorded_calls(jobs.path / job_id) == 4, job_id
        assert not (jobs.path / job_id / LEASE_NAME).exists()
    assert corrupt_files(jobs) == []
    # The promise: every paid call recorded exactly once; a call in flight when
    # its runner died (one per job that runner held, at most) is sent again
    # once, with the same Idempotency-Key as the history's call of unknown outcome.
    repeats = [e for e in server.ledger if e["repeat"]]
    unknown_keys = {key for job_id in ids for key in unknown_call_keys(jobs.path / job_id)}
    assert len(repeats) <= len(unknown_keys) <= len(ids)
    assert all(e["key"] in unknown_keys for e in repeats), (repeats, unknown_keys)
    assert len({e["key"] for e in repeats}) == len(repeats), "no call sent a third time"
    assert len(server.ledger) == sum(recorded_calls(jobs.path / j) for j in ids) + len(repeats)
    assert sorted(e["job"] for e in server.ledger if not e["repeat"]) == sorted(ids * 4)
    listing = subprocess.run([sys.executable, "-m", "logist", "--jobs-dir", str(jobs.path), "job", "list", "--json"],
                             capture_output=True, text=True)
    assert {j["status"] for j in json.loads(listing.stdout)["jobs"]} == {"APPROVAL_REQUIRED"}


@pytest.mark.wire
def test_without_ray_the_error_is_one_line(jobs, llm, tmp_path):
    make_jobs(jobs, 1)
    hide = tmp_path / "noray"
    hide.mkdir()
    (hide / "ray.py").write_text("raise ImportError('no ray here')\n")
    env = {"PYTHONPATH": os.pathsep.join([str(hide), os.environ.get("PYTHONPATH", "")])}
    from conftest import logist_process

    result = logist_process("--jobs-dir", str(jobs.path), "job", "run", "--all", "--engine", "ray",
                        "--base-url", llm.base_url, env=env)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [
        "Error: --engine ray needs Ray, which is not installed: pip install 'logist-jobs[ray]'"]


def _dead_address() -> str:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return f"127.0.0.1:{sock.getsockname()[1]}"  # closed again: nothing listens there


@pytest.mark.wire
@pytest.mark.parametrize("how", ["--address", "RAY_ADDRESS"])
def test_a_cluster_named_but_gone_is_one_line(jobs, llm, how):
    from conftest import logist_process

    make_jobs(jobs, 1)
    dead = _dead_address()
    options, env = (["--address", dead], {}) if how == "--address" else ([], {"RAY_ADDRESS": dead})
    started = time.monotonic()
    result = logist_process("--jobs-dir", str(jobs.path), "job", "run", "--all", "--engine", "ray", *options,
                            "--base-url", llm.base_url, env=env, timeout=60)
    assert result.returncode == 1
    where = "--address" if how == "--address" else "RAY_ADDRESS"
    assert result.stderr.strip().splitlines() == [
        f"Error: the Ray cluster at {dead} ({where}) does not answer (Connection refused): is it running? "
        "('ray status' tells)"]
    assert time.monotonic() - started < 30, "said at once, not after ray.init's minutes of retries"
    assert json.loads((jobs.path / "job-00" / "job_manifest.json").read_text())["status"] == "PENDING"


# --------------------------------------------------------------------------
# Coding agents as the Worker of jobs Ray runs.

#: A coding agent (the ``command`` agent): calls its model through the gateway as many times as its job's
#: number says plus one, each call with a nonce of its own, notes the nonces outside the workspace, writes
#: hello.py and ends with COMPLETED.
NONCE_AGENT = '''\
import json, os, sys, urllib.request, uuid
log_dir = sys.argv[1]
job = os.path.basename(os.path.dirname(os.environ["LOGIST_WORKSPACE"]))
made = []
for number in range(int(job.rsplit("-", 1)[1]) + 1):
    nonce = uuid.uuid4().hex
    body = {"model": "scripted", "messages": [{"role": "user", "content": "%s call %d nonce %s" % (job, number, nonce)}]}
    request = urllib.request.Request(os.environ["OPENAI_BASE_URL"] + "/chat/completions",
                                     data=json.dumps(body).encode(),
                                     headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
                                              "Content-Type": "application/json"})
    urllib.request.urlopen(request, timeout=60).read()
    made.append(nonce)
with open(os.path.join(log_dir, job + ".json"), "w") as log:
    json.dump(made, log)
with open("hello.py", "w") as out:
    out.write("print('hello')\\n")
print(json.dumps({"action": "COMPLETED", "evidence_files": ["hello.py"], "summary_for_supervisor": "hello.py"}))
'''

_NONCE = re.compile(r"nonce ([0-9a-f]{32})")


def test_four_agent_jobs_as_ray_tasks_record_every_gateway_call_once(jobs, tmp_path, ray_cluster):
    program, log_dir = tmp_path / "nonce_agent.py", tmp_path / "agent-log"
    program.write_text(NONCE_AGENT)
    log_dir.mkdir()
    (jobs.path / "roles").mkdir(exist_ok=True)
    (jobs.path / "roles" / "Coder.json").write_text(json.dumps({
        "name": "Coder", "description": "a coding agent", "instructions": "Write hello.py.", "llm_model": MODEL,
        "agent": "command", "agent_command": [sys.executable, str(program), str(log_dir)]}))
    ids = [f"agent-{n}" for n in range(4)]
    for job_id in ids:
        created = logist_cli("--jobs-dir", str(jobs.path), "job", "create", job_id, "-o", "Write hello.py.",
                             "--worker", "Coder")
        assert created.returncode == 0, created.stderr
    approve = json.dumps({"action": "COMPLETED", "evidence_files": ["hello.py"], "summary_for_supervisor": "ok"})
    calls = {job_id: number + 1 for number, job_id in enumerate(ids)}  # the agent's calls, by the job's number
    # Every answer is the Supervisor's approval: the agent reads none of them, so the jobs may take them in any order.
    with ScriptedLLMServer([approve] * (sum(calls.values()) + len(ids))) as server:
        result = run_all(jobs, server, "--engine", "ray", "--address", ray_cluster, "--json", process=True)
        forwarded = [json.dumps(body) for body in server.requests]
    assert result.returncode == 3, result.stderr
    assert sorted(o["job_id"] for o in json.loads(result.stdout)) == ids and "Batch of 4 jobs (ray)" in result.stderr
    assert len(forwarded) == sum(calls.values()) + len(ids)  # the agents' calls and one Supervisor's call a job
    for job_id in ids:
        job = JobFiles(jobs.path / job_id)
        [run] = [e for e in job.load_history().interactions if e.kind == "agent_run"]
        made = json.loads((log_dir / f"{job_id}.json").read_text())  # the nonces, as the agent made its calls
        assert len(made) == calls[job_id] == len(run.agent.calls)
        kept = [json.loads((job.dir / call.file).read_text()) for call in run.agent.calls]
        assert [call.number for call in run.agent.calls] == list(range(1, calls[job_id] + 1))
        assert sorted(p.name for p in (job.dir / "agent_runs" / f"{run.sequence:04d}").iterdir()) == \
            [f"call-{n:03d}.json" for n in range(1, calls[job_id] + 1)]
        # Each call recorded once, in the order the agent made it, and forwarded once.
        assert [_NONCE.search(json.dumps(k["request"])).group(1) for k in kept] == made
        for nonce in made:
            assert sum(nonce in body for body in forwarded) == 1
        manifest = job.read_manifest()
        assert str(manifest.status) == "APPROVAL_REQUIRED", manifest.reason
        assert manifest.totals.llm_calls == calls[job_id] + 1
        assert run.response.actions == ["COMPLETED"] and run.response.files_changed == ["hello.py"]
