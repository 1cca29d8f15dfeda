"""Engines: how ``job run --all`` runs the queue's jobs, and the one function
each engine runs per job.

Every engine runs :func:`run_one` for each queued job and yields the job's
:class:`~logist.engine.loop.QueueOutcome` as soon as the job is done, so a
batch reports jobs as they finish:

* ``serial``: one job after another, in this process (queue order).
* ``threads`` (the default): up to ``concurrency`` jobs at once on threads
  of this process. A step waits on the model almost all of its time, so
  threads are what one machine needs.
* ``ray``: each job one task on a Ray cluster (:mod:`logist.engine.ray_engine`,
  the ``logist-jobs[ray]`` extra), retried on another worker when its worker dies;
  for batches that outgrow one machine.

Each is registered in the entry-point group ``logist.engines``
(:mod:`logist.engine.choices`) as another package's engine would be, and
:func:`make_engine` finds them there.

:func:`run_one` owns the job for the length of its run through the job's
lease (:mod:`logist.store.lease`): a job another runner holds is skipped
and said to be (``skipped``, not an error; so is a job another runner took
over while this one stalled), a runner that takes over a lapsed lease waits
for the lapsed holder's step in hand (however long that holder is stalled)
instead of failing on the job's lock, and a job that turns out to be
finished (another runner, or an earlier try of the same task, finished it)
returns its status instead of failing.
"""

from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Optional, Protocol

from ..errors import ConfigError, JobBusyError, LogistError, NotSteppableError
from ..store import lease as leases
from ..store.jobsdir import JobsDir
from .choices import DEFAULT_CONCURRENCY, engine_names, registered
from .loop import QueueOutcome
from .session import open_locked
from .apply import StepResult
from .decide import honour_stop
from .step import step_once
from ..store.status import Status
from .workflow import STEPPABLE, TERMINAL


OnStep = Optional[Callable[[StepResult], None]]


def run_one(jobs_path: str, job_id: str, kwargs: dict, *, engine: str, task: str, on_step: OnStep = None,
            stop: Optional[threading.Event] = None, lease_wait: float = 0.0,
            supersedes: Optional[str] = None) -> QueueOutcome:
    """Run one job to its resting state under its lease (see module doc).
    ``kwargs`` go to :func:`~logist.engine.step.step_once`; ``stop``: set to
    end the run after the step in hand (the job can go on later);
    ``lease_wait``: how long to wait for a lease another runner holds (a
    job handed out again after its runner died) before skipping the job;
    ``supersedes``: that dead runner's task, whose lease is taken over at once
    (:func:`logist.store.lease.acquire`, through :meth:`logist.store.session.JobSession.hold_lease`)."""
    job = None
    try:
        job = JobsDir(jobs_path).job(job_id)
        ttl = job.jobs_dir.config().lease_seconds
        with job.session.hold_lease(engine=engine, task=task, ttl=ttl, wait=lease_wait,
                                    supersedes=supersedes) as lease, _lost_if_busy(job, lease):
            job.session.lease = lease  # checked each time the job is opened: a stalled runner stops there
            first_wait = kwargs.get("lock_timeout", 0)
            if lease.took_over:
                # The lapsed holder may be alive, stalled (stopped, a slow clock) in a step that holds
                # the job's lock: wait for that step however long it is stalled, since its answer may
                # be paid and is recorded when it goes on (or the lock is freed when it dies). Giving up
                # after a while left the job to nobody: this runner failed it "busy" and the stalled one,
                # going on, found its lease taken and stopped. Once that step is done the stalled
                # runner opens the job at most once more (to find its lease gone): a lease length.
                first_wait = -1
                kwargs = {**kwargs, "lock_timeout": max(kwargs.get("lock_timeout", 0) or 0, lease.ttl)}
            with open_locked(job, first_wait) as session:
                manifest = session.manifest
                status = manifest.status  # open_locked repaired what it could
            if status not in STEPPABLE:
                return QueueOutcome(job_id, status, note=lease.took_over or None)
            steps = 0
            while True:
                stopped = honour_stop(job, kwargs.get("lock_timeout", 0))
                if stopped is not None:
                    if on_step:
                        on_step(stopped)
                    return QueueOutcome(job_id, stopped.status, steps, note=lease.took_over or None)
                result = step_once(job, **kwargs)
                steps += 1
                if on_step:
                    on_step(result)
                if result.interrupted:
                    return QueueOutcome(job_id, result.status, steps, note=lease.took_over or None, error=(
                        f"the endpoint failed ({result.error}); the turn is kept: running the job again goes on "
                        "with the same conversation"))
                if result.status not in STEPPABLE or (stop is not None and stop.is_set()):
                    stopped = honour_stop(job, kwargs.get("lock_timeout", 0))
                    if stopped is not None and on_step:
                        on_step(stopped)
                    return QueueOutcome(job_id, (stopped or result).status, steps, note=lease.took_over or None)
                if lease.lost.is_set():
                    holder = job.read_lease() or {}
                    return QueueOutcome(job_id, result.status, steps, skipped=(
                        f"stopped after {steps} steps: its lease expired while this runner was stalled and "
                        f"{leases.describe(holder)} took it over"))
    except (leases.LeaseHeld, leases.LeaseLost) as exc:
        # Another runner has the job (it took it over from this one, stalled): not this runner's to run.
        return QueueOutcome(job_id, None, skipped=str(exc))
    except NotSteppableError as exc:
        # Finished between the check and the step (another runner's person, a
        # retried task whose first try had finished it): its status, not a failure.
        return QueueOutcome(job_id, exc.status)
    except (LogistError, OSError) as exc:
        return QueueOutcome(job_id, None, error=str(exc))


