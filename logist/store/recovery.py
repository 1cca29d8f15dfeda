"""Keeping the manifest, the history and the workspace in agreement.

A step changes three things: the workspace (files, then a git commit), the
history (one appended entry) and the manifest. No filesystem makes that one
atomic write, so a step first writes a small journal,
``<job>/step_journal.json`` (atomically, fsynced), and removes it once the
step is recorded. A step that calls the model writes it before the request
is sent (phase ``calling``: the step number, the call's key and request),
again as soon as the answer arrives (``answered``: the answer, its usage and
time, :class:`~logist.store.calls.SavedAnswer`) and before it changes the
workspace (``applying``: the workspace's HEAD before the step). Recovery then
knows, after a crash at any point:

* journal present, its entry in the history: the step was recorded; only the
  manifest may be behind, and it is restored from the entry's ``state``, as
  for any manifest that is behind the history.
* a call's journal, its entry not in the history: the call was paid for (or
  may have been), so it is recorded as the call it was, never made again.
  With its answer saved, the workspace is reset to that HEAD (``applying``)
  and the saved answer is applied by the engine (``finish``, see
  :func:`open_job`): an ``llm_call`` entry like any other, counted once.
  Without one (the process ended while the call was in flight) it is
  recorded as a call of unknown outcome (``response.status`` ``UNKNOWN``),
  counted in the totals, the job left as before the call; when a process of
  the step answered it (a coding agent, whose process group the journal
  names), that group is stopped and the workspace reset to that HEAD too.
* any other journal, its entry not in the history (a person's action, a
  rewind): the workspace is reset to that HEAD and the job stays as before
  the step; an answer the journal holds is written into the recovery note.

The history's own append is made safe by its append journal
(:mod:`logist.store.history`), or, for a step's append, by the step
journal's ``history_offset``; the manifest is written atomically. Every entry
carries the job's state after it and the first one what the job is, so the
history alone can always restore the manifest. It does so when the manifest
cannot be read as JSON at all (a file a crash or a disk left damaged: no
process of Logist writes one half-way, see :mod:`logist.store.atomic`), and
says so. A manifest that reads but has a field of a wrong type or value (a
hand edit) is never rebuilt on its own, which would drop the person's other
edits: a command that changes the job refuses it, naming the field
(:class:`logist.errors.InvalidManifestError`), until the field is fixed or
the person asks for the rebuild (``logist job fsck --rebuild-manifest``).

:func:`open_job` runs recovery; every command that changes a job calls it
with the job's lock held, and records in the history what it repaired (a
``repair`` entry). It also upgrades a job written in an older format.
:func:`recovered_manifest` is the read-only counterpart: the state recovery
would arrive at, computed in memory without the lock, for commands that
only look (a call waiting in the journal to be recorded is not part of it:
:meth:`logist.store.session.JobFiles.pending_call` says what is waiting).
"""

from __future__ import annotations

import json
import logging
from typing import Callable, Optional

from pydantic import ValidationError

from . import history as hist
from . import seek
from .atomic import leftover_temps, move_aside
from ..errors import CorruptFileError, InvalidManifestError, LogistError
from .entries import HistoryEntry, JobDefinition
from .journal import StepJournal, new_entry
from .manifest import MANIFEST_FORMAT, PLANNER, WORKER, JobManifest, Status, read_manifest, utc_now, write_manifest
from .upgrade import move_context
from .upgrading import upgrade_job
from ..workspace.sandbox import stop_group

log = logging.getLogger("logist")


def _stop_command(journal: StepJournal) -> Optional[str]:
    """Kill what is left of an interrupted step's command, before anything
    is reset (it could write into the workspace afterwards)."""
    if journal.command_pgid is None or not stop_group(journal.command_pgid, journal.command_started):
        return None
    return f"the command of step {journal.sequence} was still running (process group {journal.command_pgid}); it was killed"


