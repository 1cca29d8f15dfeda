"""The read side of :mod:`logist.api`: a jobs directory and its jobs opened
to read, with nothing of the engine's stepping, the model's client or the
replay servers loaded.

:class:`JobsReader` and :class:`JobReader` hold every method of
:class:`~logist.api.Jobs` and :class:`~logist.api.Job` that only reads
(the manifest, the entries, the step journal, the checks' last run, what a
person can do next by the workflow's rules); ``Jobs`` and ``Job`` are their
subclasses, which add the verbs. A command that only reads (``logist job
status``) opens the directory with :func:`open_reader` and so starts with
the store's models loaded and no more: the whole front door would load
the engine, the endpoint client and the replay servers it never calls.
An import-linter contract in pyproject.toml holds this module to that.

A read never writes: no lock, no repair, no upgrade.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Iterator, Optional, Union

from ..engine import workflow as _workflow
from ..engine.command_policy import held_because  # noqa: F401 (this and the next lines' unused names: logist.api's)
from ..engine.workflow import NEEDS_PERSON, STEPPABLE, WAITING_FOR_PERSON  # noqa: F401
from ..errors import LogistError
from ..store import jobsdir
from ..store.calls import recorded_key
from ..store.config import NOT_CONFIGURED, LogistConfig  # noqa: F401
from ..store.entries import CheckRun, HistoryEntry, JobHistory  # noqa: F401
from ..store.history import HISTORY_FORMAT
from ..store.jobsdir import JobsIndex, is_job_id  # noqa: F401
from ..store.journal import StepJournal
from ..store.manifest import JobManifest, Status
from ..store.session import HISTORY_NAME, JobFiles  # noqa: F401
from ..views.summary import CheckStatus, check_status


@dataclass(frozen=True)
class EntryInFull:
    """One history entry as ``job history --entry N`` shows it."""

    entry: HistoryEntry
    #: The entry as recorded (its JSON), with the Idempotency-Key a call was sent with.
    data: dict
    #: The exact Chat Completions body a call sent (rebuilt from the entries it continues), or None.
    request_body: Optional[dict]


def person_can(manifest: JobManifest, event: str) -> bool:
    """Whether a person can take ``event`` (a row of the workflow table) on
    a job in ``manifest``'s state now: a row allows it, and an INPUT_REQUIRED
    job waits for what it is about (a question, a held command)."""
    rule = _workflow.find_rule(manifest.status, event, _workflow.PERSON)
    return rule is not None and rule.waits_for in (None, _workflow.waiting_for(manifest))


def open_reader(path: Union[str, Path, None] = None) -> "JobsReader":
    """The jobs directory at ``path`` opened to read (None: found as
    :func:`logist.api.open` finds it); nothing is created or written."""
    return JobsReader(jobsdir.JobsDir(path))


class JobsReader:
    """A jobs directory, read: its index, its config and its jobs, each a :class:`JobReader`."""

    def __init__(self, directory: jobsdir.JobsDir):
        self.directory = directory

    @property
    def path(self) -> Path:
        return self.directory.path

    @property
    def index_path(self) -> Path:
        """The jobs index's file (``jobs_index.json``)."""
        return self.directory.index_path

    def exists(self) -> bool:
        """Whether the directory has been set up (it has a jobs index)."""
        return self.directory.exists()

    def state_files(self, index: Optional[JobsIndex] = None) -> list[Path]:
        """The files whose change shows in a list of the jobs: the jobs
        index, and each job's history and manifest (whether they exist or not)."""
        index = index if index is not None else self.index()
        files = [self.index_path]
        for rel in index.jobs.values():
            files += JobFiles(self.path / rel).state_files
        return files

    def config(self) -> LogistConfig:
        """The directory's config.json (defaults where it has none)."""
        return self.directory.config()

    def index(self) -> JobsIndex:
        """The jobs index: the jobs, the current one, the queue."""
        return self.directory.read_index()

    def job(self, job_id: Optional[str] = None) -> "JobReader":
        """The job named, else ``LOGIST_JOB_ID``'s, else the current one."""
        return self.of(self.directory.resolve(job_id))

    def get(self, job_id: str, index: Optional[JobsIndex] = None) -> "JobReader":
        """The job ``job_id`` (a :class:`~logist.errors.NotFoundError` when
        the index has none); ``index``: the jobs index as read already."""
        return self.of(self.directory.job(job_id, index))

    def __getitem__(self, job_id: str) -> "JobReader":
        return self.get(job_id)

    def __iter__(self) -> Iterator["JobReader"]:
        return (self[job_id] for job_id in self.directory.job_ids())

    def ids(self) -> list[str]:
        return self.directory.job_ids()

    def of(self, stored: JobFiles) -> "JobReader":
        """The :class:`JobReader` of a stored job (:class:`logist.store.session.JobFiles`); a
        :class:`~logist.api.Jobs` gives its :class:`~logist.api.Job`."""
        return JobReader(self, stored)

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.path}>"


