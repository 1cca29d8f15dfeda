"""Logist's front door for Python: a jobs directory and its jobs as objects.

``logist.open(path)`` gives :class:`Jobs`; each job is a :class:`Job` whose
methods are the verbs of ``logist job ...`` (the command line calls these
same objects)::

    jobs = logist.open("jobs", base_url="http://localhost:11434/v1")
    job = jobs.create("hello", objective="Write hello.py", acceptance=["It prints Hello"])
    job.run()            # steps until a person is needed: APPROVAL_REQUIRED
    job.approve()        # SUCCESS

Each verb is a method with typed keywords (a person's actions are methods,
not strings); what a method returns is the engine's own result
(:class:`~logist.engine.apply.StepResult` for a step, the job's new
:class:`~logist.store.manifest.JobManifest` for a decision). This layer
only gathers the engine's functions (:mod:`logist.engine.create`,
:mod:`~logist.engine.step`, :mod:`~logist.engine.loop`,
:mod:`~logist.engine.decide`, :mod:`~logist.engine.rewind`,
:mod:`logist.replay.apply`) under one object per job, and holds what every
call of a process shares: the endpoint (``base_url``), the request timeout,
how long to wait for a job's lock, and what the process learns of its
endpoints (:class:`logist.model.client.Endpoints`, made by :func:`open`, so nothing
of it outlives the :class:`Jobs` that made it).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterator, Literal, Optional, Sequence, Union

from .engine.call import CallWatch, call_settings
from .engine.commands import CommandWatch
from .engine.context import sized_call
from .engine.create import JobSpec, create_job
from .engine.decide import user_action
from .engine.choices import DEFAULT_ENGINE
from .engine.engines import BatchCounts
from .engine.engines import run_batch
from .engine.loop import QueueOutcome, run_job, step_turn
from .engine.rewind import rewind
from .engine.session import upgrade
from .engine.apply import StepResult
from .engine.step import post_answer, step_once
from .errors import ConfigError
from .model.client import Endpoints
from .replay.apply import entry_by_sequence, post_recorded, read_history_file, replay_history
from .store.config import resolve_base_url
from .replay.fixtures import create_from_fixture
from .store.entries import HistoryEntry, JobHistory
from .store import jobsdir
from .store.session import JobFiles
from .store.manifest import JobManifest, Status

OnStep = Optional[Callable[[StepResult], None]]


@dataclass
class Preview:
    """The exact request the job's next step would send (no call is made)."""

    #: The Chat Completions body, key for key as the step sends it.
    body: dict
    #: The endpoint's ``/chat/completions`` would receive it (the base URL, without a trailing slash).
    endpoint: str
    #: A summary call (compaction) is due instead of the role's: the rounds it would summarise.
    compaction_rounds: Optional[int]
    #: The role whose turn it is.
    role: str
    #: Why a step would stop before any call (no endpoint configured), or None.
    unconfigured: Optional[str]
    #: What upgrading the job (written by an earlier Logist) did first, or None.
    upgraded: Optional[str] = None


def open(path: Union[str, Path, None] = None, *, base_url: Optional[str] = None,  # noqa: A001 (logist.open)
         request_timeout: Optional[float] = None, lock_timeout: float = 0) -> "Jobs":
    """The jobs directory at ``path`` (None: found upward from here like git,
    else ``./jobs``; created by the first job). ``base_url``: the
    OpenAI-compatible endpoint (default ``LOGIST_BASE_URL``, then
    ``OPENAI_BASE_URL``, then config.json's); ``request_timeout``: seconds
    to wait for the model (default config.json's); ``lock_timeout``:
    seconds to wait for a job another process holds (-1: for ever)."""
    return Jobs(jobsdir.JobsDir(path), base_url=base_url, request_timeout=request_timeout, lock_timeout=lock_timeout)


