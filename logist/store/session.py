"""One job's files: :class:`JobFiles` to read them, :class:`JobSession` to change them.

A job is a folder. Every file in it is named here and only here (the
names, :data:`JOB_FILES` and the README each job gets): the rest of Logist
asks a :class:`JobFiles` for a path or, better, for what the file holds.
There are two ways to hold a job, as LangGraph's checkpoint savers own
their store (get, put, list behind one object):

* :class:`JobFiles`, the read-only view a lock-free reader opens (``job
  status``, ``job list``, the views, the web pages): the paths and the reads
  (the manifest as recovery would make it, the entries, one entry by its
  number, the last one, the recorded request bodies, the step journal left
  behind, the lease). A reader takes no lock, so it may see the files
  between two writes of a step; each read is of a whole file as some
  moment left it (see the contract below), never of half a write.
* :class:`JobSession`, the job open under its lock
  (:func:`logist.engine.session.open_locked` opens one). For as long as the
  lock is held it owns the manifest (:attr:`JobSession.manifest`), the
  history's appends (:meth:`JobSession.record`, the one way an entry is
  written, whatever produced it: a call, a person's action, a command, a
  rewind, a repair), the step journal (:attr:`JobSession.journal`), the
  lease it runs under and the workspace (:attr:`JobFiles.repo`). A process
  that steps a job many times keeps one session for it
  (:attr:`JobFiles.session`) and opens it again at each step, so what it
  read of the history (the entries last read, the turn's conversation)
  outlives the lock; each opening checks the file still holds what was read
  (:meth:`JobFiles.file_mark`) and drops it otherwise. What the session
  read of the history under the lock (its mark, its last entry) it holds
  until it releases the lock (:attr:`JobSession.held_mark`): the file
  changes meanwhile only by its own writes.

The storage contract (what a session reads, appends and guarantees):

* **Reads.** ``job_manifest.json`` is the job's state now; ``jobHistory.json``
  is the source of truth, one entry per step, each carrying the state after
  it (the first also what the job is), so the history alone can rebuild the
  manifest. A reader that finds the manifest behind the history shows what
  the history says (:meth:`JobFiles.manifest`).
* **Appends.** Only a session appends, and only with the job's lock held: an
  entry goes on the end of the history in place (the cost of the entry, not
  of the file), through the history's append journal
  (``jobHistory.json.append``, :mod:`logist.store.history`); then the
  manifest is written; then the step journal is removed. Nothing is ever
  rewritten in place but the history's closing bytes. The append itself is
  fsynced. Its append journal is fsynced (with its folder) only when no step
  journal says where the append starts: every step journal records where
  the history's entries end (``history_offset``), and it is on the disk,
  fsynced, from before the step's call until its entry is recorded, so
  after a power loss it says what the append journal would (recovery cuts
  a half-written entry back to it). A step's append journal is written all
  the same, unsynced, for the lock-free readers of that moment; an entry
  recorded without a step (a repair) fsyncs its own.
* **Atomic writes.** Every other file (the manifest, the step journal, the
  lease, the README, a response_format's file) is written whole to a temp
  file, fsynced and renamed (:mod:`logist.store.atomic`): a reader sees the
  old file or the new one. The manifest a step writes after appending its
  entry is renamed into place without the fsyncs: that entry, fsynced,
  carries the same state, and recovery restores a manifest behind the
  history (or one a power loss left unreadable) from it.
* **The step journal.** A step writes ``step_journal.json`` before its call
  is sent, when its answer arrives and before it changes the workspace
  (:mod:`logist.store.journal`; a call's answer that changes nothing in the
  workspace is applied from its ``answered`` journal, which recovery
  treats the same); it is removed once the step is recorded. A call's
  ``response_format`` is named in it by its file, as in the history.
* **A check run** (an entry of kind ``check``: no call, nothing paid for)
  is written as a step is, and needs its three fsyncs all the same. Its
  step journal, fsynced with its folder before the check starts: it says
  where the entry's append starts (``history_offset``), which is why the
  append journal is not fsynced (without it, the append journal would
  need the same two fsyncs); and where a check runs on the workspace
  itself (no throwaway view: :mod:`logist.workspace.sandbox`), after a
  power loss only the journal says the workspace is to be put back
  (without the fsyncs, what the check wrote may reach the disk and the
  journal's rename not, and the next step would commit the check's writes
  as edits made by hand). On a throwaway view only the first reason holds,
  and it is enough: the fsyncs are for a power loss alone (a Logist that
  dies leaves the journal in the page cache, where recovery reads the
  command's group; after a power loss no command runs), and without them
  the append journal would need its own two, after the run, where nothing
  runs beside them; before the run they are made while the sandbox is
  being made. Its entry's append: the journal is removed after
  it, and a removal that reached the disk before the appended bytes would
  leave a cut end that no journal says where to cut. The manifest and the
  append journal are not fsynced, as for a step.
* **Under a crash.** Opening a session repairs what an interrupted command
  left before anything else (:mod:`logist.store.recovery`): a half-written
  entry is cut back (to where the append journal, else the step journal,
  says the append began), a manifest behind the history is brought up to it, a
  step in the journal but not in the history is undone (its workspace
  reset) or, for a call, recorded as the call it was (never made again), a
  damaged file is moved aside and rebuilt from what can be read; what was
  repaired is itself recorded as an entry. Nothing that was recorded is
  lost, and a call is never paid for twice.

The views (``transcript.md``, ``report.html``) are derived from the history
and written after the lock is released, under their own lock: they are
no part of what a session guarantees.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cached_property
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, Iterator, Optional

from . import history as hist
from . import recovery, seek, upgrade, upgrading
from . import lease as leases
from . import manifest as manifests
from . import response_formats
from .atomic import atomic_write, atomic_write_json
from .config import LogistConfig
from ..failpoints import failpoint
from .entries import WORKSPACE_PATH, HistoryEntry, JobHistory
from .journal import StepJournal, StepJournalFile, new_entry
from .locks import hold_lock
from .manifest import JobManifest
from .requests import Entries, HistoryReader, PersonInput, person_inputs, recorded_body
from ..workspace.repository import Workspace

# -- the names of a job's files, each said once --

MANIFEST_NAME = "job_manifest.json"
HISTORY_NAME = "jobHistory.json"
#: The history's append journal (see :mod:`logist.store.history`).
HISTORY_APPEND_NAME = HISTORY_NAME + ".append"
JOURNAL_NAME = "step_journal.json"
#: Room on the disk kept while a call is in flight, for its answer (see :mod:`logist.store.journal`).
ANSWER_ROOM_NAME = JOURNAL_NAME + ".room"
LEASE_NAME = "lease.json"
LEASE_LOCK_NAME = ".lease.lock"
STOP_REQUEST_NAME = "stop_request.json"
#: The folder the recorded ``response_format`` values are kept in (the history names them by it).
RESPONSE_FORMATS_NAME = response_formats.FOLDER
#: The workspace's folder; the history's entries name it so too (``workspace_path``).
WORKSPACE_NAME = WORKSPACE_PATH
TRANSCRIPT_NAME = "transcript.md"
REPORT_NAME = "report.html"
README_NAME = "README.md"
CONTEXT_NAME = "context.md"
LOCK_NAME = ".lock"
#: The folder of the calls a role's coding agent made through the gateway: ``<entry>/call-<n>.json``.
AGENT_RUNS_NAME = "agent_runs"
VIEWS_LOCK_NAME = ".views.lock"


@dataclass(frozen=True)
class JobFile:
    #: A name, ``name/`` for a folder, or a pattern with ``*``.
    name: str
    #: What it is and what it is for, in one line.
    what: str
    #: True: in every job; False: only at times (``what`` says when).
    always: bool = True


#: What a job directory holds: every file Logist may put there. A person
#: opens a job's folder in a file browser before they read any
#: documentation, so the folder explains itself: ``README.md``, written when
#: the job is created, is made from this list; a test runs a real job through
#: a command, a question, a crash and its repair, a report and a transcript,
#: and fails on any file in the folder this list does not name.
#:
#: Two files are always there and look odd: ``.lock`` and ``.views.lock``,
#: empty lock files (:mod:`logist.store.locks`) that stay on purpose.
#: Nothing here is read by the model: the workspace is ``workspace/``, and
#: the README sits beside it, not in it.
JOB_FILES: tuple[JobFile, ...] = (
    JobFile(README_NAME, "this file, written when the job was created"),
    JobFile(MANIFEST_NAME, "the job's state now: status, whose turn it is, budgets spent, the open question"),
    JobFile(HISTORY_NAME, "every step in order, the source of truth: each request, answer, command, commit, cost"),
    JobFile(TRANSCRIPT_NAME, "the history written to be read, brought up to date after every command"),
    JobFile(WORKSPACE_NAME + "/", "the job's files: a git repository with one commit per step that changed it"),
    JobFile(LOCK_NAME, "the job's lock, held while a command changes the job; an empty file that stays "
                       "(deleting a lock file could let two commands in at once), harmless"),
    JobFile(VIEWS_LOCK_NAME, f"the same for {TRANSCRIPT_NAME} and {REPORT_NAME}"),
    JobFile(LEASE_NAME, "only while a runner (`logist job run --all`) runs the job: which host, process and "
                        "engine task own it and until when; another runner skips the job meanwhile", always=False),
    JobFile(LEASE_LOCK_NAME, "the lease's lock, held while a runner takes, renews or ends a lease; an empty file "
                             "that stays, harmless", always=False),
    JobFile(STOP_REQUEST_NAME, "only while a person's suspend or cancel waits for the step in progress to end: "
                               "what was asked and when; the runner applies it before its next step", always=False),
    JobFile(CONTEXT_NAME, "the context every system prompt of this job gives (copied from the workspace's "
                          f"{upgrade.WORKSPACE_CONTEXT} when the job was made; edit it here), only when there is one",
            always=False),
    JobFile(RESPONSE_FORMATS_NAME + "/", "the response_format values the calls sent (decoding schemas), each kept "
                                         "once by its SHA-256 and named by the history's entries that sent it",
            always=False),
    JobFile(AGENT_RUNS_NAME + "/", "the model calls a role's coding agent made through Logist's gateway: one "
                                   "folder per step (its history entry's number), one JSON file per call "
                                   "(request, answer, usage), named by the entry", always=False),
    JobFile(REPORT_NAME, "the job's timeline as one HTML page, written by `logist job report`", always=False),
    JobFile(JOURNAL_NAME, "only while a step is applied: what to undo if it is interrupted", always=False),
    JobFile(ANSWER_ROOM_NAME, "only while a call is in flight: room kept on the disk for its answer, so an "
                              "answer that arrives on a full disk is still saved", always=False),
    JobFile(HISTORY_APPEND_NAME, "only while an entry is appended to the history: where the append started",
            always=False),
    JobFile("*.corrupt-*", "a damaged file Logist moved aside and replaced (kept for you to look at; "
                           "delete it when you like)", always=False),
    JobFile("*.v1", "the job's files as an older Logist wrote them (format 1), kept after the upgrade",
            always=False),
    JobFile(".*.tmp", f"a file being written; one a crash left is removed by the next command on the job "
                      f"({REPORT_NAME}'s can be deleted)", always=False),
)

#: The files of a job directory written only with the job's lock held (the
#: views, transcript.md and report.html, are written under ``.views.lock``):
#: a temp file of one of them found with the lock held is a killed write's.
WRITTEN_UNDER_THE_LOCK = (MANIFEST_NAME, HISTORY_NAME, HISTORY_APPEND_NAME, JOURNAL_NAME, README_NAME, CONTEXT_NAME)
#: The files written under the views' lock.
VIEWS = (TRANSCRIPT_NAME, REPORT_NAME)
#: The job's files Logist reads as JSON, besides the manifest (which reads
#: one that is not a file as corrupt): one that is a folder (or a pipe)
#: instead is moved aside by recovery.
JSON_FILES = (HISTORY_NAME, HISTORY_APPEND_NAME, JOURNAL_NAME)


def describe(name: str) -> Optional[JobFile]:
    """The entry of :data:`JOB_FILES` for a file or folder of a job directory."""
    for item in JOB_FILES:
        pattern = item.name.rstrip("/")
        if fnmatchcase(name, pattern):
            return item
    return None


def readme_text(job_id: str, objective: str) -> str:
    """The job directory's README: what the folder is, how to look at it, each file."""
    first = " ".join(objective.split())
    if len(first) > 200:
        first = first[:199] + "…"
    commands = [
        ("status", "where it stands, in a few lines"),
        ("show", "everything about it: objective, state, totals, the last steps"),
        ("history", "every step as a table"),
        ("transcript", f"the whole job to read ({TRANSCRIPT_NAME})"),
        ("report", f"an HTML timeline with each step's prompt, answer and diff ({REPORT_NAME})"),
    ]
    lines = [
        f"# Logist job `{job_id}`\n",
        "\n",
        f"> {first}\n",
        "\n",
        "This folder is one job of Logist, which runs LLM agents on a task as a sequence of steps and "
        "records each one. Everything here is plain files: read any of them, but change the job only "
        "with `logist` commands, which check and repair these files as they go.\n",
        "\n",
        "To look at the job from this folder:\n",
        "\n",
        *(f"- `logist --jobs-dir .. job {name} {job_id}`: {what}\n" for name, what in commands),
        f"- `git -C {WORKSPACE_NAME} log --stat`: what each step changed\n",
        "\n",
        "## Files\n",
        "\n",
        "| file | what it is |\n",
        "|---|---|\n",
        *(f"| `{f.name}` | {f.what} |\n" for f in JOB_FILES if f.always),
        "\n",
        "Only at times:\n",
        "\n",
        "| file | what it is |\n",
        "|---|---|\n",
        *(f"| `{f.name}` | {f.what} |\n" for f in JOB_FILES if not f.always),
    ]
    return "".join(lines)