def _record_recovery(session: "JobSession", manifest: JobManifest, note: str) -> JobManifest:
    after = manifest.model_copy(deep=True)
    # A history salvaged down to nothing gets what the job is back, so that
    # the history alone can still restore the manifest.
    empty = seek.last_entry(session) is None
    entry = new_entry(
        manifest, after, kind="repair", role=manifest.turn.role, note=note,
        workspace_commit=manifest.workspace_commit, definition=manifest.definition() if empty else None,
    )
    session.record(entry, after)
    return after


def definition_from_history(files: "JobFiles") -> JobManifest:
    """A manifest holding the definition the history's first entry records
    (the latest entry that records one wins), with a default state."""
    found: Optional[dict] = None
    for data in hist.iter_entry_data(files):
        if data.get("definition") is not None:
            found = data["definition"]
    if found is None:
        raise CorruptFileError(f"{files.history_path} records no job definition to rebuild the manifest from")
    return JobManifest.model_validate(JobDefinition.model_validate(found).model_dump(mode="json"))


def manifest_at(files: "JobFiles", entry: HistoryEntry, current: Optional[JobManifest] = None) -> JobManifest:
    """The manifest as it was right after ``entry``: the job's definition
    (``current``'s, else the history's) with the entry's state."""
    base = current if current is not None else definition_from_history(files)
    return base.with_state(entry.state)


def _load_manifest_or_rebuild(files: "JobFiles", notes: list[str], rebuild: bool = False) -> JobManifest:
    """The manifest; one that is not JSON (or not an object) is moved aside
    and rebuilt from the history's last entry, as is one with an invalid
    field when the person asked for it (``rebuild``): otherwise that one is
    refused (:class:`InvalidManifestError`)."""
    try:
        return read_manifest(files)
    except InvalidManifestError as exc:
        if not rebuild:
            raise
        why = f"{files.manifest_path.name} had an invalid field ({', '.join(exc.fields)}); rebuilt on request"
    except CorruptFileError as exc:
        why = f"{files.manifest_path.name} could not be read as a manifest ({exc}); rebuilt"
    last = seek.last_entry(files)
    if last is None:
        raise CorruptFileError(f"{why.removesuffix('; rebuilt')}; there is no history entry to rebuild it from")
    manifest = manifest_at(files, last)
    aside = move_aside(files.manifest_path, utc_now().replace(":", ""))
    write_manifest(files, manifest)
    notes.append(f"{why} from history entry {last.sequence}; the old file is kept as {aside.name}")
    return manifest


def _continue_from(files: "JobFiles", manifest: JobManifest, last: Optional[HistoryEntry],
                   notes: list[str]) -> JobManifest:
    """The job as it was at the end of its last whole entry, when entries
    after it are lost (a salvaged history): the manifest's state refers to
    them (the turn's calls, a person's inputs), and the next entries would
    take their numbers. Its state and its workspace commit are restored, as
    a restep would; the calls of the lost entries stay counted (they were
    paid for) and the workspace as it was is kept under a ref."""
    reached = manifest.last_sequence
    if last is not None:
        restored = manifest_at(files, last, manifest)
        target = last.workspace_commit or restored.workspace_commit or manifest.baseline_commit
        where = f"the end of entry {last.sequence} ({last.state_after})"
    else:  # nothing readable is left: the job as it was created
        slot = PLANNER if manifest.workflow == "planned" else WORKER
        restored = manifest.with_state({"status": str(Status.PENDING), "last_sequence": 0,
                                        "turn": {"slot": slot, "role": manifest.roles[slot]}})
        target = manifest.baseline_commit
        where = "the baseline"
    restored.totals = manifest.totals
    repo = files.repo
    head = repo.head()
    kept = ""
    if target and (head != target or repo.is_dirty()):
        stamp = utc_now().replace(":", "").replace("-", "")
        head = repo.commit_all(f"logist: {manifest.job_id} the workspace before entries were lost") or head
        repo.keep_ref(f"refs/logist/lost/{stamp}", head)
        repo.reset_to(target)
        kept = f"; the workspace was at {head}, kept as refs/logist/lost/{stamp}"
    restored.workspace_commit = target or restored.workspace_commit
    write_manifest(files, restored)
    notes.append(
        f"the history ends at entry {last.sequence if last else 0} but the manifest had reached {reached}: "
        f"later entries are lost from the history, so the job goes on from {where}, its state and its "
        f"workspace{kept}"
    )
    return restored


