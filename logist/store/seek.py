"""History entries by number, read from the end of ``jobHistory.json``.

A step needs the last few entries (the turn it continues, the entry before
it), not the whole file: the entry with a given number is found by an mmap
``rfind`` of the bytes every entry starts with (:data:`ENTRY_START`, see
:mod:`logist.store.history`) and parsed from there to the end. Nothing is
kept between calls: a reader without the job's lock reads the file as it
is, and what a process running a job keeps of it between steps is held by
that job's :class:`~logist.store.jobstore.JobStore`. A file in an older
format (or not in the canonical layout) is read whole, upgraded in memory.
"""

from __future__ import annotations

import json
import mmap
import os
from pathlib import Path
from typing import Optional

from pydantic import ValidationError

from ..errors import CorruptFileError
from .entries import HistoryEntry
from .history import ENTRY_START, HISTORY_FORMAT, _canonical_end, _corrupt, file_format, history_path, load_history


def _map(handle) -> Optional[mmap.mmap]:
    try:
        return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except ValueError:  # an empty file
        return None


#: How many bytes before the end of the entries mark where a reader stopped (see :func:`file_mark`).
_MARK = 64


def file_mark(job_dir: Path) -> Optional[tuple]:
    """What the history is now, for a reader that keeps entries between
    reads (:class:`~logist.store.jobstore.JobStore`): the file (device,
    inode), where its entries end and their last bytes. Entries kept from
    an earlier mark are still the file's when the file is the same and
    still holds the earlier mark's bytes where they were (an append only
    adds after them; a rewrite, a repair that cut an entry back or an edit
    in place does not). None: not a canonical current-format file."""
    path = history_path(job_dir)
    if file_format(job_dir) < HISTORY_FORMAT:
        return None
    with open(path, "rb") as handle:
        end = _canonical_end(path, handle)
        if end is None:
            return None
        info = os.fstat(handle.fileno())
        handle.seek(max(0, end - _MARK))
        return info.st_dev, info.st_ino, end, handle.read(end - max(0, end - _MARK))


def still_holds(job_dir: Path, mark: Optional[tuple], now: Optional[tuple]) -> bool:
    """Whether the file as marked ``now`` still holds what it held at ``mark``."""
    if mark is None or now is None or mark[:2] != now[:2] or now[2] < mark[2]:
        return False
    if now[2] == mark[2]:
        return now[3] == mark[3]
    with open(history_path(job_dir), "rb") as handle:
        handle.seek(mark[2] - len(mark[3]))
        return handle.read(len(mark[3])) == mark[3]


def entries_since(job_dir: Path, sequence: int) -> dict[int, dict]:
    """The parsed entries numbered ``sequence`` or more, by number, reading
    only the end of the file from that entry on."""
    path = history_path(job_dir)
    if file_format(job_dir) < HISTORY_FORMAT:
        return {e.sequence: e.dump() for e in load_history(job_dir).interactions if e.sequence >= sequence}
    with open(path, "rb") as handle:
        end = _canonical_end(path, handle)
        view = _map(handle) if end is not None else None
        if view is None:
            return {e.sequence: e.dump() for e in load_history(job_dir).interactions if e.sequence >= sequence}
        with view:
            start = view.rfind(ENTRY_START + str(sequence).encode() + b",", 0, end)
            if start < 0:
                start = view.find(ENTRY_START, 0, end)  # renumbered by hand: read it all
            if start < 0:
                return {}
            fresh = view[start:end]
    try:
        items = json.loads(b"[" + fresh + b"]") if fresh.strip() else []
    except (ValueError, RecursionError) as exc:
        raise _corrupt(path, exc) from None
    return {item["sequence"]: item for item in items if item["sequence"] >= sequence}


def read_entry(job_dir: Path, sequence: int) -> HistoryEntry:
    """Entry number ``sequence``, found without parsing the others."""
    found = read_entries(job_dir, {sequence}).get(sequence)
    if found is None:
        raise CorruptFileError(f"{history_path(job_dir)} has no entry {sequence}")
    return HistoryEntry.model_validate(found)


def last_entry(job_dir: Path) -> Optional[HistoryEntry]:
    """The last entry, reading only the end of the file."""
    path = history_path(job_dir)
    if file_format(job_dir) < HISTORY_FORMAT:
        entries = load_history(job_dir).interactions
        return entries[-1] if entries else None
    with open(path, "rb") as handle:
        end = _canonical_end(path, handle)
        view = _map(handle) if end is not None else None
        if view is None:
            entries = load_history(job_dir).interactions
            return entries[-1] if entries else None
        with view:
            start = view.rfind(ENTRY_START, 0, end)
            if start < 0:
                return None
            text = view[start:end]
    try:
        return HistoryEntry.model_validate(json.loads(text))
    except (ValueError, ValidationError, RecursionError):
        raise CorruptFileError(f"{path} is corrupt: its last entry cannot be parsed") from None


def read_entries(job_dir: Path, sequences: set[int]) -> dict[int, dict]:
    """The parsed entries numbered ``sequences`` (not empty), each found by
    its number and parsed alone: an early entry of a long history costs its
    own bytes, not those of every entry after it (which
    :func:`entries_since` parses)."""
    path, found = history_path(job_dir), {}
    if file_format(job_dir) < HISTORY_FORMAT:
        return {n: e for n, e in entries_since(job_dir, min(sequences)).items() if n in sequences}
    with open(path, "rb") as handle:
        end = _canonical_end(path, handle)
        view = _map(handle) if end is not None else None
        if view is None:
            return {n: e for n, e in entries_since(job_dir, min(sequences)).items() if n in sequences}
        with view:
            for sequence in sequences:
                start = view.rfind(ENTRY_START + b"%d," % sequence, 0, end)
                if start < 0:
                    continue
                stop = view.find(ENTRY_START, start + 1, end)
                try:
                    found[sequence] = json.loads(view[start:stop if stop >= 0 else end].rstrip().rstrip(b","))
                except (ValueError, RecursionError) as exc:
                    raise _corrupt(path, exc) from None
    return found