class Jobs:
    """A jobs directory: its jobs, and what every call made through it shares."""

    def __init__(self, directory: jobsdir.JobsDir, *, base_url: Optional[str] = None,
                 request_timeout: Optional[float] = None, lock_timeout: float = 0,
                 endpoints: Optional[Endpoints] = None):
        self.directory = directory
        self.base_url = base_url
        self.request_timeout = request_timeout
        self.lock_timeout = lock_timeout
        #: What this process learned of its endpoints (clients, refused forms, windows).
        self.endpoints = endpoints if endpoints is not None else Endpoints()

    @property
    def path(self) -> Path:
        return self.directory.path

    def create(
        self, job_id: str, objective: Optional[str] = None, *, details: Optional[str] = None,
        acceptance: Sequence[str] = (), files: Sequence[str] = (), from_repo: Optional[str] = None,
        ref: Optional[str] = None, model: Optional[str] = None,
        workflow: Optional[Literal["default", "planned"]] = None, skill: Optional[str] = None,
        params: Optional[dict[str, str]] = None, max_steps: Optional[int] = None,
        max_cost_usd: Optional[float] = None, spec: Optional[JobSpec] = None,
    ) -> "Job":
        """Create a job (see :class:`~logist.engine.create.JobSpec` for what
        each field means); ``spec`` gives any field not named here, the
        keywords given win over it. A field left out takes JobSpec's default
        (settings: config.json's)."""
        given = {
            "objective": objective, "details": details, "acceptance": list(acceptance) or None,
            "files": list(files) or None, "from_repo": from_repo, "ref": ref, "model": model,
            "workflow": workflow, "skill": skill, "params": params, "max_steps": max_steps,
            "max_cost_usd": max_cost_usd,
        }
        fields = {name: value for name, value in given.items() if value is not None}
        # A bad value is a ConfigError naming its field (create_job checks the spec).
        return self.of(create_job(self.directory, job_id, spec, **fields))

    def create_from_fixture(self, fixture: Union[str, Path], job_id: Optional[str] = None) -> "Job":
        """Create a recorded job's job (a fixture folder, or a bundled
        fixture's name) under ``job_id``, else its recorded id; its history
        can then be replayed (:meth:`Job.replay`)."""
        return self.of(create_from_fixture(self.directory, fixture, job_id))

    def run_all(self, *, engine: str = DEFAULT_ENGINE, concurrency: Optional[int] = None,
                address: Optional[str] = None, model: Optional[str] = None, on_step: OnStep = None,
                on_outcome: Optional[Callable[[QueueOutcome, BatchCounts], None]] = None,
                watch: Optional[CallWatch] = None) -> list[QueueOutcome]:
        """Every queued job, each to its resting state under its lease
        (``job run --all``), on ``engine`` (serial, threads, ray, or one
        another package registers) with at most ``concurrency`` at once;
        ``on_outcome`` is told of each job as it finishes. The outcomes in
        queue order; jobs that have finished leave the queue."""
        return run_batch(self.directory, engine=engine, concurrency=concurrency, address=address, model=model,
                         on_step=on_step, on_outcome=on_outcome, watch=watch, base_url=self.base_url,
                         request_timeout=self.request_timeout, lock_timeout=self.lock_timeout,
                         endpoints=self.endpoints)

    def job(self, job_id: Optional[str] = None) -> "Job":
        """The job named, else ``LOGIST_JOB_ID``'s, else the current one."""
        return self.of(self.directory.resolve(job_id))

    def __getitem__(self, job_id: str) -> "Job":
        return self.of(self.directory.job(job_id))

    def __iter__(self) -> Iterator["Job"]:
        return (self[job_id] for job_id in self.directory.job_ids())

    def ids(self) -> list[str]:
        return self.directory.job_ids()

    def of(self, stored: JobFiles) -> "Job":
        """The :class:`Job` of a stored job (:class:`logist.store.session.JobFiles`)."""
        return Job(self, stored)

    def __repr__(self) -> str:
        return f"<Jobs {self.path}>"


