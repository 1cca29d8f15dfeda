"""``job run --all --engine ray`` on a real two-node cluster
(``ray.cluster_utils.Cluster``: two raylets on this machine, 1 CPU each):
one runner per node, and a node lost mid-batch costs no job and no call
paid twice but for the calls in flight on it, each sent again once with its
Idempotency-Key."""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from typing import Optional

import pytest

from logist.store.session import JobFiles, LEASE_NAME
from logist.replay.server import ReplayLLMServer

from engine.batch_helpers import (
    MODEL, NEEDS_RAY, RAY_LEAN, RAY_LEAN_HEAD, RAY_LEAN_START, WORDCOUNT, corrupt_files, make_jobs, recorded_calls,
    unknown_call_keys,
)

pytestmark = [pytest.mark.slow, NEEDS_RAY]


def _two_nodes(second_env: Optional[dict] = None):
    """A head node and a second node, 1 CPU and a small object store each
    (``second_env``: the second node's processes' environment, added to)."""
    from ray import cluster_utils

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    small = dict(num_cpus=1, object_store_memory=80 * 1024 * 1024, **RAY_LEAN)
    cluster = cluster_utils.Cluster(initialize_head=True, head_node_args=dict(small, **RAY_LEAN_HEAD))
    second = cluster.add_node(**small, **({"env_vars": second_env} if second_env else {}))
    cluster.wait_for_nodes()
    return cluster, second


@pytest.fixture
def two_nodes():
    cluster, second = _two_nodes()
    try:
        yield cluster, second
    finally:
        cluster.shutdown()


def _parent(pid: int) -> int:
    with open(f"/proc/{pid}/stat", "rb") as handle:
        return int(handle.read().rsplit(b")", 1)[1].split()[1])


def _runs_under(pid: int, ancestor: int) -> bool:
    while pid > 1:
        if pid == ancestor:
            return True
        try:
            pid = _parent(pid)
        except OSError:
            return False
    return False


def assert_every_job_at_rest(jobs, ids, batch, stdout: str, stderr: str) -> None:
    """The batch ended with every job waiting for approval (none failed or
    skipped), its 4 calls recorded, its lease released, no file damaged."""
    assert batch.returncode == 3, stderr
    outcomes = {o["job_id"]: o for o in json.loads(stdout)}
    assert sorted(outcomes) == ids
    assert all(o["status"] == "APPROVAL_REQUIRED" and o["error"] is None and not o["skipped"]
               for o in outcomes.values()), stdout
    for job_id in ids:
        assert recorded_calls(jobs.path / job_id) == 4, job_id
        assert not (jobs.path / job_id / LEASE_NAME).exists()
    assert corrupt_files(jobs) == []


def _batch(jobs, server, address: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "logist", "--jobs-dir", str(jobs.path), "job", "run", "--all", "--engine", "ray",
         "--address", address, "--concurrency", "4", "--base-url", server.base_url, "--model", MODEL, "--json"],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="finds each runner's node through /proc")
def test_a_node_lost_mid_batch_costs_no_job_and_no_call_paid_twice(jobs, two_nodes):
    cluster, second = two_nodes
    raylet = second.all_processes["raylet"][0].process.pid
    ids = make_jobs(jobs, 8)
    with ReplayLLMServer(WORDCOUNT, latency=0.4, repeats=True) as server:
        batch = _batch(jobs, server, cluster.address)
        held_there, removed = set(), False
        deadline = time.monotonic() + 180
        while not removed and time.monotonic() < deadline and batch.poll() is None:
            leases = {job_id: JobFiles(jobs.path / job_id).read_lease() for job_id in ids}
            held_there = {j for j, lease in leases.items() if lease and _runs_under(lease["pid"], raylet)}
            if held_there and len(server.ledger) >= 6:
                cluster.remove_node(second, allow_graceful=False)  # the node is lost, calls in flight on it
                removed = True
            time.sleep(0.05)
        stdout, stderr = batch.communicate(timeout=400)
    assert removed, f"no job ran on the second node: {stderr}"
    assert_every_job_at_rest(jobs, ids, batch, stdout, stderr)
    repeats = [e for e in server.ledger if e["repeat"]]
    unknown = {job_id: unknown_call_keys(jobs.path / job_id) for job_id in ids}
    assert all(not keys for job_id, keys in unknown.items() if job_id not in held_there), \
        "only the jobs the lost node held have calls of unknown outcome"
    keys = [key for found in unknown.values() for key in found]
    assert all(e["key"] in keys for e in repeats) and len({e["key"] for e in repeats}) == len(repeats)
    assert len(server.ledger) == sum(recorded_calls(jobs.path / j) for j in ids) + len(repeats)


