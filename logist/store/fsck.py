"""Checking every file of a job: ``logist job fsck``.

:func:`fsck` takes the job's lock and does what any command that changes
the job does first, :func:`logist.store.recovery.open_job` (which repairs
what an interrupted command or a damaged file left, and records each repair
in the history), then checks what recovery does not look for:

* the history's entries are numbered 1, 2, 3... in order: an entry pasted in
  twice, one out of order or missing numbers (a hand edit) are reported, with
  what to do about them;
* every entry reads as an entry; the manifest is at the history's last entry;
  no step journal or append journal is left;
* the workspace is a git repository whose HEAD is the job's commit;
* every other name in the job's folder is one Logist puts there
  (:data:`logist.store.session.JOB_FILES`).

Each finding is ``repaired`` (done, nothing to do), a ``problem`` (a person
must act: the finding says how) or a ``note`` (worth knowing, nothing
wrong). Pure store: the engine's part of recovery (finishing a call the
step journal holds) comes in as ``finish``, as for ``open_job``.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from typing import Optional

from ..errors import CorruptFileError, InvalidManifestError, LogistError
from .atomic import leftover_temps
from .manifest import JobManifest
from .recovery import Finish
from .session import HISTORY_NAME, MANIFEST_NAME, RESPONSE_FORMATS_NAME, WORKSPACE_NAME, WRITTEN_UNDER_THE_LOCK, JobFiles, describe

REPAIRED, PROBLEM, NOTE = "repaired", "problem", "note"


@dataclass
class Finding:
    #: :data:`REPAIRED`, :data:`PROBLEM` or :data:`NOTE`.
    kind: str
    #: The file or folder of the job it is about.
    file: str
    #: What was found, and what was done or what a person must do.
    what: str


@dataclass
class FsckReport:
    job_id: str
    findings: list[Finding] = field(default_factory=list)

    @property
    def problems(self) -> list[Finding]:
        return [f for f in self.findings if f.kind == PROBLEM]

    @property
    def clean(self) -> bool:
        """No problem left for a person (repairs and notes may have been made)."""
        return not self.problems

    def add(self, kind: str, file: str, what: str) -> None:
        self.findings.append(Finding(kind, file, what))

    def as_dict(self) -> dict:
        return {"job_id": self.job_id, "clean": self.clean, "findings": [asdict(f) for f in self.findings]}


def fsck(job: JobFiles, finish: Optional[Finish] = None, lock_timeout: float = 0,
         rebuild_manifest: bool = False) -> FsckReport:
    """Check (and repair what can be repaired of) every file of ``job``;
    ``rebuild_manifest``: a manifest with an invalid field too, rebuilt from
    the history (see :func:`logist.store.recovery.open_job`)."""
    report = FsckReport(job.id)
    with job.lock(lock_timeout):
        for tmp in leftover_temps(job.dir, WRITTEN_UNDER_THE_LOCK):
            report.add(REPAIRED, tmp.name, "left by a write that was interrupted; removed")
        try:
            session = job.session
            notes = session.open(finish, rebuild_manifest)
            manifest = session.manifest
            session.close()
        except InvalidManifestError as exc:
            report.add(PROBLEM, MANIFEST_NAME, str(exc))
            return report
        except LogistError as exc:
            report.add(PROBLEM, HISTORY_NAME, f"the job cannot be opened: {exc}")
            return report
        for note in notes:
            report.add(REPAIRED, HISTORY_NAME, f"{note} (recorded in history entry {manifest.last_sequence})")
        if _check_numbers(job, report):
            _check_entries(job, manifest, report)
        _check_workspace(job, manifest, report)
        _check_names(job, report)
    return report


def _check_numbers(job: JobFiles, report: FsckReport) -> bool:
    """Entries numbered 1, 2, 3... in the file's order; True when they are."""
    seen: dict[int, str] = {}  # each number's first entry, as a digest: a long history is not held in memory
    highest, position, good = 0, 0, True
    for data in job.written():
        position += 1
        number = data.get("sequence")
        if not isinstance(number, int) or isinstance(number, bool):
            report.add(PROBLEM, HISTORY_NAME, f"the entry at position {position} has no sequence number: "
                                                   "remove it or give it its number")
            good = False
            continue
        digest = hashlib.sha256(json.dumps(data, sort_keys=True).encode("utf-8")).hexdigest()
        if number in seen:
            same = "the same as the first" if seen[number] == digest else "different from the first"
            report.add(PROBLEM, HISTORY_NAME,
                       f"entry {number} appears again at position {position} ({same}): an entry pasted in by hand; "
                       f"remove the copy that does not belong from {HISTORY_NAME}")
            good = False
        elif number < highest:
            report.add(PROBLEM, HISTORY_NAME,
                       f"entry {number} comes after entry {highest} (at position {position}): put the entries back "
                       f"in the order of their numbers in {HISTORY_NAME}")
            good = False
        seen.setdefault(number, digest)
        highest = max(highest, number)
    missing = sorted(set(range(1, highest + 1)) - set(seen))
    if missing:
        shown = ", ".join(str(n) for n in missing[:10]) + (f" and {len(missing) - 10} more" if len(missing) > 10 else "")
        report.add(PROBLEM, HISTORY_NAME, f"no entry numbered {shown}: put the missing entries back from a copy "
                                               f"of {HISTORY_NAME}")
        good = False
    return good


