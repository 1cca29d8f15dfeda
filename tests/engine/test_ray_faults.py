"""A Ray batch on two nodes with hostnames of their own, under faults
injected for real: a runner stopped (SIGSTOP) for two lease lengths, a
lease dated ten minutes ahead, the second node killed (every process of it,
SIGKILL) mid-batch, and the driver killed (SIGKILL) then the same
``job run --all`` run again.

The second node is a ``ray start`` in a UTS namespace of its own whose
hostname is ``node-b`` (``unshare -u``), so its runner's leases name
another host than the head node's, as on two machines: a lease of a lost
node is over by its expiry, not by its process being gone here.

For each fault: every job ends where its recorded answers lead (as a job
run alone and serially does), every paid call is recorded once (one sent
again only when a fault cut it off, with its Idempotency-Key, once), and
every job the fault hit is taken over at most one lease length after the
fault, read from the lease the next runner wrote (its ``acquired_at``)
against the moment the fault was injected, plus :data:`MARGIN`. For a
fault met by a batch started after it (a lease dated ahead, a driver
killed then run again), the wait counts from when that batch's first
runner was up (:class:`RunnersUp`): a batch's start-up (Ray's driver, a
runner's process importing Logist: seconds on a loaded machine) is not a
lease's wait.

Ray's start-up is the cost: the faults run one after another on one
cluster, in one test (a killed node is replaced by a fresh one before the
next fault). Sized by ``LOGIST_SCALE``: 8 jobs in the suite, 24 at full size.
(The threads engine's faults: tests/engine/test_batch_faults.py.)"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import timedelta

import pytest

from logist.store.jobsdir import JobsDir
from logist.store.session import LEASE_NAME
from logist.replay.server import ReplayLLMServer
from logist.engine.ray_engine import NONCE_DIR

from engine.batch_helpers import (
    NEEDS_RAY, RAY_LEAN, RAY_LEAN_HEAD, RAY_LEAN_START, WORDCOUNT, TakeoverWatch, assert_each_paid_call_recorded_once, corrupt_files, end_state, leases_of,
    make_jobs, finish, now, output, scaled, serial_reference, set_lease_seconds, start_batch,
)

pytestmark = [pytest.mark.slow, pytest.mark.scale, NEEDS_RAY]

JOBS = scaled(8, 24)
CONCURRENCY = "4"
#: config.json's lease_seconds for these batches.
LEASE = 5.0
#: What a takeover may take beyond one lease length: the driver looks at a
#: lease as it expires, then the job goes to a runner already up (the lost
#: runner's share moves to a runner on another node), which watches a lease
#: every 0.5 s.
MARGIN = 1.0
SMALL = dict(num_cpus=1, object_store_memory=80 * 1024 * 1024)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _pids() -> list[int]:
    return [int(name) for name in os.listdir("/proc") if name.isdigit()]


def _uts(pid: int):
    """The UTS namespace (hostname) process ``pid`` is in (None: gone or a zombie)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/uts")
    except OSError:
        return None