class Job:
    """One job of a :class:`Jobs`: its state, its history and its verbs.

    Every verb takes the job's lock for what it changes and releases it
    before it returns, so a person (or another process) can act between
    any two of them."""

    def __init__(self, jobs: Jobs, stored: JobFiles):
        self.jobs = jobs
        #: The job's folder as the store knows it (paths, lock, manifest).
        self.stored = stored

    @property
    def id(self) -> str:
        return self.stored.id

    @property
    def dir(self) -> Path:
        return self.stored.dir

    @property
    def workspace(self) -> Path:
        """The job's git workspace: the work."""
        return self.stored.workspace

    # -- reading ------------------------------------------------------------------------------

    def manifest(self) -> JobManifest:
        """The job's state as recorded (read now, not cached)."""
        return self.stored.manifest()

    @property
    def status(self) -> Status:
        return self.manifest().status

    def history(self) -> list[HistoryEntry]:
        """Every recorded entry, first to last."""
        return list(self.stored.entries())

    def preview(self, *, model: Optional[str] = None, base_url: Optional[str] = None) -> Preview:
        """The exact next request, sized as a step sizes it (the endpoint
        may be asked for the model's context window; no call is made). A
        job in an older format is upgraded first."""
        upgraded = upgrade(self.stored)
        manifest = self.manifest()
        base_url = base_url or self.jobs.base_url
        config = self.jobs.directory.config()
        try:
            settings = call_settings(self.stored, manifest, config, base_url, endpoints=self.jobs.endpoints)
        except ConfigError as exc:  # what a step would say before any call
            settings, unconfigured = None, str(exc)
        else:
            unconfigured = None
        prepared = sized_call(self.stored, manifest, model, settings)
        return Preview(
            body=prepared.body, endpoint=resolve_base_url(base_url, prepared.config).rstrip("/"),
            compaction_rounds=prepared.compaction_target if prepared.is_compaction else None,
            role=prepared.role.name, unconfigured=unconfigured, upgraded=upgraded,
        )

    def upgrade(self) -> Optional[str]:
        """Rewrite the job in the current format (the old files kept beside
        it); what was done, or None when it was current."""
        return upgrade(self.stored, self.jobs.lock_timeout)

    # -- stepping -----------------------------------------------------------------------------

    def _calls(self, model: Optional[str], base_url: Optional[str], watch: Optional[CallWatch]) -> dict:
        return dict(base_url=base_url or self.jobs.base_url, model=model, lock_timeout=self.jobs.lock_timeout,
                    request_timeout=self.jobs.request_timeout, watch=watch, endpoints=self.jobs.endpoints)

    def call(self, *, model: Optional[str] = None, base_url: Optional[str] = None,
             watch: Optional[CallWatch] = None) -> StepResult:
        """Exactly one LLM call (``job step --oneshot``): the role's, or a
        summary call when its conversation is due for compaction."""
        return step_once(self.stored, **self._calls(model, base_url, watch))

    def step(self, *, model: Optional[str] = None, base_url: Optional[str] = None, on_step: OnStep = None,
             watch: Optional[CallWatch] = None) -> list[StepResult]:
        """One role turn (``job step``): calls until the role hands over or a person is needed."""
        return step_turn(self.stored, on_step=on_step, **self._calls(model, base_url, watch))

    def run(self, *, model: Optional[str] = None, base_url: Optional[str] = None, on_step: OnStep = None,
            watch: Optional[CallWatch] = None) -> list[StepResult]:
        """Turns until the job needs a person or is done (``job run``)."""
        return run_job(self.stored, on_step=on_step, **self._calls(model, base_url, watch))

    def post(self, answer: str) -> StepResult:
        """Apply ``answer`` as the model's without calling it (``job poststep``)."""
        return post_answer(self.stored, answer, lock_timeout=self.jobs.lock_timeout)

    def post_recorded(self, history_file: Union[str, Path], sequence: int) -> StepResult:
        """Apply entry ``sequence`` of a recorded ``jobHistory.json`` (``job poststep --from-history``)."""
        from_history = read_history_file(Path(history_file))
        return post_recorded(self.stored, entry_by_sequence(from_history, sequence), self.jobs.lock_timeout)

    def replay(self, history: Union[str, Path, JobHistory], *, base_url: Optional[str] = None,
               on_entry: Optional[Callable[[HistoryEntry, object], None]] = None) -> int:
        """Re-apply every recorded answer and decision of a history (a
        ``jobHistory.json``, or one read) in order (``job replay``); the
        number of entries applied. With ``base_url`` (a replay server's),
        each recorded call is made again there instead."""
        if not isinstance(history, JobHistory):
            history = read_history_file(Path(history))
        return replay_history(self.stored, history, base_url=base_url, on_entry=on_entry,
                              lock_timeout=self.jobs.lock_timeout)

    # -- a person's decisions -----------------------------------------------------------------

    def _decide(self, action: str, text: Optional[str] = None, *, skip: bool = False,
                settings: Optional[dict] = None, watch: Optional[CommandWatch] = None) -> JobManifest:
        return user_action(self.stored, action, text, skip=skip, settings=settings, lock_timeout=self.jobs.lock_timeout,
                           watch=watch)

    def approve(self) -> JobManifest:
        """Approve the work: the job becomes SUCCESS."""
        return self._decide("approve")

    def reject(self, feedback: str) -> JobManifest:
        """Reject the work; the Worker redoes it with ``feedback``."""
        return self._decide("reject", feedback)

    def answer(self, text: str) -> JobManifest:
        """Answer the job's question."""
        return self._decide("answer", text)

    def skip_question(self) -> JobManifest:
        """Skip an optional question instead of answering it."""
        return self._decide("answer", skip=True)

    def approve_command(self, *, watch: Optional[CommandWatch] = None) -> JobManifest:
        """Run the held command (or apply the held file changes); the model
        sees the outcome. ``watch`` is told while the command runs."""
        return self._decide("approve-command", watch=watch)

    def skip_command(self) -> JobManifest:
        """Skip the held command (or file changes); the model is told so."""
        return self._decide("skip-command")

    def suspend(self) -> JobManifest:
        """Set the job aside until :meth:`resume`."""
        return self._decide("suspend")

    def resume(self) -> JobManifest:
        """Resume a suspended job where it was."""
        return self._decide("resume")

    def cancel(self) -> JobManifest:
        """Cancel the job for good (it cannot be resumed, rerun or restepped)."""
        return self._decide("cancel")

    def resubmit(self, feedback: Optional[str] = None, *, max_steps: Optional[int] = None,
                 max_cost_usd: Optional[float] = None, max_tokens: Optional[int] = None,
                 max_wall_seconds: Optional[float] = None, max_answer_bytes: Optional[int] = None) -> JobManifest:
        """Send a stopped job back to work with ``feedback`` (and new budgets; None keeps one)."""
        return self._decide("resubmit", feedback or None, settings=dict(
            max_steps=max_steps, max_cost_usd=max_cost_usd, max_tokens=max_tokens,
            max_wall_seconds=max_wall_seconds, max_answer_bytes=max_answer_bytes))

    def set_budgets(self, *, max_steps: Optional[int] = None, max_cost_usd: Optional[float] = None,
                    max_tokens: Optional[int] = None, max_wall_seconds: Optional[float] = None,
                    max_answer_bytes: Optional[int] = None) -> JobManifest:
        """Change the job's budgets (None keeps one); a job a spent budget stopped then goes on."""
        return self._decide("set", settings=dict(
            max_steps=max_steps, max_cost_usd=max_cost_usd, max_tokens=max_tokens,
            max_wall_seconds=max_wall_seconds, max_answer_bytes=max_answer_bytes))

    # -- going back ---------------------------------------------------------------------------

    def restep(self, to: Optional[int] = None) -> JobManifest:
        """Rewind workspace and state to the end of entry ``to`` (default: the step before the last)."""
        return rewind(self.stored, to=to, lock_timeout=self.jobs.lock_timeout)

    def rerun(self) -> JobManifest:
        """Rewind the job to its baseline (right after create)."""
        return rewind(self.stored, baseline=True, lock_timeout=self.jobs.lock_timeout)

    def __repr__(self) -> str:
        return f"<Job {self.id} in {self.jobs.path}>"