@contextmanager
def _lost_if_busy(job, lease: leases.Lease) -> Iterator[None]:
    """A job found busy while this runner's lease is no longer its own: the
    runner that took the job over (while this one stalled) is stepping it, so
    the job is that runner's (:class:`~logist.store.lease.LeaseLost`: skipped), not failed."""
    try:
        yield
    except JobBusyError:
        if lease.held():
            raise
        holder = job.read_lease() or {}
        raise leases.LeaseLost(f"job '{job.id}': its lease was taken over by {leases.describe(holder)} while this "
                               "runner was stalled; this runner stops") from None


class Engine(Protocol):
    """What an engine registered in the ``logist.engines`` entry-point group
    (:mod:`logist.engine.choices`) is: its class's ``create`` makes one."""

    name: str
    concurrency: int

    @classmethod
    def create(cls, concurrency: Optional[int], address: Optional[str]) -> "Engine":
        """An engine running at most ``concurrency`` jobs at once (None: its
        default) on the cluster at ``address`` (None: its default; an engine
        with no cluster refuses one)."""

    def run(self, jobs_path: str, job_ids: list[str], kwargs: dict, on_step: OnStep) -> Iterator[QueueOutcome]:
        """Run the jobs; yield each job's outcome as it finishes."""


@dataclass
class SerialEngine:
    name = "serial"
    concurrency: int = 1

    @classmethod
    def create(cls, concurrency: Optional[int], address: Optional[str]) -> "SerialEngine":
        _no_address(cls.name, address)
        return cls()

    def run(self, jobs_path, job_ids, kwargs, on_step):
        for job_id in job_ids:
            yield run_one(jobs_path, job_id, kwargs, engine=self.name, task=f"serial-{os.getpid()}", on_step=on_step)


@dataclass
class ThreadsEngine:
    name = "threads"
    concurrency: int = DEFAULT_CONCURRENCY

    @classmethod
    def create(cls, concurrency: Optional[int], address: Optional[str]) -> "ThreadsEngine":
        _no_address(cls.name, address)
        return cls(concurrency or DEFAULT_CONCURRENCY)

    def run(self, jobs_path, job_ids, kwargs, on_step):
        stop = threading.Event()
        kwargs = {**kwargs, "watch": None}  # one progress line cannot show many calls

        def one(job_id: str) -> QueueOutcome:
            if stop.is_set():
                return QueueOutcome(job_id, None, error="not started: the batch was stopped")
            task = f"{threading.current_thread().name}-{os.getpid()}"
            return run_one(jobs_path, job_id, kwargs, engine=self.name, task=task, on_step=on_step, stop=stop)

        pool = ThreadPoolExecutor(max_workers=self.concurrency, thread_name_prefix="logist-job")
        try:
            for future in as_completed([pool.submit(one, job_id) for job_id in job_ids]):
                yield future.result()
        finally:
            # Ctrl-C (or a consumer that stops reading): jobs not started stay
            # as they are, running ones stop after the step in hand.
            stop.set()
            pool.shutdown(wait=True, cancel_futures=True)