def _reset_workspace(files: "JobFiles", head: str, notes: list[str]) -> Optional[str]:
    """Reset the workspace to ``head``; ``head``, or None where its ``.git``
    is no longer a folder (removed, or a ``gitdir:`` file or a link in its
    place, which Logist's git refuses): then the workspace is left as it is
    and the note says so, so that what the journal holds (a paid answer) is
    still recorded and the job can still be canceled."""
    if not files.repo.exists():
        notes.append(f"the workspace's .git is missing or not a folder, so the workspace was not reset to {head}")
        return None
    files.repo.reset_to(head)
    return head


def _interrupted_call(journal: StepJournal) -> str:
    return f"step {journal.sequence} was interrupted after its LLM call, before it was recorded"


def _interrupted_step(journal: StepJournal) -> str:
    """What the interrupted step was, as its recovery note says it: a call
    (its request or answer journalled), a posted or replayed answer, or
    what the journal says it was doing (a person's approve-command, a
    rewind, a run of checks)."""
    if journal.request is not None or journal.answer is not None:
        return _interrupted_call(journal)
    if journal.doing:
        return f"step {journal.sequence} ({journal.doing}) was interrupted before it was recorded"
    if journal.raw_response is not None:
        return f"step {journal.sequence} (a posted or replayed answer) was interrupted before it was recorded"
    return f"step {journal.sequence} was interrupted before it was recorded"


def _journalled_offset(files: "JobFiles") -> Optional[int]:
    """The ``history_offset`` of the step journal left behind: where an
    append that wrote no fsynced append journal of its own started (None:
    no journal, or none that says)."""
    try:
        offset = json.loads(files.journal_path.read_text(encoding="utf-8")).get("history_offset")
    except (OSError, ValueError, AttributeError, RecursionError):
        return None  # an unreadable journal is the journal's repair's to report
    return offset if isinstance(offset, int) and not isinstance(offset, bool) else None


def _refuse_a_newer_format(files: "JobFiles", head: Optional[bytes]) -> None:
    """A job a newer Logist wrote can be read (unknown fields are kept), but
    changing it could break what that version expects of its own format
    (``head``: the history's header, :func:`logist.store.history.read_head`)."""
    found = hist.format_in(head) if head is not None else hist.file_format(files)
    if found <= hist.HISTORY_FORMAT:
        try:
            found = int(json.loads(files.manifest_path.read_text(encoding="utf-8")).get("format", 1))
        except (OSError, ValueError, TypeError, AttributeError, RecursionError):
            return  # an unreadable manifest is repaired below
        if found <= MANIFEST_FORMAT:
            return
    raise LogistError(
        f"job '{files.id}' was written by a newer Logist (format {found}); this one writes format "
        f"{hist.HISTORY_FORMAT}: it can show the job but not change it (upgrade Logist)"
    )


def _move_aside_what_is_not_a_file(files: "JobFiles", notes: list[str]) -> None:
    """Move aside a job file that is not a file, as a corrupt one is; a
    history is replaced by an empty one (recovery then goes on as for a
    history salvaged to nothing)."""
    for name in files.JSON_FILES:
        path = files.path_of(name)
        if not path.exists() or path.is_file():
            continue
        aside = move_aside(path, utc_now().replace(":", ""))
        notes.append(f"{name} was not a file; moved it to {aside.name}")
        if path == files.history_path:
            try:
                job_id = read_manifest(files).job_id
            except (CorruptFileError, InvalidManifestError, FileNotFoundError):
                job_id = files.id
            hist.write_canonical(files, job_id, [])


