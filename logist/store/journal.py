"""The step's journal: ``<job>/step_journal.json``, present only while a step
is being applied; a step is recorded by :meth:`logist.store.session.JobSession.record`,
which closes it.

A step changes three things: the workspace, the history and the manifest,
and no filesystem makes that one atomic write. So a step first writes this
small journal (atomically, fsynced) and removes it once the step is
recorded: before its call is sent (phase ``calling``), as soon as the
answer arrives (``answered``) and before it changes the workspace
(``applying``); the process group of a command it runs is noted in it
before the command begins. Each write records where the history's entries
end (``history_offset``): where the step's entry will be appended, so the
append needs no fsynced journal of its own (:func:`logist.store.history.append_entry`).
What recovery makes of a journal left behind is :mod:`logist.store.recovery`'s.
It is written on one line (compact JSON), unlike the job's files a person
reads: only Logist reads it, and an indent would send each of its writes
(a call's request in it) through json's pure-Python encoder.

An answer that arrives on a full disk is saved all the same: before a call
is sent, room for its answered journal is taken on the disk
(``step_journal.json.room``: the calling journal's size, the most bytes an
answer may have, ``max_answer_bytes``, and some to spare, allocated), and a
write of the answered journal that finds no space (``ENOSPC``, ``EDQUOT``)
writes it into that room instead, which then takes the journal's place. The
step then fails on its next write, naming the path; the next command once
there is space again records the answer from the journal, as after a crash,
and never sends the call again. A disk full before the call: the call is
not made.
"""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import ConfigDict, Field, ValidationError

from .model import StoreModel
from . import seek
from .history import entries_end
from .atomic import atomic_write_json, dump_json, fsync_dir, naming
from ..failpoints import failpoint
from .calls import SavedAnswer
from .entries import HistoryEntry, Request
from .manifest import JobManifest, utc_now
from .response_formats import keep, kept_in



#: Bytes of room taken for a call's answer besides the calling journal and the answer's
#: own bytes: its usage, time and note, the escapes JSON writes, a coding agent's record.
ROOM_TO_SPARE = 256 << 10


class StepJournal(StoreModel):
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
    doing: Optional[str] = None
    """What the step applies when it is no answer: a person's decision (the command they approved), a rewind, a run of checks; recovery's note names it."""
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
    history_offset: Optional[int] = None
    """Where the history's entries ended when the journal was written: where the step's entry is appended (unless an entry was recorded in between). With it on disk the append needs no fsynced append journal of its own: recovery cuts a half-written entry back to it."""


