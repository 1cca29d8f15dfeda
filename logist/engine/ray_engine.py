"""The ``ray`` engine: a batch's jobs on the nodes of a Ray cluster.

``logist job run --all --engine ray [--address auto|HOST:PORT|local]``.
Ray is an optional extra (``pip install 'logist-jobs[ray]'``), imported only
when this engine is chosen. The address: ``auto`` (the default) joins the
cluster ``RAY_ADDRESS`` names, else the one ``ray start --head`` runs on
this machine; ``HOST:PORT`` the one whose head is there; ``local`` starts a
cluster for this batch (and stops it after; its start-up time is shown).
A cluster named but gone is said to be in one line (:func:`cluster_address`).

**One runner per node.** Each node of the cluster gets one long-lived
actor, a :class:`Runner` (``num_cpus=0``: it waits on the model, it does not
compute; ``max_concurrency``: the whole ``--concurrency``, of which the
driver hands it its share), given the batch's settings once, when it
starts. The driver hands out jobs as a runner's share frees up; each runs
:func:`logist.engine.engines.run_one`, as the threads engine does. A worker
process imports Logist once per batch and node, not once per job.

**Nodes that cannot see the jobs directory get no jobs.** Every node must
see the jobs directory at the same path: one shared filesystem (see
:mod:`logist.store.lease` for what it must provide). Before any job is
handed out, the driver writes a random nonce into the jobs directory; each
runner must read it there and write one of its own, which the driver must
read back. A node that sees no jobs directory, another one, or a copy (its
nonce never reaches the driver) is named in one line and runs nothing.

**A runner that dies** (its process killed, its node lost) is not retried by
Ray (``max_restarts=0``, ``max_task_retries=0``: the driver decides). The
driver stops using it, hands its jobs out again, at most :data:`MAX_RETRIES`
times each, and gives its share of the concurrency to the least loaded
runner on another node of the batch: every runner is started with threads
for the whole ``--concurrency`` (``max_concurrency``) and the driver hands
it only its share, so the share moves at once, with no process to start
while the jobs wait. Only when no runner on another node is left does a
new runner start for it, on its own node, while Ray says that lives (Ray
lists a lost node as alive until its heartbeats time out). A runner whose lease on a
job in flight lapsed (looked at as it expires: the runner is
stopped, or its node lost before Ray says so) is treated as dead too, so
its jobs wait one lease length at most; should it go on, it finds its
leases taken and stops, and the driver ignores what it returns. The job's next runner
supersedes the dead runner's lease by its task name, which the driver gave
the runner (so it knows it even when the runner died before saying
anything); otherwise it takes the lease over once it is over (its process gone or a
zombie, or its host silent past the lease's expiry: waited out,
:data:`RETRY_LEASE_WAIT` lease lengths at most, rather than skipped). The job's recovery
repairs the step the dead runner left half done. The promise: every paid call is recorded
exactly once; a call in flight when its runner died is sent again at most
once, with the same ``Idempotency-Key``.

The API key is never sent through Ray: each node's processes have it in
their environment (set before ``ray start``; a ``local`` cluster's processes
inherit it from Logist, which holds it apart from its own environment
otherwise: :mod:`logist.secrets.environment`). The batch's other ``LOGIST_*`` and
``GIT_*`` settings go to each runner when it starts.
"""

from __future__ import annotations

import contextlib
import logging
import os
import secrets
import shutil
import socket
import sys
import tempfile
import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Optional

from ..secrets import environment
from ..model.client import Endpoints
from ..errors import ConfigError, install_hint
from ..store import lease as leases
from ..store.config import load_config
from ..store.session import JobFiles
from .choices import DEFAULT_CONCURRENCY
from .engines import run_one
from .loop import QueueOutcome

#: Times a job is handed out again after its runner died.
MAX_RETRIES = 3
#: How long a job handed out again waits for the dead runner's lease to be over, in lease lengths.
RETRY_LEASE_WAIT = 1.5
#: Settings passed to the runners (prefixes), and those never passed.
FORWARDED = ("LOGIST_", "GIT_")
SECRET = ("LOGIST_API_KEY",)
#: The folder of the jobs directory the nonces of a batch are written in.
NONCE_DIR = ".ray-nodes"


def ray_module():
    """``ray``, or one line saying how to install it."""
    try:
        import ray  # lazy: Ray is an optional extra, heavy to import (about 1 s)
    except ImportError:
        raise ConfigError(f"--engine ray needs Ray, which is not installed: {install_hint('ray')}") from None
    return ray