#: Records an interrupted call from its journal (the engine's, see :func:`open_job`); returns the manifest after it.
Finish = Callable[[JobManifest, StepJournal], JobManifest]


def open_job(session: "JobSession", finish: Optional[Finish] = None,
             rebuild_manifest: bool = False) -> tuple[JobManifest, list[str]]:
    """Repair whatever an interrupted command left; return the manifest and
    what was done. Call with the job's lock held.

    A manifest with an invalid field raises :class:`InvalidManifestError`
    unless ``rebuild_manifest`` (the person asked for it): then it is moved
    aside and rebuilt from the history like a damaged one.

    ``finish(manifest, journal)`` records a call the journal holds and the
    history does not (its saved answer applied, or a call of unknown
    outcome) and removes the journal; it is the engine's, as applying an
    answer is. Without it such a call is dropped like any interrupted step,
    its answer kept in the recovery note."""
    files = session
    notes: list[str] = []
    if not files.history_path.exists():
        raise CorruptFileError(f"{files.history_path} is missing; the job cannot be checked or repaired without it")
    for tmp in leftover_temps(files.dir, files.WRITTEN_UNDER_THE_LOCK):
        tmp.unlink(missing_ok=True)  # harmless, and nothing of the job: removed, not recorded
        log.info("job %s: removed %s, left by a write that was interrupted", files.id, tmp.name)
    files.answer_room_path.unlink(missing_ok=True)  # room for an answer a killed call did not get: nothing of the job
    _move_aside_what_is_not_a_file(files, notes)
    repaired = hist.repair(files, _journalled_offset(files))
    if repaired:
        notes.append(repaired)
    head = hist.read_head(files)  # asked three questions below: read once (again only after an upgrade)
    upgraded = upgrade_job(files, head)
    if upgraded:
        log.info("job %s: %s", files.id, upgraded)
        head = hist.read_head(files)
    _refuse_a_newer_format(files, head)
    try:
        # Read (and checked) once: nothing below changes the history before the manifest is compared
        # with it. The session holds it, and the file's mark read with it, while the lock is held.
        last, mark = seek.last_entry_marked(files)
        session.hold(last, mark)
    except CorruptFileError as exc:
        manifest_probe = None
        try:
            manifest_probe = read_manifest(files)
        except (CorruptFileError, InvalidManifestError, FileNotFoundError):
            pass
        job_id = manifest_probe.job_id if manifest_probe else files.id
        aside, kept = hist.salvage(files, job_id)
        notes.append(f"{exc}; moved it to {aside.name} and kept the {kept} entries that could be read")
        last = seek.last_entry(files)

    jpath = files.journal_path
    reset_head: Optional[str] = None
    interrupted: Optional[StepJournal] = None
    if jpath.exists():
        try:
            journal = StepJournal.model_validate(json.loads(jpath.read_text(encoding="utf-8")))
        except (ValueError, ValidationError, RecursionError):
            aside = move_aside(jpath, utc_now().replace(":", ""))
            raise CorruptFileError(
                f"{jpath} could not be parsed (moved to {aside.name}); check the workspace with 'git status' before stepping"
            ) from None
        stopped = _stop_command(journal)
        if stopped:
            notes.append(stopped)
        # A git process killed with the step (its runner's node lost, say) leaves its lock files:
        # with the job's lock held and the step's command stopped, no git process can hold them.
        cleared = files.repo.clear_stale_locks()
        if cleared:
            notes.append(f"removed the git lock files a killed git process left: {', '.join(cleared)}")
        dropped_step = _interrupted_step(journal)
        if last is not None and last.kind == "repair" and any(
                said in (last.note or "") for said in (dropped_step, _interrupted_call(journal))):
            jpath.unlink()  # the repair that dropped it was recorded; only this unlink was left
        elif last is not None and last.sequence >= journal.sequence:
            jpath.unlink()
            notes.append(f"entry {journal.sequence} was recorded but its command was interrupted before it finished")
        elif journal.request is not None and finish is not None:
            # A call: recorded as the call it was (below), never made again.
            if journal.head_before and (journal.phase == "applying" or journal.command_pgid is not None):
                # Applying, or a call a process of the step answered in the workspace (a coding agent's
                # run): what was written is not the step's.
                reset_head = _reset_workspace(files, journal.head_before, notes)
            interrupted = journal
        else:
            if journal.head_before:
                reset_head = _reset_workspace(files, journal.head_before, notes)
            # The journal stays until the repair entry holding the dropped
            # answer is recorded (record() removes it): a kill before then
            # repeats this repair instead of losing the answer.
            dropped = journal.answer.raw if journal.answer is not None else journal.raw_response
            note = (
                f"{dropped_step}; "
                f"the workspace was reset to {journal.head_before} and the job stays as before that step"
            )
            if dropped is not None:
                note += ". The dropped answer was: " + dropped
            notes.append(note)

    manifest = _load_manifest_or_rebuild(files, notes, rebuild_manifest)
    last_seq = last.sequence if last else 0
    if last is not None and last_seq > manifest.last_sequence:
        manifest = manifest_at(files, last, manifest)
        write_manifest(files, manifest)
        notes.append(f"the manifest was behind the history; restored it from entry {last_seq}")
    elif last_seq < manifest.last_sequence:
        manifest = _continue_from(files, manifest, last, notes)
    if reset_head is not None:
        # Usually the manifest's own commit; a commit of hand edits made just
        # before the interrupted step otherwise.
        manifest.workspace_commit = reset_head
    if interrupted is not None:
        manifest = finish(manifest, interrupted)
    moved = move_context(files, manifest.baseline_commit)
    if moved:
        log.info("job %s: %s", files.id, moved)
    if notes:
        manifest = _record_recovery(session, manifest, "; ".join(notes))
        for note in notes:
            log.warning("repaired job %s: %s", manifest.job_id, note)
    return manifest, notes