def _check_entries(job: JobFiles, manifest: JobManifest, report: FsckReport) -> None:
    """Every entry reads; the manifest is at the last one; no journal is left."""
    last = 0
    try:
        for entry in job.entries():
            last = entry.sequence
            if entry.request is not None:
                try:
                    job.sent_response_format(entry.request.metadata.response_format)
                except CorruptFileError as exc:
                    report.add(PROBLEM, RESPONSE_FORMATS_NAME + "/", f"entry {last}: {exc}; restore the file "
                                                                       "from a copy of the job")
    except LogistError as exc:
        report.add(PROBLEM, HISTORY_NAME, f"the entry after entry {last} cannot be read: {exc}; "
                                               f"restore {HISTORY_NAME} from a copy")
        return
    if manifest.last_sequence != last:
        report.add(PROBLEM, MANIFEST_NAME, f"at entry {manifest.last_sequence}, the history at {last}: "
                                            f"delete {MANIFEST_NAME} and the next command rebuilds it")
    for leftover in (job.journal_path, job.history_append_path):
        if leftover.exists():
            report.add(PROBLEM, leftover.name, "left after recovery, which should have closed it: "
                                               "run any command on the job again, and report it if it stays")


def _check_workspace(job: JobFiles, manifest: JobManifest, report: FsckReport) -> None:
    if not (job.workspace / ".git").is_dir():
        report.add(PROBLEM, WORKSPACE_NAME + "/", "is not a git repository: restore it from a copy "
                                          "(or create the job again); Logist cannot step it")
        return
    repo = job.repo
    try:
        head = repo.head()
        dirty = repo.is_dirty()
    except LogistError as exc:
        report.add(PROBLEM, WORKSPACE_NAME + "/", f"git cannot read it: {exc}")
        return
    if manifest.workspace_commit and head != manifest.workspace_commit:
        report.add(NOTE, WORKSPACE_NAME + "/", f"HEAD is {head[:12]}, not the job's commit {manifest.workspace_commit[:12]}: "
                                       "commits made by hand; the next step builds on them")
    if dirty:
        report.add(NOTE, WORKSPACE_NAME + "/", "has changes made by hand; the next step that changes files commits them "
                                       "on their own first")


def _check_names(job: JobFiles, report: FsckReport) -> None:
    for name in sorted(os.listdir(job.dir)):
        item = describe(name)
        if item is None:
            report.add(NOTE, name, "not a file Logist puts in a job's folder; left alone")
        elif "corrupt" in item.name:
            report.add(NOTE, name, "a damaged file Logist moved aside and replaced; look at it, then delete it")