def cluster_address(address: str) -> str:
    """The cluster ``address`` names (``auto``: ``RAY_ADDRESS``, else the
    one the last ``ray start --head`` on this machine wrote down), checked to
    answer: ``ray.init`` waits minutes on a cluster that is gone."""
    source = "--address"
    if address == "auto":
        address, source = os.environ.get("RAY_ADDRESS", ""), "RAY_ADDRESS"
        if not address:
            # Where `ray start --head` writes its address (Ray's own rule: /tmp on Linux and macOS).
            temp = "/tmp" if sys.platform != "win32" else tempfile.gettempdir()
            written = Path(temp) / "ray" / "ray_current_cluster"
            try:
                address, source = written.read_text(encoding="utf-8").strip(), f"{written}, left by 'ray start'"
            except OSError:
                address = ""
        if not address:
            raise ConfigError("no Ray cluster is running here (--address auto): start one with 'ray start --head', "
                              "name one with --address HOST:PORT, or use --address local")
    host, _, port = address.rpartition(":")
    if "://" not in address and port.isdigit():
        try:
            socket.create_connection((host or "127.0.0.1", int(port)), timeout=3).close()
        except OSError as exc:
            raise ConfigError(f"the Ray cluster at {address} ({source}) does not answer "
                              f"({exc.strerror or type(exc).__name__}): is it running? ('ray status' tells)") from None
    return address


@contextlib.contextmanager
def _without(name: str):
    held = os.environ.pop(name, None)
    try:
        yield
    finally:
        if held is not None:
            os.environ[name] = held


def worker_env() -> dict:
    return {k: v for k, v in os.environ.items() if k.startswith(FORWARDED) and k not in SECRET}


class Runner:
    """The actor each node runs for a batch (see the module's doc)."""

    def __init__(self, jobs_path: str, kwargs: dict, settings: dict, name: str):
        os.environ.update(settings)
        # The runner's calls share what they learn of their endpoints (an Endpoints does not cross processes).
        self.jobs_path, self.kwargs = jobs_path, {**kwargs, "endpoints": Endpoints()}
        #: The task name its leases carry, given by the driver: known to it even when this runner dies
        #: before it could say it (a node lost), so a job handed out again supersedes its lease by name.
        self.name = name

    def check_directory(self, batch: str, expected: str) -> tuple[str, str]:
        """(what is wrong, the nonce this runner wrote): "" when it read the
        driver's nonce in the jobs directory and wrote its own there."""
        folder = Path(self.jobs_path) / NONCE_DIR / batch
        try:
            found = (folder / "driver").read_text(encoding="ascii")
        except OSError as exc:
            return (f"it does not see the jobs directory {self.jobs_path} (the nonce this batch wrote there: "
                    f"{exc.strerror or type(exc).__name__}): a copy, another folder or none at that path"), ""
        if found != expected:
            return f"it sees another jobs directory at {self.jobs_path} (the nonce there differs)", ""
        mine = secrets.token_hex(16)
        try:
            (folder / self.name).write_text(mine, encoding="ascii")
        except OSError as exc:
            return f"it cannot write in the jobs directory {self.jobs_path} ({exc.strerror or type(exc).__name__})", ""
        return "", f"{self.name}:{mine}"

    def task(self) -> str:
        """The name this runner's leases carry."""
        return self.name

    def run(self, job_id: str, lease_wait: float, supersedes: Optional[str] = None) -> QueueOutcome:
        return run_one(self.jobs_path, job_id, self.kwargs, engine="ray", task=self.name, lease_wait=lease_wait,
                       supersedes=supersedes)


@dataclass(eq=False)
class _Slot:
    """A runner as the driver sees it."""

    handle: object
    node: str
    capacity: int
    #: The runner's task name, as its leases carry it (the driver gave it).
    name: str = ""
    busy: int = 0
    alive: bool = True


def shares(concurrency: int, nodes: int) -> list[int]:
    """``concurrency`` split over ``nodes`` as evenly as it goes (no zeros)."""
    base, extra = divmod(concurrency, nodes)
    return [n for n in (base + (1 if i < extra else 0) for i in range(nodes)) if n]