class JobReader:
    """One job of a :class:`JobsReader`, read: its manifest, its history,
    its step journal (a read never writes: no repair, no upgrade, no lock)."""

    def __init__(self, jobs: JobsReader, stored: JobFiles):
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

    @property
    def state_files(self) -> tuple[Path, Path]:
        """The history's and the manifest's files: what changes when the job does."""
        return self.stored.state_files

    @property
    def history_path(self) -> Path:
        """The history's file (``jobHistory.json``), the source of truth."""
        return self.stored.history_path

    @property
    def transcript_path(self) -> Path:
        """The transcript's file (``transcript.md``), brought up to date after every command."""
        return self.stored.transcript_path

    def views_lock(self, timeout: float = 0):
        """Hold the lock of the job's views (a context manager; ``timeout`` 0 fails at once, -1 waits forever)."""
        return self.stored.views_lock(timeout)

    def manifest(self) -> JobManifest:
        """The job's state as recorded (read now, not cached): what the next
        command that changes it would arrive at, computed without writing."""
        return self.stored.manifest()

    @property
    def status(self) -> Status:
        return self.manifest().status

    def history(self) -> list[HistoryEntry]:
        """Every recorded entry, first to last."""
        return list(self.entries())

    def entries(self) -> Iterator[HistoryEntry]:
        """Every recorded entry, first to last, one at a time (a long history need not fit in memory)."""
        return self.stored.entries()

    def entry(self, sequence: int) -> HistoryEntry:
        """History entry ``sequence``, read from its place in the file."""
        return self.stored.entry(sequence)

    def entry_in_full(self, sequence: int) -> EntryInFull:
        """Entry ``sequence`` with, for a call, the exact body it sent and its Idempotency-Key."""
        entry = self.entry(sequence)
        data = entry.dump()
        body = None
        if entry.request is not None:
            body = self.stored.recorded_body(data, self.stored.reader().messages(sequence))
            # The Idempotency-Key header it was sent with (the file leaves out a key it can derive).
            data["request"]["metadata"]["idempotency_key"] = recorded_key(self.id, self.manifest().created_at, data, body)
        return EntryInFull(entry=entry, data=data, request_body=body)

    def unrecorded_step(self) -> Optional[StepJournal]:
        """What the step journal holds that the history does not record yet
        (a command was stopped; the next one that changes the job repairs it), else None."""
        return self.stored.unrecorded_step()

    def unrecorded_call(self) -> Optional[StepJournal]:
        """A call the step journal holds that the history does not record yet, else None."""
        return self.stored.pending_call()

    def format_note(self) -> Optional[str]:
        """A line saying the job is in an older format (read as it is), or None when it is current."""
        found = self.stored.history_format()
        if found >= HISTORY_FORMAT:
            return None
        return (f"job '{self.id}' is in format {found}, read as it is; logist job upgrade {self.id} (or the next "
                f"command that changes it) rewrites it in format {HISTORY_FORMAT}")

    def last_check(self) -> Optional[CheckRun]:
        """The job's last run of its checks, as recorded (None: they never ran)."""
        last = self.manifest().last_check
        return self.stored.entry(last.sequence).checks if last is not None else None

    def check_status(self, manifest: Optional[JobManifest] = None) -> Optional[CheckStatus]:
        """The last run of the job's checks as approval sees it: passed, and
        whether the workspace changed since (None: they never ran);
        ``manifest``: the job's, when the caller has read it already."""
        try:
            head: Optional[str] = self.stored.repo.head()
        except LogistError:  # a workspace git cannot read: the run cannot be current
            head = None
        return check_status(self.stored, manifest or self.manifest(), head)

    def stop_request(self) -> Optional[dict]:
        """A suspend or cancel asked for while a step held the job (:meth:`suspend`
        and :meth:`cancel` do not fail as busy then): ``{"action", "requested_at"}``,
        applied by the step's runner once the step ends; None when none waits."""
        return self.stored.stop_request()

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.id} in {self.jobs.path}>"
