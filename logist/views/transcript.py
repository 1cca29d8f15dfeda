"""``transcript.md``: the job's history as a person reads it in an editor.

``jobHistory.json`` is the source of truth, but it is JSON: every prompt and
answer sits in one line with its newlines escaped. The transcript says the
same things in Markdown, entry by entry in order (each entry's block is
:func:`logist.views.markdown.render_entry`). No code ever reads it back
except to find where it ends.

One file per job, not one per step: a person reads a job from top to bottom,
and a file browser with thousands of step files in a job folder is worse
than one long file an editor opens and searches.

It is derived data, so it is not written on the crash-safety path: a
command records its entries under the job's lock, releases the lock, and
then :func:`update` (through :func:`logist.views.refresh`) brings the file
up to date. It knows where it is from the *marker*, the Markdown comment
that ends the file, ``<!-- logist: transcript up to step N -->``
(invisible when rendered; the only one: an append writes over it). So the
usual update reads the marker and the history's last entry (and the few
entries before it whose command output the new prompt may repeat, see
:mod:`logist.views.prompt_tracker`), writes the new block and a new marker
over the old one, and costs the size of that entry, not of the job. A file
that does not end in a marker (missing, cut by a crash, edited by hand), is
ahead of the history or far behind it is rebuilt from the history, one
entry at a time into a new file: it is derived data, so that is always
safe. :func:`rebuild` does the same on demand (``logist job transcript
JOB --rebuild``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable, Iterable, NamedTuple, Optional

from ..failpoints import armed, failpoint
from ..store.session import JobFiles
from ..secrets.redact import redact
from ..store.atomic import atomic_writer
from ..store.history import HistoryEntry
from .markdown import header, render_entry
from .prompt_tracker import PromptTracker, context_start

#: Entries an update reads back at once; a transcript further behind is rebuilt.
CATCH_UP_LIMIT = 256
_MARKER = "\n<!-- logist: transcript up to step {} -->\n"
_MARKER_AT_END = re.compile(rb"\n<!-- logist: transcript up to step (\d+) -->\n\Z")


class Marker(NamedTuple):
    #: The last entry the file holds.
    seq: int
    #: Where the marker starts: an append writes from here.
    offset: int


def write_transcript(write: Callable[[str], object], entries: Iterable[HistoryEntry], job_id: Optional[str] = None) -> None:
    """Write the whole transcript of ``entries`` piece by piece, holding one
    entry at a time. ``job_id`` defaults to the one the first entry records."""
    tracker = PromptTracker()
    last = 0
    for entry in entries:
        if last == 0:
            definition = entry.definition
            write(header(job_id or (definition.job_id if definition else "?"), definition.objective if definition else None))
        write("\n" + render_entry(entry, tracker))
        last = entry.sequence
    if last == 0:
        write(header(job_id or "?", None))
    write(_MARKER.format(last))


def render(entries: Iterable[HistoryEntry], job_id: str) -> str:
    """The whole transcript of ``entries``."""
    parts: list[str] = []
    write_transcript(parts.append, entries, job_id)
    return "".join(parts)


def read_marker(path: Path) -> Optional[Marker]:
    """The marker ending the file, or None when the file does not end in one."""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            start = max(0, size - 200)
            handle.seek(start)
            tail = handle.read()
    except FileNotFoundError:
        return None
    found = _MARKER_AT_END.search(tail)
    return Marker(int(found.group(1)), start + found.start()) if found else None


def _encode(text: str) -> bytes:
    # errors="replace": a lone surrogate from a model must not make every
    # later update fail and rebuild again. No known secret value is written.
    return redact(text).encode("utf-8", errors="replace")


def rebuild(job: JobFiles) -> Path:
    """Write the transcript afresh from ``jobHistory.json``; returns its path.
    Reads the history one entry at a time. Call with the views' lock held
    (:meth:`logist.store.session.JobFiles.views_lock`)."""
    path = job.transcript_path
    with atomic_writer(path) as handle:
        write_transcript(lambda text: handle.write(_encode(text)), job.entries(), job.id)
    return path


def _append(path: Path, marker: Marker, entries: list[HistoryEntry], tracker: PromptTracker) -> None:
    data = _encode("".join("\n" + render_entry(e, tracker) for e in entries) + _MARKER.format(entries[-1].sequence))
    with open(path, "r+b") as handle:
        handle.seek(marker.offset)
        if armed("mid_transcript"):
            handle.write(data[: len(data) // 2])
            handle.flush()
            failpoint("mid_transcript")
        handle.write(data)
        handle.truncate()


def _entries_since(job: JobFiles, sequence: int, last: Optional[HistoryEntry] = None) -> list[HistoryEntry]:
    """The entries numbered ``sequence`` or more; ``last``, the last entry as
    read already, is not validated again (an entry never changes once written)."""
    found = job.entries_since(sequence)
    return [last if last is not None and n == last.sequence else HistoryEntry.model_validate(found[n])
            for n in sorted(found)]


def update(job: JobFiles, marks: Optional[list] = None) -> str:
    """Bring the transcript up to the history's last entry; says what it did
    ("current", "appended" or "rebuilt"). Call with the views' lock held.
    ``marks``: given, the history's mark (:meth:`JobFiles.file_mark`) read
    with that last entry is added to it.

    Costs the new entries only, unless the file must be rebuilt (see the
    module docstring).
    """
    path = job.transcript_path
    if path.exists() and not path.is_file():
        raise OSError(f"{path} is not a file")  # before paying for a rebuild that cannot be written
    if marks is None:
        last = job.last_entry()
    else:
        last, mark = job.last_entry_marked()
        marks.append(mark)
    last_sequence = last.sequence if last is not None else 0
    marker = read_marker(path)
    if marker is not None and marker.seq == last_sequence:
        return "current"
    if marker is None or last is None or not 0 < last_sequence - marker.seq <= CATCH_UP_LIMIT:
        rebuild(job)
        return "rebuilt"
    first_missing = marker.seq + 1
    if first_missing == last_sequence:
        start = context_start(last)
        entries = [last] if start == last_sequence else _entries_since(job, start, last)
    else:  # several commands' entries, or a recovery and a step
        entries = _entries_since(job, first_missing, last)
        start = min((context_start(e) for e in entries), default=first_missing)
        if start < first_missing:
            entries = _entries_since(job, start, last)
    missing = [e for e in entries if e.sequence >= first_missing]
    if [e.sequence for e in missing] != list(range(first_missing, last_sequence + 1)):
        rebuild(job)
        return "rebuilt"
    tracker = PromptTracker()
    for entry in entries:
        if entry.sequence < first_missing:
            tracker.remember(entry)
    _append(path, marker, missing, tracker)
    return "appended"


def is_current(job: JobFiles, last_sequence: int) -> bool:
    """Whether the transcript ends with entry ``last_sequence``."""
    marker = read_marker(job.transcript_path)
    return marker is not None and marker.seq == last_sequence
