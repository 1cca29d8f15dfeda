"""Stepping until something happens: a role's turn, a job's run, the queue.

Each is a loop over :func:`logist.engine.step.step_once`, which takes and
releases the job's lock per call, so a person can act between any two calls.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from ..errors import LogistError, NotSteppableError
from ..store.manifest import Status
from ..store.jobsdir import Job
from .session import open_locked
from .step import CONTINUES_TURN, StepResult, step_once
from .workflow import STEPPABLE


def _step_while(job: Job, go_on: Callable[[StepResult], bool], on_step, kwargs) -> list[StepResult]:
    results = []
    while True:
        result = step_once(job, **kwargs)
        results.append(result)
        if on_step:
            on_step(result)
        if not go_on(result):
            return results


def step_turn(job: Job, *, on_step: Optional[Callable[[StepResult], None]] = None, **kwargs) -> list[StepResult]:
    """One role turn: calls until an exit command or until a person is needed."""
    return _step_while(job, lambda r: r.status in STEPPABLE and r.action in CONTINUES_TURN, on_step, kwargs)


def run_job(job: Job, *, on_step: Optional[Callable[[StepResult], None]] = None, **kwargs) -> list[StepResult]:
    """Turns until the job needs a person or is done."""
    return _step_while(job, lambda r: r.status in STEPPABLE, on_step, kwargs)


@dataclass
class JobRun:
    """Where :func:`run_to_rest` left a job, and the steps it made."""

    job_id: str
    status: Status
    results: list[StepResult]


def run_to_rest(job: Job, *, on_step: Optional[Callable[[StepResult], None]] = None, **kwargs) -> JobRun:
    """Like :func:`run_job`, for a task that may be run again (a batch
    task retried after its worker died): a job that has already finished or
    waits for a person, because an earlier attempt (or another runner) got
    it there, returns its status with no step made, instead of raising."""
    results: list[StepResult] = []
    while True:
        try:
            result = step_once(job, **kwargs)
        except NotSteppableError as exc:
            return JobRun(job.id, exc.status, results)
        results.append(result)
        if on_step:
            on_step(result)
        if result.status not in STEPPABLE:
            return JobRun(job.id, result.status, results)


@dataclass
class QueueOutcome:
    job_id: str
    status: Optional[Status]
    steps: int = 0
    error: Optional[str] = None


def run_queue(jobs_dir, *, on_step: Optional[Callable[[StepResult], None]] = None, **kwargs) -> list[QueueOutcome]:
    """``job run --all``: every queued job in queue order, each to its resting
    state. A job that fails (busy, damaged, misconfigured) is reported and
    the others still run. Jobs that have finished leave the queue."""
    outcomes: list[QueueOutcome] = []
    finished: list[str] = []
    for job_id in jobs_dir.read_index().queue:
        try:
            job = jobs_dir.job(job_id)
            with open_locked(job, kwargs.get("lock_timeout", 0)) as manifest:
                status = manifest.status  # open_locked repaired what it could
            if status not in STEPPABLE:
                if status in (Status.SUCCESS, Status.CANCELED):
                    finished.append(job_id)
                outcomes.append(QueueOutcome(job_id, status))
                continue
            results = run_job(job, on_step=on_step, **kwargs)
            outcomes.append(QueueOutcome(job_id, results[-1].status, steps=len(results)))
        except (LogistError, OSError) as exc:
            outcomes.append(QueueOutcome(job_id, None, error=str(exc)))
    if finished:
        with jobs_dir.index_lock():
            index = jobs_dir.read_index()
            index.queue = [j for j in index.queue if j not in finished]
            jobs_dir.write_index(index)
    return outcomes