def _no_address(name: str, address: Optional[str]) -> None:
    if address is not None:
        raise ConfigError(f"--address names a cluster: the {name} engine has none")


def make_engine(name: str, concurrency: Optional[int] = None, address: Optional[str] = None) -> Engine:
    """The engine registered as ``name``; ``address``: its cluster (ray)."""
    entry = registered().get(name)
    if entry is None:
        raise ConfigError(f"unknown engine {name!r}: use one of {', '.join(engine_names())}")
    return entry.load().create(concurrency, address)


@dataclass
class BatchCounts:
    """Where a batch stands, for the line printed as each job finishes."""

    total: int
    concurrency: int
    done: int = 0
    waiting: int = 0
    failed: int = 0
    skipped: int = 0
    #: Jobs found CANCELED (a person canceled them, before the batch reached them or during it): not done.
    canceled: int = 0

    @property
    def finished(self) -> int:
        return self.done + self.waiting + self.failed + self.skipped + self.canceled

    @property
    def running(self) -> int:
        return min(self.concurrency, self.total - self.finished)

    def add(self, outcome: QueueOutcome) -> None:
        if outcome.error:
            self.failed += 1
        elif outcome.skipped:
            self.skipped += 1
        elif outcome.status == Status.CANCELED:
            self.canceled += 1
        elif outcome.status in TERMINAL or outcome.status in STEPPABLE:
            self.done += 1
        else:
            self.waiting += 1

    def text(self) -> str:
        skipped = f", {self.skipped} skipped" if self.skipped else ""
        canceled = f", {self.canceled} canceled" if self.canceled else ""
        return (f"{self.finished}/{self.total}: {self.done} done, {self.waiting} waiting for a person, "
                f"{self.failed} failed{skipped}{canceled}; {self.running} running")

    def summary(self) -> str:
        """The batch's end, counted as :meth:`text` counts (the line under the last job's)."""
        canceled = f", {self.canceled} canceled" if self.canceled else ""
        return (f"{self.done} done, {self.waiting} waiting for a person, {self.failed} failed, "
                f"{self.skipped} skipped{canceled}")


def run_batch(jobs_dir, *, engine: str = "serial", concurrency: Optional[int] = None, address: Optional[str] = None,
              on_step: OnStep = None, on_outcome: Optional[Callable[[QueueOutcome, BatchCounts], None]] = None,
              **kwargs) -> list[QueueOutcome]:
    """``job run --all``: every queued job, each to its resting state, on
    ``engine``; ``on_outcome`` is told of each job as it finishes. Returns
    the outcomes in queue order. Jobs that have finished leave the queue.
    The jobs' calls share ``kwargs``'s ``endpoints`` (:class:`logist.model.client.Endpoints`,
    given by :class:`logist.api.Jobs`, which decides the endpoint settings)."""
    job_ids = list(jobs_dir.read_index().queue)
    chosen = make_engine(engine, concurrency, address)
    counts = BatchCounts(len(job_ids), chosen.concurrency)
    outcomes: dict[str, QueueOutcome] = {}
    for outcome in chosen.run(str(Path(jobs_dir.path).absolute()), job_ids, kwargs, on_step):
        outcomes[outcome.job_id] = outcome
        counts.add(outcome)
        if on_outcome:
            on_outcome(outcome, counts)
    finished = [j for j, o in outcomes.items() if o.status in TERMINAL and not o.error]
    if finished:
        with jobs_dir.index_lock():
            index = jobs_dir.read_index()
            index.queue = [j for j in index.queue if j not in finished]
            jobs_dir.write_index(index)
    return [outcomes[j] for j in job_ids if j in outcomes]