class JobFiles:
    """One job's folder as a lock-free reader sees it: its paths and its reads
    (see the module's doc). ``jobs_dir``: the :class:`~logist.store.jobsdir.JobsDir`
    the job is in, when it was found through one."""

    #: For :mod:`logist.store.recovery`, which reads these through the job it repairs.
    WRITTEN_UNDER_THE_LOCK = WRITTEN_UNDER_THE_LOCK
    JSON_FILES = JSON_FILES
    #: What a session knows of the history while it holds the job's lock (:attr:`JobSession.held_mark`);
    #: a lock-free reader knows nothing and reads the file.
    held_mark: Optional[tuple] = None
    held_last: Optional[HistoryEntry] = None

    def __init__(self, path: str | Path, job_id: Optional[str] = None, jobs_dir: Any = None):
        self.dir = Path(path)
        self.id = job_id or self.dir.name
        self.jobs_dir = jobs_dir
        self._session: Optional[JobSession] = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.id!r}, {str(self.dir)!r})"

    # -- paths --
    # The paths a step asks for many times are made once per object (cached_property): a
    # JobFiles' folder never changes.

    def path_of(self, name: str) -> Path:
        """The path of a file the job's folder holds, by its name (one of
        this module's names, a name a recorded entry gives relative to the
        folder, or one :data:`JOB_FILES` matches)."""
        return self.dir / name

    @cached_property
    def manifest_path(self) -> Path:
        return self.dir / MANIFEST_NAME

    @cached_property
    def history_path(self) -> Path:
        return self.dir / HISTORY_NAME

    @cached_property
    def history_append_path(self) -> Path:
        return self.dir / HISTORY_APPEND_NAME

    @cached_property
    def journal_path(self) -> Path:
        return self.dir / JOURNAL_NAME

    @cached_property
    def answer_room_path(self) -> Path:
        return self.dir / ANSWER_ROOM_NAME

    @property
    def lease_path(self) -> Path:
        return self.dir / LEASE_NAME

    @property
    def lease_lock_path(self) -> Path:
        return self.dir / LEASE_LOCK_NAME

    @property
    def stop_request_path(self) -> Path:
        return self.dir / STOP_REQUEST_NAME

    @property
    def response_formats_dir(self) -> Path:
        return self.dir / RESPONSE_FORMATS_NAME

    def agent_call_name(self, sequence: int, number: int) -> str:
        """Where call ``number`` of the agent run of entry ``sequence`` is kept, relative to the job's folder."""
        return f"{AGENT_RUNS_NAME}/{sequence:04d}/call-{number:03d}.json"

    def agent_call_names(self, sequence: int) -> list[str]:
        """The calls kept for the agent run of entry ``sequence``, in order (relative to the job's folder)."""
        folder = self.dir / AGENT_RUNS_NAME / f"{sequence:04d}"
        if not folder.is_dir():
            return []
        return [f"{AGENT_RUNS_NAME}/{sequence:04d}/{p.name}" for p in sorted(folder.glob("call-*.json"))]

    def agent_calls(self, sequence: int) -> list[tuple[str, dict]]:
        """The calls kept for the agent run of entry ``sequence``: (name, the gateway's record), in order;
        a file that cannot be read is left out."""
        found = []
        for name in self.agent_call_names(sequence):
            try:
                data = json.loads((self.dir / name).read_text(encoding="utf-8"))
            except (OSError, ValueError):
                continue
            if isinstance(data, dict):
                found.append((name, data))
        return found

    @cached_property
    def workspace(self) -> Path:
        """The workspace's path (commands run there, records name it)."""
        return self.dir / WORKSPACE_NAME

    @cached_property
    def transcript_path(self) -> Path:
        return self.dir / TRANSCRIPT_NAME

    @property
    def report_path(self) -> Path:
        return self.dir / REPORT_NAME

    @property
    def readme_path(self) -> Path:
        return self.dir / README_NAME

    @property
    def context_path(self) -> Path:
        return self.dir / CONTEXT_NAME

    @property
    def lock_path(self) -> Path:
        return self.dir / LOCK_NAME

    @property
    def views_lock_path(self) -> Path:
        return self.dir / VIEWS_LOCK_NAME

    @property
    def state_files(self) -> tuple[Path, Path]:
        """The history's and the manifest's files: what changes when the job
        does (a page that follows the job watches these)."""
        return self.history_path, self.manifest_path

    def is_job(self) -> bool:
        """Whether the folder holds a job (its manifest is there)."""
        return self.manifest_path.exists()

    # -- locks and the process's session --

    def lock(self, timeout: float = 0):
        """Hold the job's lock (a context manager); ``timeout`` 0 fails at once, -1 waits forever."""
        return hold_lock(self.lock_path, f"job '{self.id}'", timeout)

    def views_lock(self, timeout: float = 0):
        """Hold the lock of the job's views (transcript.md, report.html)."""
        return hold_lock(self.views_lock_path, f"job '{self.id}' (its views)", timeout)

    @property
    def session(self) -> "JobSession":
        """This process's session of the job: one per :class:`JobFiles`, kept
        between the times the job is opened under its lock, so what it read of
        the history serves the next step (see the module's doc)."""
        if self._session is None:
            self._session = JobSession(self)
        return self._session

    @cached_property
    def repo(self) -> Workspace:
        """The workspace's git repository (:class:`logist.workspace.repository.Workspace`):
        one object per JobFiles, so what it found of its ``.git/config``
        (:attr:`~logist.workspace.repository.Workspace.good_configs`) serves every git process of a step and
        the next, where an object made at each use parsed the config again for each."""
        return Workspace(self.workspace)

    # -- reads --

    def manifest(self) -> JobManifest:
        """The job's state for a reader that only looks: the manifest, or what
        recovery would make of it when an interrupted command left the
        history ahead of it (computed in memory, without the lock; see
        :func:`logist.store.recovery.recovered_manifest`)."""
        return recovery.recovered_manifest(self)

    def read_manifest(self) -> JobManifest:
        """``job_manifest.json`` as it is (:func:`logist.store.manifest.read_manifest`)."""
        return manifests.read_manifest(self)

    def history_format(self) -> int:
        """The format version the history's header names (1: none named)."""
        return hist.file_format(self)

    def recorded_workspace(self) -> Optional[str]:
        """The absolute workspace path the header of a history written before
        paths were relative names (None in every file written now)."""
        return hist.recorded_workspace(self)

    def needs_upgrade(self) -> bool:
        """Whether the job's files are in an older format (``job upgrade`` rewrites them)."""
        return self.history_format() < hist.HISTORY_FORMAT or self.recorded_workspace() is not None

    def load_history(self) -> JobHistory:
        """The whole history in memory; for long histories prefer :meth:`entries`."""
        return hist.load_history(self)

    def entries(self, block: int = 1 << 20) -> Iterator[HistoryEntry]:
        """Every entry, oldest first, holding one entry (and one block) in memory."""
        return hist.iter_entries(self, block)

    def entry_data(self, block: int = 1 << 20) -> Iterator[dict]:
        """Like :meth:`entries`, as parsed JSON (:meth:`HistoryEntry.dump`)."""
        return hist.iter_entry_data(self, block)

    def written(self, block: int = 1 << 20) -> Iterator[dict]:
        """Every entry as the file holds it."""
        return hist.iter_written(self, block)

    def entry(self, sequence: int) -> HistoryEntry:
        """Entry number ``sequence``, found without parsing the others (the
        last one, while this process holds the job's lock, as its session
        read it then: :attr:`JobSession.held_mark`; do not change it)."""
        held = self._held_last()
        if held is not None and held.sequence == sequence:
            return held
        return seek.read_entry(self, sequence)

    def _held_last(self) -> Optional[HistoryEntry]:
        return self._session.held_last if self._session is not None else None

    def read_entries(self, sequences: set[int]) -> Entries:
        """The parsed entries numbered ``sequences``, each found by its number."""
        return seek.read_entries(self, sequences)

    def last_entry(self) -> Optional[HistoryEntry]:
        """The last entry, reading only the end of the file (while this
        process holds the job's lock, as :meth:`entry` says)."""
        held = self._held_last()
        return held if held is not None else seek.last_entry(self)

    def last_entry_marked(self) -> tuple[Optional[HistoryEntry], Optional[tuple]]:
        """The last entry and the history's mark (:meth:`file_mark`), from one
        open of the file (:func:`logist.store.seek.last_entry_marked`)."""
        return seek.last_entry_marked(self)

    def entries_since(self, sequence: int) -> Entries:
        """The parsed entries numbered ``sequence`` or more, reading only the end of the file."""
        return seek.entries_since(self, sequence)

    def offset_reader(self) -> Optional[seek.OffsetReader]:
        """An :class:`~logist.store.seek.OffsetReader` of the history (None: read it whole)."""
        return seek.open_offset_reader(self)

    def file_mark(self) -> Optional[tuple]:
        """What the history is now (:func:`logist.store.seek.file_mark`)."""
        return seek.file_mark(self)

    def forget_held(self) -> None:
        """The history is written other than by an append of :meth:`JobSession.record`
        (a rewrite, a repair): what a session held of it is dropped (a lock-free reader holds nothing)."""

    def still_holds(self, mark: Optional[tuple], now: Optional[tuple]) -> bool:
        """Whether the history as marked ``now`` still holds what it held at ``mark``."""
        return seek.still_holds(self, mark, now)

    def reader(self) -> HistoryReader:
        """A reader of the requests and conversations the history records;
        a session's keeps what it read between steps."""
        return HistoryReader(self)

    def reads_kept(self) -> Optional["JobSession"]:
        """Where what was read of the history is kept between reads: nowhere
        for a lock-free reader, which reads the file as it is."""
        return None

    def recorded_body(self, entry: dict, messages: list[dict]) -> dict:
        """The body call entry ``entry`` sent (:func:`logist.store.requests.recorded_body`)."""
        return recorded_body(self, entry, messages)

    def person_inputs(self, sequences: list[int], known: Optional[Entries] = None) -> list[PersonInput]:
        """What the person said in entries ``sequences``."""
        return person_inputs(self, sequences, known)

    def sent_response_format(self, value: Optional[dict]) -> Optional[dict]:
        """The ``response_format`` a call sent, read from its file when the entry names one."""
        return response_formats.sent(self, value)

    def unrecorded_step(self) -> Optional[StepJournal]:
        """The step journal when the history does not record its step yet, else None."""
        return StepJournalFile(self).unrecorded_step()

    def pending_call(self) -> Optional[StepJournal]:
        """A call the step journal holds that the history does not record yet, else None."""
        return StepJournalFile(self).pending_call()

    def read_lease(self) -> Optional[dict]:
        """The lease a runner holds on the job (None: none, or unreadable)."""
        return leases.read_lease(self)

    # -- a person's stop while a step runs ------------------------------------------------------
    #: What may be asked while the job's lock is held by a step.
    STOPS = ("suspend", "cancel")

    def request_stop(self, action: str, requested_at: str) -> None:
        """Ask the step in progress's runner to ``action`` (suspend or cancel)
        the job before its next step. Written without the job's lock (a step
        holds it), atomically; a cancel is never replaced by a suspend."""
        if action not in self.STOPS:
            raise ValueError(f"not a stop: {action}")
        current = self.stop_request()
        if current is not None and current["action"] == "cancel":
            return
        atomic_write_json(self.stop_request_path, {"action": action, "requested_at": requested_at})

    def stop_request(self) -> Optional[dict]:
        """The stop a person asked for while a step ran (None: none, or one
        that cannot be read, which asks for nothing)."""
        try:
            data = json.loads(self.stop_request_path.read_text(encoding="utf-8"))
        except (OSError, ValueError, RecursionError):
            return None
        if not isinstance(data, dict) or data.get("action") not in self.STOPS:
            return None
        return {"action": data["action"], "requested_at": str(data.get("requested_at") or "")}

    def clear_stop_request(self) -> None:
        """Forget the stop asked for (applied, or replaced by a person's decision made under the lock)."""
        try:
            self.stop_request_path.unlink()
        except FileNotFoundError:
            pass

    def context_at_start(self, baseline: Optional[str]) -> Optional[str]:
        """A job without ``context.md``: its workspace's context file as of ``baseline``."""
        return upgrade.context_at_start(self, baseline)

    def context_text(self, jobs_dir: Path, baseline: Optional[str] = None) -> Optional[str]:
        """``<job>/context.md``, else ``<jobs-dir>/context.md``: files outside the
        workspace, so neither a file change nor a command's write to the
        workspace changes a later system prompt. A project's
        ``.logist/context.md`` is copied to ``<job>/context.md`` when the job is
        created; a job made before that reads it from its baseline commit
        (:meth:`context_at_start`) until its files are upgraded."""
        if self.context_path.is_file():
            return self.context_path.read_text(encoding="utf-8", errors="replace").strip()
        at_start = self.context_at_start(baseline)
        if at_start is not None:
            return at_start.strip()
        shared = Path(jobs_dir) / CONTEXT_NAME
        if shared.is_file():
            return shared.read_text(encoding="utf-8", errors="replace").strip()
        return None