def recovered_manifest(files: "JobFiles") -> JobManifest:
    """The manifest a command that looks (and does not take the lock) should
    show: what :func:`open_job` would arrive at, computed in memory.

    The history's committed entries win over a manifest that is behind them
    (a command was killed between the two writes); an unreadable manifest is
    rebuilt from the history. A step that was interrupted before it was
    recorded changed nothing the manifest shows, so it needs no work here.
    A manifest with an invalid field is shown as the history's last entry
    left it, with one warning naming the field (the next command that
    changes the job refuses it).
    """
    invalid: Optional[InvalidManifestError] = None
    unreadable: Optional[CorruptFileError] = None
    try:
        manifest: Optional[JobManifest] = read_manifest(files)
    except CorruptFileError as exc:
        manifest, unreadable = None, exc
    except InvalidManifestError as exc:
        manifest, invalid = None, exc
    if manifest is not None:
        # The history's last entry is read whole only when the manifest is behind it:
        # its number says so, and a reader that finds the two agree (nearly always)
        # validates no entry.
        try:
            newest = seek.last_sequence(files)
        except (CorruptFileError, FileNotFoundError):
            return manifest
        if newest is None or newest <= manifest.last_sequence:
            return manifest
    try:
        last = seek.last_entry(files)
    except (CorruptFileError, FileNotFoundError):
        if invalid is not None:
            raise invalid from None  # the manifest's own fault is the one to tell
        if manifest is None:
            raise
        return manifest
    if invalid is not None and last is not None:
        log.warning("%s (shown as history entry %d left the job)", invalid, last.sequence)
    elif invalid is not None:
        raise invalid
    elif unreadable is not None and last is not None:
        log.warning("%s: shown as history entry %d left the job; the next command that changes the job rebuilds "
                    "the manifest from it, keeping the damaged file beside it", unreadable, last.sequence)
    if last is not None and (manifest is None or last.sequence > manifest.last_sequence):
        return manifest_at(files, last, manifest)
    if manifest is None:
        raise CorruptFileError(f"{files.manifest_path} is corrupt and the history has no entry to rebuild it from")
    return manifest