class StepJournalFile:
    """``step_journal.json`` of one job (a :class:`~logist.store.session.JobFiles`):
    written while a step is applied, read by recovery and by commands that look."""

    def __init__(self, files: "JobFiles"):
        self.files = files
        #: The response_format file (and its folder, if new too) the call being made wrote: none
        #: but it names it, so a call not made takes it away again (the job is left as it was).
        self._made: list[Path] = []
        #: The ``history_offset`` of the journal on disk (None: none written since it was closed).
        self.history_offset: Optional[int] = None

    @property
    def path(self) -> Path:
        return self.files.journal_path

    def _write(self, journal: StepJournal) -> StepJournal:
        # A call's response_format is named by its file, as the history names it (written before
        # the journal that names it, once per distinct value): a decoding schema is several KB,
        # and a step writes its journal up to three times.
        journal.history_offset = entries_end(self.files)
        self.history_offset = None  # until the journal that says it is on disk
        data = journal.model_dump(mode="json", by_alias=True, exclude_none=True)
        kept = kept_in(self.files, data)
        if kept is not data:
            # The request names its file from now on (its metadata is the step's own): the
            # journal's later writes and the step's entry do not look for it again.
            journal.request.metadata.response_format = kept["request"]["metadata"]["response_format"]
        atomic_write_json(self.path, kept, compact=True)
        self.history_offset = journal.history_offset
        return journal

    def read(self) -> Optional[StepJournal]:
        """The journal as it is (None: none, or one that cannot be read)."""
        try:
            return StepJournal.model_validate(json.loads(self.path.read_text(encoding="utf-8")))
        except (OSError, ValueError, ValidationError, RecursionError):
            return None

    def begin_call(self, sequence: int, head_before: Optional[str], key: str, request: Request,
                   answer_bytes: int = 0) -> StepJournal:
        """Record that the call of step ``sequence`` is about to be sent, and
        take room on the disk for its answer (``answer_bytes``: the most an
        answer may have; see the module's docstring)."""
        self._made = []
        request.metadata.response_format = keep(self.files, request.metadata.response_format, self._made)
        journal = self._write(StepJournal(phase="calling", sequence=sequence, head_before=head_before, key=key,
                                          request=request))
        try:
            self._take_room(self.path.stat().st_size + answer_bytes + ROOM_TO_SPARE)
        except OSError:
            self.call_not_made()  # no room for its answer: the call is not made, and the job stays as it was
            raise
        return journal

    def _take_room(self, size: int) -> None:
        path = self.files.answer_room_path
        with naming(path):
            fd = os.open(path, os.O_CREAT | os.O_TRUNC | os.O_WRONLY, 0o600)
            try:
                os.posix_fallocate(fd, 0, size)  # not fsynced: a power loss takes the call with it
            except OSError as exc:
                path.unlink(missing_ok=True)
                if exc.errno not in (errno.EINVAL, errno.EOPNOTSUPP):
                    raise
                # A filesystem that cannot allocate ahead: no room is kept there.
            finally:
                os.close(fd)

    def drop_room(self) -> None:
        """Give back the room taken for a call's answer (its answer is saved, or none will come)."""
        self.files.answer_room_path.unlink(missing_ok=True)

    def call_answered(self, calling: StepJournal, request: Request, answer: SavedAnswer) -> StepJournal:
        """Record a call's answer as it arrived, before anything is made of it
        (``request``: the request as finally sent, its metadata complete); on
        a full disk, in the room taken for it."""
        answered = calling.model_copy(update={"phase": "answered", "request": request, "answer": answer})
        try:
            return self._write(answered)
        except OSError as exc:
            if exc.errno not in (errno.ENOSPC, errno.EDQUOT) or not self._write_in_room(answered):
                raise
            return answered
        finally:
            self.drop_room()

    def _write_in_room(self, journal: StepJournal) -> bool:
        """Write ``journal`` into the room taken for it, then put it in the
        journal's place (a rename: no new space); False when there is no room
        or it does not fit."""
        room = self.files.answer_room_path
        data = dump_json(journal.model_dump(mode="json", by_alias=True, exclude_none=True), compact=True).encode("utf-8")
        try:
            if room.stat().st_size < len(data):
                return False
            with open(room, "r+b") as handle:
                handle.write(data)
                handle.truncate()
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(room, self.path)
            fsync_dir(self.path.parent)
        except OSError:
            return False
        self.history_offset = journal.history_offset
        return True

    def begin_applying(self, sequence: int, head_before: Optional[str], raw: Optional[str],
                       call: Optional[StepJournal] = None, doing: Optional[str] = None,
                       command: Optional[tuple[int, Optional[str]]] = None) -> None:
        """Record that the step's changes are about to be applied; ``call``: the
        journal of the call whose answer it applies (it keeps the answer);
        ``doing``: what the step is when it applies no answer; ``command``:
        the process group (and its start) of the command about to begin,
        when the command is the first change (a run of checks): one write
        where :meth:`command_started` would make a second."""
        if call is not None:
            self._write(call.model_copy(update={"phase": "applying", "sequence": sequence,
                                                "head_before": head_before}))
        else:
            pgid, started = command if command is not None else (None, None)
            self._write(StepJournal(phase="applying", sequence=sequence, head_before=head_before, raw_response=raw,
                                    doing=doing, command_pgid=pgid, command_started=started))
            if command is not None:
                failpoint("command_started")

    def call_not_made(self) -> None:
        """Close the journal of a call the endpoint could not take (it could not
        be reached, or refused it as configured): nothing was answered or paid,
        so nothing is recorded, and the job stays as it was."""
        self.close()
        for path in self._made:  # after the journal that names the file is gone
            try:
                path.rmdir() if path.is_dir() else path.unlink()
            except OSError:  # gone already, or a folder something else was put in
                pass
        self._made = []

    def close(self) -> None:
        """Remove the journal: its step is recorded (or was never made)."""
        self.history_offset = None
        self.drop_room()
        self.path.unlink(missing_ok=True)

    def unrecorded_step(self) -> Optional[StepJournal]:
        """The step journal when the history does not record its step yet (a
        step stopped at any phase: the next command that changes the job repairs
        or records it), else None. For commands that only look."""
        journal = self.read()
        if journal is None:
            return None
        last = seek.last_entry(self.files)
        return None if last is not None and last.sequence >= journal.sequence else journal

    def pending_call(self) -> Optional[StepJournal]:
        """A call the journal holds that the history does not record yet (the
        next command that changes the job records it), else None. For commands
        that only look."""
        journal = self.unrecorded_step()
        return journal if journal is not None and journal.request is not None else None

    def pending_applying(self, sequence: int) -> Optional[StepJournal]:
        """The journal of step ``sequence`` if it is being applied (phase
        ``applying``: the workspace may have changed since its ``head_before``), else None."""
        journal = self.read()
        return journal if journal is not None and journal.phase == "applying" and journal.sequence == sequence \
            else None

    def command_started(self, pgid: int, started: Optional[str]) -> None:
        """Note in the step's journal the process group of the command it is
        about to run (called before the command begins)."""
        data = json.loads(self.path.read_text(encoding="utf-8"))
        data.update(command_pgid=pgid, command_started=started)
        atomic_write_json(self.path, data, compact=True)
        failpoint("command_started")


def new_entry(
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