class JobSession(JobFiles):
    """The job open under its lock (see the module's doc): one per process and
    job (:attr:`JobFiles.session`), open while :attr:`manifest` is set."""

    def __init__(self, files: JobFiles):
        super().__init__(files.dir, files.id, files.jobs_dir)
        self._session = self
        #: The job's manifest while this process holds its lock (None otherwise).
        self.manifest: Optional[JobManifest] = None  # type: ignore[assignment]
        #: The history's entries last read, by number, as the file holds them (do not change them).
        self.entries_read: Entries = {}
        #: The messages of the last request rebuilt: (its entry's number, the messages).
        self.conversation: Optional[tuple[int, list[dict]]] = None
        #: What the history was when the above were read (:meth:`JobFiles.file_mark`).
        self.mark: Optional[tuple] = None
        #: The lease this process runs the job under (:class:`logist.store.lease.Lease`), if any:
        #: checked each time the job is opened under its lock.
        self.lease: Optional[leases.Lease] = None
        #: The step journal (written only while a step is applied).
        self.journal = StepJournalFile(self)
        self._config: Optional[LogistConfig] = None
        #: The history's mark (:meth:`JobFiles.file_mark`) and its last entry as this session read
        #: them under the job's lock once repaired (:mod:`logist.store.recovery`), the mark moved on
        #: by each entry it appends (None: not known; the file is read). Not a cache that can go
        #: stale: while the lock is held only this session writes the history, so what it read or
        #: wrote under the lock is what the file holds until it releases the lock (:meth:`close`
        #: drops both), and any other write of the history (a rewrite, a repair) drops them
        #: (:meth:`forget_held`). A step asked the file for these about fifteen times: where
        #: its entries end (each step journal's ``history_offset``), its format, its mark.
        self.held_mark: Optional[tuple] = None
        self.held_last: Optional[HistoryEntry] = None

    def reads_kept(self) -> "JobSession":
        return self

    def forget_held(self) -> None:
        self.held_mark = self.held_last = None

    def hold(self, last: Optional[HistoryEntry], mark: Optional[tuple]) -> None:
        """What recovery read of the history under the lock, the job repaired (see :attr:`held_mark`)."""
        self.held_last, self.held_mark = last, mark

    def forget(self) -> None:
        """Drop what was read of the history."""
        self.entries_read, self.conversation, self.mark = {}, None, None

    @property
    def is_open(self) -> bool:
        return self.manifest is not None

    @property
    def config(self) -> LogistConfig:
        """The configuration of the jobs directory the job is in, read once
        each time the job is opened (config.json may change between steps)."""
        if self._config is None:
            self._config = self.jobs_dir.config()
        return self._config

    # -- opening, under the lock --

    def open(self, finish: Optional[recovery.Finish] = None, rebuild_manifest: bool = False) -> list[str]:
        """Repair what an interrupted command left and take the manifest;
        returns what was repaired. Call with the job's lock held
        (:func:`logist.engine.session.open_locked` does)."""
        self._config = None
        self.forget_held()
        self.manifest, notes = recovery.open_job(self, finish, rebuild_manifest)
        return notes

    def close(self) -> None:
        """The lock is released: the manifest, and what was held of the history, are no longer this session's."""
        self.manifest, self._config = None, None
        self.forget_held()

    def upgrade(self) -> Optional[str]:
        """Rewrite files in an older format in the current one (the old kept beside them)."""
        return upgrading.upgrade_job(self)

    # -- writes, under the lock --

    def new_entry(self, manifest_before: JobManifest, manifest_after: JobManifest, *, kind: str,
                  **fields: Any) -> HistoryEntry:
        """An entry for the next sequence number, carrying ``manifest_after``'s state."""
        return new_entry(manifest_before, manifest_after, kind=kind, **fields)

    def record(self, entry: HistoryEntry, manifest: JobManifest) -> None:
        """Record one entry, whatever produced it: append ``entry``, write
        ``manifest`` and close the step's journal, in that order (see the
        module's doc for why). ``entry.state`` must already be
        ``manifest``'s state: once the entry is appended, it alone can
        restore the manifest. The views are not written here."""
        held = self.held_mark
        self.forget_held()  # until the append is done: one that fails leaves the file to be read again
        offset, appended = hist.append_entry(self, entry, self.journal.history_offset, current=held is not None)
        if held is not None and offset == held[2]:
            self.held_mark = seek.mark_after(held, appended)
            if self.mark == held:
                # What this session kept of the history was the file's up to the append, which
                # only added this entry after it: kept, and the entry with it, as a reader
                # would parse it (so the next step reads nothing of the file for it).
                self.mark = self.held_mark
                if not self.entries_read or entry.sequence - 1 in self.entries_read:
                    self.entries_read[entry.sequence] = json.loads(appended.lstrip(b","))
        failpoint("after_history")
        # Not fsynced: the entry just appended (fsynced) restores it after a power loss.
        manifests.write_manifest(self, manifest, durable=False)
        failpoint("after_manifest")
        self.journal.close()
        if self.manifest is not None:
            self.manifest = manifest

    def keep_agent_call(self, sequence: int, number: int, data: dict) -> str:
        """Keep one call a coding agent made (its gateway's record) before its
        answer reaches the agent (written atomically, fsynced); its name."""
        name = self.agent_call_name(sequence, number)
        path = self.dir / name
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_json(path, data)
        return name

    def write_manifest(self, manifest: JobManifest) -> None:
        """Write the manifest alone (a change no entry records: a create, a repair's restore)."""
        manifests.write_manifest(self, manifest)

    def create_history(self, job_id: Optional[str] = None) -> None:
        """Start the job's history: its header (naming ``job_id``, else the job's) and no entry."""
        hist.create_history(self, job_id or self.id)

    def write_readme(self, objective: str) -> None:
        """Write the folder's README (:func:`readme_text`)."""
        atomic_write(self.readme_path, readme_text(self.id, objective))

    def write_context(self, text: bytes | str) -> None:
        """Write ``context.md``, the context every system prompt of this job gives."""
        atomic_write(self.context_path, text)

    def keep_response_format(self, value: Optional[dict]) -> Optional[dict]:
        """Keep a ``response_format`` in its file; the reference an entry records."""
        return response_formats.keep(self, value)

    def hold_lease(self, *, engine: str, task: str, ttl: float = leases.LEASE_SECONDS, wait: float = 0.0,
                   supersedes: Optional[str] = None):
        """Hold the job's lease for a block (:func:`logist.store.lease.holding`)."""
        return leases.holding(self, engine=engine, task=task, ttl=ttl, wait=wait, supersedes=supersedes)