class NamedNodes:
    """A head node (this machine's hostname) and nodes started by ``ray
    start`` in UTS namespaces of their own, each with its own hostname."""

    def __init__(self):
        from ray import cluster_utils

        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        self.cluster = cluster_utils.Cluster(initialize_head=True, head_node_args=dict(SMALL, **RAY_LEAN, **RAY_LEAN_HEAD))
        self.nodes: dict[str, subprocess.Popen] = {}

    @property
    def address(self) -> str:
        return self.cluster.address

    def live(self) -> set:
        return set(self.cluster.global_state._live_node_ids())

    def add(self, hostname: str) -> None:
        ray_program = shutil.which("ray", path=os.path.dirname(sys.executable))
        ports = " ".join(f"--{name} {_free_port()}" for name in (
            "dashboard-agent-listen-port", "dashboard-agent-grpc-port", "metrics-export-port",
            "runtime-env-agent-port"))
        command = (f"hostname {hostname} && exec {ray_program} start --address {self.address} "
                   f"--num-cpus 1 --object-store-memory {SMALL['object_store_memory']} --min-worker-port 0 "
                   f"--max-worker-port 0 {ports} {RAY_LEAN_START} --block")
        before = self.live()  # a node just killed may be listed as alive a while yet
        self.nodes[hostname] = subprocess.Popen(["unshare", "-u", "sh", "-c", command], start_new_session=True,
                                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.monotonic() + 90
        while not self.live() - before:
            assert time.monotonic() < deadline and self.nodes[hostname].poll() is None, f"{hostname} did not join"
            time.sleep(0.5)

    def kill(self, hostname: str) -> None:
        """Every process of the node (raylet, workers, the runner: all the
        processes of its UTS namespace, whatever their session) at once: a machine lost."""
        node = self.nodes.pop(hostname)
        namespace = _uts(node.pid)
        if namespace is None:  # the node's first process has ended already (a node that did not join)
            node.wait()
            return
        deadline = time.monotonic() + 30
        while True:
            found = [pid for pid in _pids() if pid != os.getpid() and _uts(pid) == namespace]
            if not found:
                break
            assert time.monotonic() < deadline, f"{hostname}'s processes outlive SIGKILL: {found}"
            for pid in found:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            if node.poll() is None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    node.wait(0.1)
            time.sleep(0.05)
        node.wait()

    def shutdown(self) -> None:
        for hostname in list(self.nodes):
            self.kill(hostname)
        self.cluster.shutdown()


@pytest.fixture(scope="module")
def named_nodes():
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.skip("needs root and unshare(1) to give a node a hostname of its own")
    nodes = NamedNodes()
    try:
        nodes.add("node-b")
        yield nodes
    finally:
        nodes.shutdown()


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> dict:
    """One job of the recording, run alone and serially."""
    return serial_reference(tmp_path_factory.mktemp("reference"))


class RunnersUp:
    """When the first runner of a batch started from now on was up: the
    moment its nonce first shows in the jobs directory's
    ``.ray-nodes/<batch>/`` (each runner writes one there before it is
    handed any job; the driver's own file is named ``driver``), or, when
    the driver read the runners' nonces and removed the folder between two
    looks (a loaded machine), the moment the folder, seen holding the
    driver's nonce while the runners started, is seen gone: a little after
    the runners were up, which only shortens the wait measured from it by
    a look's interval."""

    def __init__(self, jobs: JobsDir):
        self.folder = jobs.path / NONCE_DIR
        self.seen = {p.name for p in self.folder.glob("*")} if self.folder.is_dir() else set()
        self.at = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        started: set[str] = set()  # this batch's folders seen so far
        while not self._stop.is_set() and self.at is None:
            with contextlib.suppress(OSError):
                for batch in self.folder.iterdir():
                    if batch.name not in self.seen:
                        started.add(batch.name)
                        if any(f.name != "driver" for f in batch.iterdir()):
                            self.at = now()
                            return
            if any(not (self.folder / name).exists() for name in started):
                self.at = now()
                return
            self._stop.wait(0.01)

    def stop(self):
        self._stop.set()
        self._thread.join()
        assert self.at is not None, "no runner of the batch was seen up"
        return self.at


def _fresh_jobs(tmp_path, name: str) -> tuple[JobsDir, list[str]]:
    jobs = JobsDir(tmp_path / name)
    jobs.init()
    set_lease_seconds(jobs, LEASE)
    return jobs, make_jobs(jobs, JOBS)


def _ray_batch(jobs, server, nodes) -> subprocess.Popen:
    return start_batch(jobs, server, "--engine", "ray", "--address", nodes.address, "--concurrency", CONCURRENCY)


def _wait_for_node_b(jobs, ids, server, batch) -> dict[str, dict]:
    """Wait until node-b's runner holds jobs, calls served; its leases."""
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        assert batch.poll() is None, output(batch)[1]
        held = {j: lease for j, lease in leases_of(jobs, ids).items() if lease["host"] == "node-b"}
        if held and len(server.ledger) >= 4:
            return held
        time.sleep(0.02)
    raise AssertionError("no job ran on node-b")


def _check(phase: str, jobs, ids, batch, stdout, stderr, server, reference, watch=None, fault=None) -> None:
    assert batch.returncode == 3, f"{phase}: {stderr}"
    outcomes = {o["job_id"]: o for o in json.loads(stdout)}
    assert sorted(outcomes) == ids, phase
    assert all(o["status"] == "APPROVAL_REQUIRED" and o["error"] is None and not o["skipped"]
               for o in outcomes.values()), f"{phase}: {stdout}\n{stderr}"
    for job_id in ids:
        assert end_state(jobs.path / job_id) == reference, f"{phase}: {job_id}"
        assert not (jobs.path / job_id / LEASE_NAME).exists(), f"{phase}: {job_id}'s lease released"
    assert corrupt_files(jobs) == [], phase
    assert_each_paid_call_recorded_once(jobs, ids, server)
    if watch is not None:
        waits = watch.waits(fault)
        assert set(waits) == set(watch.faulted), f"{phase}: not taken over: {sorted(set(watch.faulted) - set(waits))}"
        assert max(waits.values()) <= LEASE + MARGIN, f"{phase}: {waits}"


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="stops a runner found through /proc")
def test_a_two_node_ray_batch_under_each_fault(tmp_path, named_nodes, reference):
    nodes = named_nodes

    # A runner stopped for two lease lengths: its node's leases lapse; the driver hands
    # its jobs out again to the other node, which waits for the step in hand.
    jobs, ids = _fresh_jobs(tmp_path, "stopped")
    with ReplayLLMServer(WORDCOUNT, latency=0.3) as server:
        batch = _ray_batch(jobs, server, nodes)
        held = _wait_for_node_b(jobs, ids, server, batch)
        runner = next(iter(held.values()))["pid"]
        os.kill(runner, signal.SIGSTOP)
        fault = now()
        try:
            held = {j: lease for j, lease in leases_of(jobs, ids).items() if lease["pid"] == runner}
            watch = TakeoverWatch(jobs, held)
            time.sleep(2 * LEASE)
        finally:
            os.kill(runner, signal.SIGCONT)
        stdout, stderr = finish(batch, 600)
        watch.stop()
    _check("runner stopped", jobs, ids, batch, stdout, stderr, server, reference, watch, fault)
    assert not any(e["repeat"] for e in server.ledger), "a stopped step is resumed, not sent again"

    # Leases dated ten minutes ahead (a clock ahead of this one) on the first jobs: over at once.
    jobs, ids = _fresh_jobs(tmp_path, "ahead")
    ahead = now() + timedelta(minutes=10)
    faulted = ids[:int(CONCURRENCY)]
    for n, job_id in enumerate(faulted):
        (jobs.path / job_id / LEASE_NAME).write_text(json.dumps(
            {"host": "clock-ahead", "pid": 1, "engine": "ray", "task": f"ahead-{n}", "token": f"ahead-{n}",
             "acquired_at": ahead.isoformat(), "renewed_at": ahead.isoformat(),
             "expires_at": (ahead + timedelta(seconds=LEASE)).isoformat()}))
    watch = TakeoverWatch(jobs, {job_id: {"token": f"ahead-{n}"} for n, job_id in enumerate(faulted)})
    fault, up = now(), RunnersUp(jobs)
    with ReplayLLMServer(WORDCOUNT, latency=0.1) as server:
        batch = _ray_batch(jobs, server, nodes)
        stdout, stderr = finish(batch, 600)
    watch.stop()
    _check("lease ahead", jobs, ids, batch, stdout, stderr, server, reference, watch, max(fault, up.stop()))

    # node-b killed mid-batch, calls in flight on it: its leases name another host,
    # over by their expiry; the driver hands its jobs out again.
    jobs, ids = _fresh_jobs(tmp_path, "node-killed")
    with ReplayLLMServer(WORDCOUNT, latency=0.3, repeats=True) as server:
        batch = _ray_batch(jobs, server, nodes)
        _wait_for_node_b(jobs, ids, server, batch)
        nodes.kill("node-b")
        fault = now()
        held = {j: lease for j, lease in leases_of(jobs, ids).items() if lease["host"] == "node-b"}
        watch = TakeoverWatch(jobs, held)
        stdout, stderr = finish(batch, 600)
        watch.stop()
    _check("node killed", jobs, ids, batch, stdout, stderr, server, reference, watch, fault)
    nodes.add("node-c")  # a fresh node in the lost one's place

    # The driver killed mid-batch, then the same job run --all run again.
    jobs, ids = _fresh_jobs(tmp_path, "driver-killed")
    with ReplayLLMServer(WORDCOUNT, latency=0.3, repeats=True) as server:
        first = _ray_batch(jobs, server, nodes)
        try:
            deadline = time.monotonic() + 300
            while not (len(server.ledger) >= JOBS and any(
                    lease["host"] == "node-c" for lease in leases_of(jobs, ids).values())):
                assert time.monotonic() < deadline and first.poll() is None, output(first)[1]
                time.sleep(0.02)
        finally:
            first.kill()
        fault = now()
        first.wait()
        held = leases_of(jobs, ids)
        watch, up = TakeoverWatch(jobs, held), RunnersUp(jobs)
        batch = _ray_batch(jobs, server, nodes)
        stdout, stderr = finish(batch, 600)
        watch.stop()
    _check("driver killed", jobs, ids, batch, stdout, stderr, server, reference, watch, max(fault, up.stop()))
