"""The step's journal: ``<job>/step_journal.json``, present only while a step
is being applied, and the one way a step is recorded (:func:`record`).

A step changes three things: the workspace, the history and the manifest,
and no filesystem makes that one atomic write. So a step first writes this
small journal (atomically, fsynced) and removes it once the step is
recorded: before its call is sent (phase ``calling``), as soon as the
answer arrives (``answered``) and before it changes the workspace
(``applying``); the process group of a command it runs is noted in it
before the command begins. What recovery makes of a journal left behind is
:mod:`logist.store.recovery`'s.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from . import history as hist
from . import seek
from .atomic import atomic_write_json
from ..failpoints import failpoint
from .calls import SavedAnswer
from .entries import HistoryEntry, Request
from .manifest import JobManifest, utc_now, write_manifest

JOURNAL_NAME = "step_journal.json"



class StepJournal(BaseModel):
    """``step_journal.json``: present only while a step is being applied."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    schema_: str = Field(default="step-journal.v2.schema.json", alias="$schema")
    """The JSON Schema of this file."""
    format: int = 2
    """The file's format version."""
    phase: Literal["calling", "answered", "applying"] = "applying"
    """What the step was doing: calling the model (the request may be on its way), holding its answer (nothing applied yet), or applying an answer (or a person's action, or a rewind) to the workspace."""
    sequence: int
    """The history entry the step will record."""
    head_before: Optional[str] = None
    """The workspace's commit before the step: a step that is not recorded is undone to it."""
    raw_response: Optional[str] = None
    """An answer that did not come from a call here (posted, replayed), kept for the recovery note."""
    key: Optional[str] = None
    """A call's key, sent as its ``Idempotency-Key`` header."""
    request: Optional[Request] = None
    """A call's request, as its history entry records it."""
    answer: Optional[SavedAnswer] = None
    """A call's answer (or failure) as it arrived, with its usage and time."""
    command_pgid: Optional[int] = None
    """The process group of the command the step runs, written before the command begins: recovery kills it before it resets the workspace."""
    command_started: Optional[str] = None
    """When that group's first process started (the kernel's count, Linux), so a later group with the same id is left alone."""


def journal_path(job_dir: Path) -> Path:
    return Path(job_dir) / JOURNAL_NAME


def _write(job_dir: Path, journal: StepJournal) -> StepJournal:
    atomic_write_json(journal_path(job_dir), journal.model_dump(mode="json", by_alias=True, exclude_none=True))
    return journal


def begin_call(job_dir: Path, sequence: int, head_before: Optional[str], key: str, request: Request) -> StepJournal:
    """Record that the call of step ``sequence`` is about to be sent."""
    return _write(job_dir, StepJournal(phase="calling", sequence=sequence, head_before=head_before, key=key,
                                       request=request))


def call_answered(job_dir: Path, calling: StepJournal, request: Request, answer: SavedAnswer) -> StepJournal:
    """Record a call's answer as it arrived, before anything is made of it
    (``request``: the request as finally sent, its metadata complete)."""
    return _write(job_dir, calling.model_copy(update={"phase": "answered", "request": request, "answer": answer}))


def begin_applying(job_dir: Path, sequence: int, head_before: Optional[str], raw: Optional[str],
                   call: Optional[StepJournal] = None) -> None:
    """Record that the step's changes are about to be applied; ``call``: the
    journal of the call whose answer it applies (it keeps the answer)."""
    if call is not None:
        _write(job_dir, call.model_copy(update={"phase": "applying", "sequence": sequence, "head_before": head_before}))
    else:
        _write(job_dir, StepJournal(phase="applying", sequence=sequence, head_before=head_before, raw_response=raw))


def call_not_made(job_dir: Path) -> None:
    """Close the journal of a call the endpoint could not take (it could not
    be reached, or refused it as configured): nothing was answered or paid,
    so nothing is recorded, and the job stays as it was."""
    journal_path(job_dir).unlink(missing_ok=True)


def unrecorded_step(job_dir: Path) -> Optional[StepJournal]:
    """The step journal when the history does not record its step yet (a
    step stopped at any phase: the next command that changes the job repairs
    or records it), else None. For commands that only look."""
    try:
        journal = StepJournal.model_validate(json.loads(journal_path(job_dir).read_text(encoding="utf-8")))
    except (OSError, ValueError, ValidationError, RecursionError):
        return None
    last = seek.last_entry(job_dir)
    return None if last is not None and last.sequence >= journal.sequence else journal


def pending_call(job_dir: Path) -> Optional[StepJournal]:
    """A call the journal holds that the history does not record yet (the
    next command that changes the job records it), else None. For commands
    that only look."""
    journal = unrecorded_step(job_dir)
    return journal if journal is not None and journal.request is not None else None


def pending_applying(job_dir: Path, sequence: int) -> Optional[StepJournal]:
    """The journal of step ``sequence`` if it is being applied (phase
    ``applying``: the workspace may have changed since its ``head_before``), else None."""
    try:
        journal = StepJournal.model_validate(json.loads(journal_path(job_dir).read_text(encoding="utf-8")))
    except (OSError, ValueError, ValidationError, RecursionError):
        return None
    return journal if journal.phase == "applying" and journal.sequence == sequence else None


def command_started(job_dir: Path, pgid: int, started: Optional[str]) -> None:
    """Note in the step's journal the process group of the command it is
    about to run (called before the command begins)."""
    path = journal_path(job_dir)
    data = json.loads(path.read_text(encoding="utf-8"))
    data.update(command_pgid=pgid, command_started=started)
    atomic_write_json(path, data)
    failpoint("command_started")


def record(job_dir: Path, entry: HistoryEntry, manifest: JobManifest) -> None:
    """Append ``entry``, write ``manifest`` and close the step's journal.

    ``entry.state`` must already be ``manifest``'s state: once the entry is
    appended, it alone can restore the manifest. The views (the
    transcript) are not written here: they are derived data, brought up to
    date after the job's lock is released (:mod:`logist.engine.session`).
    """
    hist.append_entry(job_dir, entry)
    failpoint("after_history")
    write_manifest(job_dir, manifest)
    failpoint("after_manifest")
    journal_path(job_dir).unlink(missing_ok=True)


def new_entry(
    job_dir: Path,
    workspace: Path,
    manifest_before: JobManifest,
    manifest_after: JobManifest,
    *,
    kind: str,
    **fields: Any,
) -> HistoryEntry:
    """An entry for the next sequence number, carrying ``manifest_after``'s state."""
    sequence = manifest_before.last_sequence + 1
    timestamp = fields.pop("timestamp", None) or utc_now()
    manifest_after.last_sequence = sequence
    manifest_after.updated_at = timestamp
    return HistoryEntry(
        sequence=sequence,
        timestamp=timestamp,
        kind=kind,
        state_before=str(manifest_before.status),
        state_after=str(manifest_after.status),
        state=manifest_after.state_dump(),
        **fields,
    )
