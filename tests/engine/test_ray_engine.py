"""``job run --all --engine ray`` on a local Ray cluster started once for the
session (2 CPUs): the same results as a serial run, every call served and
recorded once, and a batch that survives a worker killed mid-step."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from logist.store.session import JobFiles, LEASE_NAME
from logist.store.jobsdir import JobsDir
from logist.replay.server import ReplayLLMServer

from engine.batch_helpers import (
    MODEL, WORDCOUNT, corrupt_files, fingerprint, make_jobs, recorded_calls, run_all, unknown_call_keys,
)

ray = pytest.importorskip("ray", reason="the ray engine's tests need Ray (pip install -e '.[test]')")
pytestmark = pytest.mark.slow


@pytest.fixture(scope="session")
def ray_cluster():
    """The address of a local Ray cluster (num_cpus=2) for the whole session."""
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
