"""Stepping until something happens: a role's turn, a job's run, the queue.

Each is a loop over :func:`logist.engine.step.step_once`, which takes and
releases the job's lock per call, so a person can act between any two calls;
a suspend or cancel a person asked for while a step held the lock is
applied between two steps (and after the last).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

from ..errors import NotSteppableError
from ..model.client import Endpoints
from ..store.manifest import Status
from ..store.session import JobFiles
from .apply import StepResult
from .decide import honour_stop
from .step import step_once
from .workflow import GOES_ON, STEPPABLE


def _shared(kwargs: dict) -> dict:
    """``kwargs`` with the :class:`~logist.model.client.Endpoints` the loop's calls
    share: the caller's (:class:`logist.api.Jobs` decides them for every
    caller through the API), else, for a loop called bare, one for this loop."""
    return kwargs if kwargs.get("endpoints") is not None else {**kwargs, "endpoints": Endpoints()}


def _stop_asked(job: JobFiles, kwargs: dict, results: list, on_step) -> bool:
    """Whether a person's suspend or cancel, asked for while a step ran, was
    applied now (:func:`logist.engine.decide.honour_stop`): the loop ends there."""
    stopped = honour_stop(job, kwargs.get("lock_timeout", 0))
    if stopped is None:
        return False
    results.append(stopped)
    if on_step:
        on_step(stopped)
    return True


def _step_while(job: JobFiles, go_on: Callable[[StepResult], bool], on_step, kwargs) -> list[StepResult]:
    kwargs = _shared(kwargs)
    results: list[StepResult] = []
    while True:
        if _stop_asked(job, kwargs, results, on_step):
            return results
        result = step_once(job, **kwargs)
        results.append(result)
        if on_step:
            on_step(result)
        if not go_on(result):
            _stop_asked(job, kwargs, results, on_step)
            return results


def step_turn(job: JobFiles, *, on_step: Optional[Callable[[StepResult], None]] = None, **kwargs) -> list[StepResult]:
    """One role turn: calls until an exit command or until a person is needed."""
    return _step_while(job, lambda r: r.status in STEPPABLE and r.turn in GOES_ON, on_step, kwargs)


def run_job(job: JobFiles, *, on_step: Optional[Callable[[StepResult], None]] = None, **kwargs) -> list[StepResult]:
    """Turns until the job needs a person or is done."""
    return _step_while(job, lambda r: r.status in STEPPABLE and not r.interrupted, on_step, kwargs)


@dataclass
class JobRun:
    """Where :func:`run_to_rest` left a job, and the steps it made."""

    job_id: str
    status: Status
    results: list[StepResult]


def run_to_rest(job: JobFiles, *, on_step: Optional[Callable[[StepResult], None]] = None, **kwargs) -> JobRun:
    """Like :func:`run_job`, for a task that may be run again (a batch
    task retried after its worker died): a job that has already finished or
    waits for a person, because an earlier attempt (or another runner) got
    it there, returns its status with no step made, instead of raising."""
    kwargs = _shared(kwargs)
    results: list[StepResult] = []
    while True:
        if _stop_asked(job, kwargs, results, on_step):
            return JobRun(job.id, results[-1].status, results)
        try:
            result = step_once(job, **kwargs)
        except NotSteppableError as exc:
            return JobRun(job.id, exc.status, results)
        results.append(result)
        if on_step:
            on_step(result)
        if result.status not in STEPPABLE or result.interrupted:
            _stop_asked(job, kwargs, results, on_step)
            return JobRun(job.id, results[-1].status, results)


@dataclass
class QueueOutcome:
    job_id: str
    status: Optional[Status]
    steps: int = 0
    #: The job could not be run (busy, damaged, misconfigured): why.
    error: Optional[str] = None
    #: Another runner holds the job's lease: who (not an error).
    skipped: Optional[str] = None
    #: Anything else worth saying (a lease taken over from a dead runner).
    note: Optional[str] = None