@dataclass
class RayEngine:
    name = "ray"
    concurrency: int
    address: Optional[str] = None
    max_retries: int = MAX_RETRIES

    @classmethod
    def create(cls, concurrency: Optional[int], address: Optional[str]) -> "RayEngine":
        return cls(concurrency or DEFAULT_CONCURRENCY, address)

    def _connect(self, ray) -> None:
        address = self.address or "auto"
        options = dict(log_to_driver=False, logging_level=logging.WARNING)
        if address == "local":
            options["include_dashboard"] = False
        else:
            address = cluster_address(address)
        started = time.monotonic()
        try:
            # A local cluster's processes are Logist's children: they inherit the key
            # as they did from the environment the program was started with.
            # RAY_ADDRESS would win over the address given: it is read above, once.
            with environment.lent() if address == "local" else contextlib.nullcontext(), _without("RAY_ADDRESS"):
                ray.init(address=address, **options)
        except (ConnectionError, RuntimeError, ValueError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(f"cannot reach the Ray cluster at {address!r}: {first}") from None
        if address == "local":
            print(f"Started a local Ray cluster in {time.monotonic() - started:.1f} s (--address local); "
                  "'ray start --head' once and the default --address auto saves that on every batch",
                  file=sys.stderr)

    def run(self, jobs_path, job_ids, kwargs, on_step):
        # Ray prints its own news (a worker died, ...) on stdout, which is for data (--json).
        with contextlib.redirect_stdout(sys.stderr):
            yield from self._run(jobs_path, job_ids, kwargs)

    def _start(self, ray, node: str, capacity: int, jobs_path: str, kwargs: dict):
        """A runner on ``node`` handed ``capacity`` jobs at once, with threads
        for the whole concurrency: a share moved to it later needs no new process."""
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy  # lazy: part of Ray

        actor = ray.remote(Runner).options(
            num_cpus=0, max_concurrency=max(capacity, self.concurrency), max_restarts=0, max_task_retries=0,
            scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False))
        name = f"ray-{node[:8]}-{secrets.token_hex(4)}"
        handle = actor.remote(jobs_path, kwargs, worker_env(), name)
        return _Slot(handle, node, capacity, name)

    def _checked_slots(self, ray, jobs_path: str, kwargs: dict) -> list[_Slot]:
        """One runner per alive node, each with its share of the concurrency,
        less the nodes that cannot see the jobs directory (each named on stderr)."""
        nodes = [n for n in ray.nodes() if n.get("Alive")]
        names = {n["NodeID"]: f"{n.get('NodeManagerAddress', '?')} ({n['NodeID'][:12]})" for n in nodes}
        slots = [self._start(ray, n["NodeID"], share, jobs_path, kwargs)
                 for n, share in zip(nodes, shares(self.concurrency, len(nodes)))]
        batch = secrets.token_hex(8)
        folder = Path(jobs_path) / NONCE_DIR / batch
        folder.mkdir(parents=True)
        nonce = secrets.token_hex(16)
        (folder / "driver").write_text(nonce, encoding="ascii")
        try:
            good = []
            for slot, ref in [(s, s.handle.check_directory.remote(batch, nonce)) for s in slots]:
                try:
                    problem, written = ray.get(ref)
                except ray.exceptions.RayError as exc:
                    problem, written = f"its runner did not start ({type(exc).__name__})", ""
                if not problem:
                    name, _, value = written.partition(":")
                    try:
                        problem = "" if (folder / name).read_text(encoding="ascii") == value else "x"
                    except OSError:
                        problem = "x"
                    if problem:
                        problem = (f"it sees a copy of the jobs directory {jobs_path}, not the same folder "
                                   "(what it wrote there never reached this one)")
                if problem:
                    print(f"Ray node {names[slot.node]} runs no jobs: {problem}", file=sys.stderr)
                    ray.kill(slot.handle)
                else:
                    good.append(slot)
            # A refused node's share of the concurrency goes to the nodes that run jobs.
            lost = sum(s.capacity for s in slots) - sum(s.capacity for s in good)
            if good and lost:
                self._least_loaded(good).capacity += lost
            return good
        finally:
            shutil.rmtree(folder, ignore_errors=True)
            with contextlib.suppress(OSError):
                folder.parent.rmdir()

    def _replace(self, ray, dead: _Slot, slots: list[_Slot], jobs_path: str, kwargs: dict) -> Optional[_Slot]:
        """``dead``'s share of the concurrency moved: to the least loaded
        runner on another node of the batch still alive (it has the threads:
        :meth:`_start`), else to a new runner on its own node while Ray says
        it lives. Not its own node first: Ray lists a lost node as alive
        until its heartbeats time out, and a runner placed there dies with
        it. Returns the new runner, if one was started."""
        alive = {n["NodeID"] for n in ray.nodes() if n.get("Alive")}
        others = [s for s in slots if s.alive and s.node in alive and s.node != dead.node]
        if others:
            self._least_loaded(others).capacity += dead.capacity
            return None
        if dead.node in alive:
            return self._start(ray, dead.node, dead.capacity, jobs_path, kwargs)
        return None

    @staticmethod
    def _least_loaded(slots: list[_Slot]) -> _Slot:
        return min(slots, key=lambda s: s.capacity)

    def _run(self, jobs_path, job_ids, kwargs):
        ray = ray_module()
        kwargs = {**kwargs, "watch": None, "endpoints": None}
        self._connect(ray)
        inflight: dict = {}
        #: Runs of jobs handed out again because their runner stalled: their results, when they come, are not the job's.
        abandoned: dict = {}
        try:
            slots = self._checked_slots(ray, jobs_path, kwargs)
            queue, tries = deque(job_ids), {j: 0 for j in job_ids}
            dead_runner: dict[str, Optional[str]] = {}  # a job handed out again -> the task of the runner that died
            replacements = len(slots) * self.max_retries
            lease_seconds = load_config(Path(jobs_path)).lease_seconds
            retry_wait = RETRY_LEASE_WAIT * lease_seconds
            next_check = time.monotonic() + lease_seconds / 3

            def lost(slot: _Slot) -> None:
                """``slot``'s runner died or stalled: no more jobs for it; its share moved (:meth:`_replace`)."""
                nonlocal replacements
                if slot.alive:
                    slot.alive = False
                    if replacements > 0:
                        replacements -= 1
                        new = self._replace(ray, slot, slots, jobs_path, kwargs)
                        if new is not None:
                            slots.append(new)

            def again(job_id: str, slot: _Slot, why: str) -> Optional[QueueOutcome]:
                """Hand ``job_id`` out again (superseding ``slot``'s lease), or its error after too many tries."""
                tries[job_id] += 1
                if tries[job_id] > self.max_retries:
                    return QueueOutcome(job_id, None, error=f"its Ray runner {why} {tries[job_id]} times")
                dead_runner[job_id] = slot.name
                queue.appendleft(job_id)
                return None

            while queue or inflight:
                for slot in slots:
                    while slot.alive and slot.busy < slot.capacity and queue:
                        job_id = queue.popleft()
                        wait = retry_wait if tries[job_id] else 0.0
                        inflight[slot.handle.run.remote(job_id, wait, dead_runner.get(job_id))] = (job_id, slot)
                        slot.busy += 1
                if not inflight:
                    for job_id in queue:
                        yield QueueOutcome(job_id, None, error="not run: no Ray node that sees the jobs directory "
                                                               "is left")
                    return
                ready, _ = ray.wait(list(inflight) + list(abandoned), num_returns=1,
                                    timeout=max(0.0, next_check - time.monotonic()))
                for ref in ready:
                    if ref in abandoned:
                        abandoned.pop(ref)[1].busy -= 1
                        continue
                    job_id, slot = inflight.pop(ref)
                    slot.busy -= 1
                    try:
                        yield ray.get(ref)
                    except ray.exceptions.RayActorError as exc:
                        lost(slot)
                        failed = again(job_id, slot, f"died ({type(exc).__name__})")
                        if failed:
                            yield failed
                    except ray.exceptions.RayError as exc:
                        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
                        yield QueueOutcome(job_id, None, error=f"its Ray task failed: {type(exc).__name__}: {first}")
                if time.monotonic() >= next_check:
                    # A runner whose lease on a job lapsed is stalled (stopped, its node lost before Ray
                    # says so): its jobs are handed out again now, not when it goes on or Ray notices.
                    for ref, (job_id, slot) in list(inflight.items()):
                        if _lapsed(jobs_path, job_id, slot.name):
                            abandoned[ref] = inflight.pop(ref)
                            lost(slot)
                            failed = again(job_id, slot, "stalled past its lease")
                            if failed:
                                yield failed
                    next_check = _next_look(jobs_path, inflight, lease_seconds)
        finally:
            for ref in list(inflight) + list(abandoned):
                with contextlib.suppress(Exception):
                    ray.cancel(ref)
            ray.shutdown()


def _next_look(jobs_path: str, inflight: dict, lease_seconds: float) -> float:
    """When (``time.monotonic()``) to look at the in-flight jobs' leases
    again: just after the first of them held by its runner expires, so a
    stalled runner's job goes out again as its lease lapses, not up to a
    look's period later; a third of a lease length at most (a lease taken
    since is looked at then)."""
    wait = lease_seconds / 3
    for job_id, slot in inflight.values():
        held = JobFiles(Path(jobs_path) / job_id).read_lease()
        if held is not None and held.get("task") == slot.name:
            wait = min(wait, leases.next_look(held))
    return time.monotonic() + wait


def _lapsed(jobs_path: str, job_id: str, task: str) -> bool:
    """Whether the lease runner ``task`` holds on the job is over (not renewed
    past its expiry): the runner is stalled or gone, whatever Ray says of it."""
    held = JobFiles(Path(jobs_path) / job_id).read_lease()
    return held is not None and held.get("task") == task and leases.over(held) is not None