def test_each_node_gets_one_runner_with_its_share(jobs, two_nodes):
    cluster, second = two_nodes
    ids = make_jobs(jobs, 6)
    with ReplayLLMServer(WORDCOUNT, latency=0.3) as server:
        batch = _batch(jobs, server, cluster.address)
        runners, most = set(), 0
        while batch.poll() is None:
            held = [lease for lease in (JobFiles(jobs.path / job_id).read_lease() for job_id in ids) if lease]
            runners.update(lease["pid"] for lease in held)
            most = max(most, len(held))
            time.sleep(0.05)
        stdout, stderr = batch.communicate()
    assert batch.returncode == 3, stderr
    assert {o["status"] for o in json.loads(stdout)} == {"APPROVAL_REQUIRED"}
    assert len(runners) == 2, "one runner process per node"
    assert most == 4, "--concurrency 4 runs 4 jobs at once on two 1-CPU nodes (a runner asks for no CPU)"
    assert len(server.ledger) == 24 and all(not e["repeat"] for e in server.ledger)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def head_and_copy(jobs, tmp_path):
    """A head node, and a second node started by ``ray start`` in a mount
    namespace of its own where a copy of the jobs directory is mounted over
    the jobs directory's path: the same path, another folder, as on a node
    without the shared filesystem."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) to give the second node a mount namespace")
    from ray import cluster_utils

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    cluster = cluster_utils.Cluster(initialize_head=True, head_node_args=dict(
        num_cpus=1, object_store_memory=80 * 1024 * 1024, **RAY_LEAN, **RAY_LEAN_HEAD))
    node = None
    try:
        make_jobs(jobs, 6)
        copy = tmp_path / "copy"
        shutil.copytree(jobs.path, copy, symlinks=True)
        ray_program = shutil.which("ray", path=os.path.dirname(sys.executable))
        ports = " ".join(f"--{name} {_free_port()}" for name in (
            "dashboard-agent-listen-port", "dashboard-agent-grpc-port", "metrics-export-port", "runtime-env-agent-port"))
        command = (f"mount --bind {copy} {jobs.path} && exec {ray_program} start --address {cluster.address} "
                   f"--num-cpus 1 --object-store-memory {80 * 1024 * 1024} --min-worker-port 0 --max-worker-port 0 "
                   f"{ports} {RAY_LEAN_START} --block")
        node = subprocess.Popen(["unshare", "-m", "--propagation", "private", "sh", "-c", command],
                                start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 90
        while len(cluster.global_state._live_node_ids()) < 2:
            assert time.monotonic() < deadline and node.poll() is None, "the second node did not join"
            time.sleep(0.5)
        yield cluster
    finally:
        if node is not None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(node.pid, signal.SIGKILL)
            node.wait()
        cluster.shutdown()


def test_a_node_that_sees_a_copy_of_the_jobs_directory_is_named_and_runs_nothing(jobs, head_and_copy):
    cluster = head_and_copy
    ids = [f"job-{n:02d}" for n in range(6)]
    with ReplayLLMServer(WORDCOUNT) as server:
        batch = _batch(jobs, server, cluster.address)
        stdout, stderr = batch.communicate(timeout=300)
    assert batch.returncode == 3, stderr
    refusals = [line for line in stderr.splitlines() if "runs no jobs" in line]
    assert len(refusals) == 1 and f"it does not see the jobs directory {jobs.path}" in refusals[0], stderr
    assert {o["status"] for o in json.loads(stdout)} == {"APPROVAL_REQUIRED"}
    for job_id in ids:
        assert recorded_calls(jobs.path / job_id) == 4, job_id
    assert len(server.ledger) == 24 and all(not e["repeat"] for e in server.ledger), "no call paid twice"


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="finds each runner's node through /proc")
def test_a_runner_killed_after_its_calling_record_costs_no_job_and_no_call_paid_twice(jobs, tmp_path):
    # Every process of the second node is armed to kill itself right after the
    # step's journal says "calling" (before the request leaves); the first to
    # get there dies, its runner with it, taking its other jobs' calls in flight.
    once = tmp_path / "died-once"
    cluster, second = _two_nodes({"LOGIST_FAILPOINT": "after_calling", "LOGIST_FAILPOINT_ONCE": str(once)})
    try:
        ids = make_jobs(jobs, 6)
        with ReplayLLMServer(WORDCOUNT, latency=0.3, repeats=True) as server:
            batch = _batch(jobs, server, cluster.address)
            stdout, stderr = batch.communicate(timeout=400)
    finally:
        cluster.shutdown()
    assert once.exists(), f"no runner on the second node reached the point: {stderr}"
    assert_every_job_at_rest(jobs, ids, batch, stdout, stderr)
    unknown = [key for job_id in ids for key in unknown_call_keys(jobs.path / job_id)]
    assert unknown, "the killed step's call is recorded as of unknown outcome"
    repeats = [e for e in server.ledger if e["repeat"]]
    assert all(e["key"] in unknown for e in repeats) and len({e["key"] for e in repeats}) == len(repeats)
    # Every request the server saw is a recorded call, or one sent again with its unknown call's key;
    # the killed call itself never left (the failpoint is before the request).
    assert len(server.ledger) == sum(recorded_calls(jobs.path / j) for j in ids) + len(repeats)
    assert sorted(e["job"] for e in server.ledger if not e["repeat"]) == sorted(ids * 4)
