"""History entries by number, read from the end of ``jobHistory.json``.

A step needs the last few entries (the turn it continues, the entry before
it), not the whole file: the entry with a given number is found by an mmap
``rfind`` of the bytes every entry starts with (:data:`ENTRY_START`, see
:mod:`logist.store.history`) and parsed from there to the end, and a
process that read this history before parses only what was appended since.
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
from .forms import Sources, from_file, read_all
from .history import ENTRY_START, _canonical_end, _corrupt, file_format, history_path, load_history


def _map(handle) -> Optional[mmap.mmap]:
    try:
        return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except ValueError:  # an empty file
        return None


#: Per process, the entries last parsed from the end of a few histories, so
#: that a loop of steps reads only what was appended since (an append only
#: adds bytes after the entries parsed). Kept with the last bytes parsed
#: (:data:`_MARK` of them): a file rewritten under a reused inode number, or
#: edited in place, no longer holds them where they were and is read afresh,
#: as is a shorter one (repaired) or another inode. Callers must not change
#: the dicts.
_PARSED: dict[str, tuple[tuple[int, int], int, int, bytes, dict[int, dict]]] = {}
_PARSED_JOBS = 4
_MARK = 64


def file_identity(job_dir: Path) -> tuple[int, int]:
    """Which file the history is (a rewritten history is another file)."""
    info = os.stat(history_path(job_dir))
    return info.st_dev, info.st_ino


def entries_since(job_dir: Path, sequence: int) -> dict[int, dict]:
    """The parsed entries numbered ``sequence`` or more, by number, reading
    only the end of the file from that entry on (and, in a process that
    read this history before, only what was appended since)."""
    path, found = history_path(job_dir), file_format(job_dir)
    if found < 2:
        return {e.sequence: e.dump() for e in load_history(job_dir).interactions if e.sequence >= sequence}
    with open(path, "rb") as handle:
        end = _canonical_end(path, handle)
        view = _map(handle) if end is not None else None
        if view is None:
            return {e.sequence: e.dump() for e in load_history(job_dir).interactions if e.sequence >= sequence}
        info = os.fstat(handle.fileno())
        identity = (info.st_dev, info.st_ino)
        with view:
            cached = _PARSED.get(str(path))
            if (cached and cached[0] == identity and cached[1] <= sequence and cached[2] <= end
                    and view[cached[2] - len(cached[3]):cached[2]] == cached[3]):
                _, first, parsed_end, _mark, entries = cached
                fresh = view[parsed_end:end].lstrip(b",")
            else:
                start = view.rfind(ENTRY_START + str(sequence).encode() + b",", 0, end)
                if start < 0:
                    start = view.find(ENTRY_START, 0, end)  # renumbered by hand: read it all
                if start < 0:
                    return {}
                first, entries, fresh = sequence, {}, view[start:end]
            mark = view[max(0, end - _MARK):end]
            try:
                items = json.loads(b"[" + fresh + b"]") if fresh.strip() else []
            except (ValueError, RecursionError) as exc:
                _PARSED.pop(str(path), None)
                raise _corrupt(path, exc) from None
    if found >= 3:
        sources = _sources(job_dir, identity, entries)
        items = list(read_all(items, sources))
    entries = {**entries, **{item["sequence"]: item for item in items}}
    _PARSED.pop(str(path), None)
    while len(_PARSED) >= _PARSED_JOBS:
        _PARSED.pop(next(iter(_PARSED)))
    _PARSED[str(path)] = (identity, first, end, mark, entries)
    return {number: item for number, item in entries.items() if number >= sequence}


#: Per process and file: the request metadata of the entries others name (see logist.store.forms).
_SOURCES: dict[str, tuple[tuple[int, int], Sources]] = {}


def _sources(job_dir: Path, identity: tuple[int, int], known: Optional[dict[int, dict]] = None) -> Sources:
    """Where a format 3 entry finds the metadata it names: entries already
    read (``known``, as in memory), else the file, one entry by number."""
    key = str(history_path(job_dir))
    cached = _SOURCES.get(key)
    if cached is None or cached[0] != identity:
        cached = (identity, Sources())
        _SOURCES.pop(key, None)
        while len(_SOURCES) >= _PARSED_JOBS:
            _SOURCES.pop(next(iter(_SOURCES)))
        _SOURCES[key] = cached
    sources = cached[1]
    sources.fetch = lambda n: (known or {}).get(n) or read_entries(job_dir, {n}, raw=True).get(n)
    return sources


def read_entry(job_dir: Path, sequence: int) -> HistoryEntry:
    """Entry number ``sequence``, found without parsing the others."""
    found = entries_since(job_dir, sequence).get(sequence)
    if found is None:
        raise CorruptFileError(f"{history_path(job_dir)} has no entry {sequence}")
    return HistoryEntry.model_validate(found)


#: Per process, the last entry of a few histories as last parsed, with what
#: the file was then (device, inode, size, modification time, where the
#: entries end): a step, the recovery check before it and the transcript
#: after it all read the same last entry, parsed once until the file changes
#: (an append makes it longer, a rewrite is a new inode). Callers must not
#: change the entry.
_LAST: dict[str, tuple[tuple[int, ...], HistoryEntry]] = {}


def last_entry(job_dir: Path) -> Optional[HistoryEntry]:
    """The last entry, reading only the end of the file (or nothing, when
    the file has not changed since this process last read it)."""
    path, found = history_path(job_dir), file_format(job_dir)
    if found < 2:
        entries = load_history(job_dir).interactions
        return entries[-1] if entries else None
    with open(path, "rb") as handle:
        end = _canonical_end(path, handle)
        info = os.fstat(handle.fileno())
        state = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, -1 if end is None else end)
        cached = _LAST.get(str(path))
        if cached is not None and cached[0] == state:
            return cached[1]
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
        data = json.loads(text)
        if found >= 3:
            data = from_file(data, _sources(job_dir, (info.st_dev, info.st_ino)))
        entry = HistoryEntry.model_validate(data)
    except (ValueError, ValidationError, RecursionError):
        raise CorruptFileError(f"{path} is corrupt: its last entry cannot be parsed") from None
    _LAST.pop(str(path), None)
    while len(_LAST) >= _PARSED_JOBS:
        _LAST.pop(next(iter(_LAST)))
    _LAST[str(path)] = (state, entry)
    return entry


def read_entries(job_dir: Path, sequences: set[int], raw: bool = False) -> dict[int, dict]:
    """The parsed entries numbered ``sequences`` (not empty), each found by
    its number and parsed alone: an early entry of a long history costs its
    own bytes, not those of every entry after it (which
    :func:`entries_since` parses). ``raw``: as the file holds them."""
    path, found, version = history_path(job_dir), {}, file_format(job_dir)
    with open(path, "rb") as handle:
        end = _canonical_end(path, handle) if version >= 2 else None
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
            info = os.fstat(handle.fileno())
    if version >= 3 and not raw:
        sources = _sources(job_dir, (info.st_dev, info.st_ino), found)
        found = {n: from_file(e, sources) for n, e in found.items()}
    return found
