"""History entries by number, read from the end of ``jobHistory.json``.

A step needs the last few entries (the turn it continues, the entry before
it), not the whole file: the entry with a given number is found by an mmap
``rfind`` of the bytes every entry starts with (:data:`ENTRY_START`, see
:mod:`logist.store.history`) and parsed from there to the end. Nothing is
kept between calls: a reader without the job's lock reads the file as it
is, and what a process running a job keeps of it between steps is held by
that job's session (:class:`~logist.store.session.JobSession`). A file in an older
format (or not in the canonical layout) is read whole, upgraded in memory.

A reader that shows a part of a long history (``logist serve``'s pages)
uses an :class:`OffsetReader` instead: it finds an entry by bisection and
reads from there, forward or backward, with ``read`` (the functions above
map the file, and a search from the end to an early entry would bring
every page of the map between them into the process's memory).
"""

from __future__ import annotations

import json
import mmap
import os
from typing import Iterator, Optional

from pydantic import ValidationError

from ..errors import CorruptFileError
from .entries import HistoryEntry
from .history import ENTRY_START, HISTORY_FORMAT, _canonical_end, _corrupt, format_of, load_history, open_history


def _map(handle) -> Optional[mmap.mmap]:
    try:
        return mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
    except ValueError:  # an empty file
        return None
    except OSError:  # more than the process may map (a memory limit): read in blocks instead
        return None


#: How many bytes before the end of the entries mark where a reader stopped (see :func:`file_mark`).
_MARK = 64


def file_mark(files: "JobFiles") -> Optional[tuple]:
    """What the history is now, for a reader that keeps entries between
    reads (a :class:`~logist.store.session.JobSession`): the file (device,
    inode), where its entries end and their last bytes. Entries kept from
    an earlier mark are still the file's when the file is the same and
    still holds the earlier mark's bytes where they were (an append only
    adds after them; a rewrite, a repair that cut an entry back or an edit
    in place does not). None: not a canonical current-format file."""
    held = files.held_mark
    if held is not None:
        return held  # the session's own, under the lock (see JobSession.held_mark)
    with open_history(files.history_path) as handle:
        return _mark_of(handle, _canonical_end(files, handle) if format_of(handle) >= HISTORY_FORMAT else None)


def _mark_of(handle, end: Optional[int]) -> Optional[tuple]:
    """The mark (:func:`file_mark`) of the history open as ``handle``, its entries ending at ``end``."""
    if end is None:
        return None
    info = os.fstat(handle.fileno())
    return info.st_dev, info.st_ino, end, os.pread(handle.fileno(), end - max(0, end - _MARK), max(0, end - _MARK))


def mark_after(mark: tuple, written: bytes) -> tuple:
    """The mark of a file marked ``mark`` once ``written`` (entries, no
    :data:`~logist.store.history.TAIL`) is appended where its entries ended."""
    end = mark[2] + len(written)
    return mark[0], mark[1], end, (mark[3] + written)[-min(_MARK, end):]


def still_holds(files: "JobFiles", mark: Optional[tuple], now: Optional[tuple]) -> bool:
    """Whether the file as marked ``now`` still holds what it held at ``mark``."""
    if mark is None or now is None or mark[:2] != now[:2] or now[2] < mark[2]:
        return False
    if now[2] == mark[2]:
        return now[3] == mark[3]
    with open(files.history_path, "rb") as handle:
        handle.seek(mark[2] - len(mark[3]))
        return handle.read(len(mark[3])) == mark[3]


def entries_since(files: "JobFiles", sequence: int) -> dict[int, dict]:
    """The parsed entries numbered ``sequence`` or more, by number, reading
    only the end of the file from that entry on."""
    path = files.history_path
    with open_history(path) as handle:
        current = format_of(handle) >= HISTORY_FORMAT
        end = _canonical_end(files, handle) if current else None
        view = _map(handle) if end is not None else None
        if view is None:
            return {e.sequence: e.dump() for e in load_history(files).interactions if e.sequence >= sequence}
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


def read_entry(files: "JobFiles", sequence: int) -> HistoryEntry:
    """Entry number ``sequence``, found without parsing the others."""
    found = read_entries(files, {sequence}).get(sequence)
    if found is None:
        raise CorruptFileError(f"{files.history_path} has no entry {sequence}")
    return HistoryEntry.model_validate(found)


def _last(files: "JobFiles", marks: Optional[list] = None) -> tuple[Optional[HistoryEntry], Optional[bytes]]:
    """The last entry's JSON text, reading only the end of the file: ``(None,
    text)``; a history in an older format, or one that cannot be mapped, is
    read whole: ``(entry, None)``; no entry: ``(None, None)``. ``marks``:
    given, the file's mark (:func:`file_mark`) is added to it, from the same
    open."""
    with open_history(files.history_path) as handle:
        end = _canonical_end(files, handle) if format_of(handle) >= HISTORY_FORMAT else None
        if marks is not None:
            marks.append(_mark_of(handle, end))
        view = _map(handle) if end is not None else None
        if view is None and end is not None:  # too long to map under the process's memory limit
            newest = next(OffsetReader(files, handle, end, 0).backward(end), None)
            return None, (newest[1] if newest is not None else None)
        if view is None:
            entries = load_history(files).interactions
            return (entries[-1] if entries else None), None
        with view:
            start = view.rfind(ENTRY_START, 0, end)
            return None, (view[start:end] if start >= 0 else None)


def _entry_of(files: "JobFiles", data) -> HistoryEntry:
    try:
        return HistoryEntry.model_validate(data)
    except (ValueError, ValidationError, RecursionError):
        raise CorruptFileError(f"{files.history_path} is corrupt: its last entry cannot be parsed") from None


def last_entry(files: "JobFiles") -> Optional[HistoryEntry]:
    """The last entry, reading only the end of the file."""
    return _last_entry(files, None)


def last_entry_marked(files: "JobFiles") -> tuple[Optional[HistoryEntry], Optional[tuple]]:
    """The last entry and the file's mark (:func:`file_mark`), from one open
    of the file: what a session keeps of the history while it holds the
    job's lock (:attr:`~logist.store.session.JobSession.held_mark`)."""
    marks: list = []
    entry = _last_entry(files, marks)
    return entry, marks[0]


def _last_entry(files: "JobFiles", marks: Optional[list]) -> Optional[HistoryEntry]:
    entry, text = _last(files, marks)
    if text is None:
        return entry
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise CorruptFileError(f"{files.history_path} is corrupt: its last entry cannot be parsed") from None
    return _entry_of(files, data)


def last_sequence(files: "JobFiles") -> Optional[int]:
    """The last entry's number (None: no entry), read from its JSON without
    building the entry when it names one: what a reader compares with the
    manifest's before it needs the entry itself (:func:`logist.store.recovery.recovered_manifest`).
    Raises :class:`CorruptFileError` as :func:`last_entry` does when it names none."""
    entry, text = _last(files)
    if text is None:
        return entry.sequence if entry is not None else None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        raise CorruptFileError(f"{files.history_path} is corrupt: its last entry cannot be parsed") from None
    number = data.get("sequence") if isinstance(data, dict) else None
    if isinstance(number, int) and not isinstance(number, bool):
        return number
    return _entry_of(files, data).sequence


def read_entries(files: "JobFiles", sequences: set[int]) -> dict[int, dict]:
    """The parsed entries numbered ``sequences`` (not empty), each found by
    its number and parsed alone: an early entry of a long history costs its
    own bytes, not those of every entry after it (which
    :func:`entries_since` parses)."""
    path, found = files.history_path, {}
    with open_history(path) as handle:
        end = _canonical_end(files, handle) if format_of(handle) >= HISTORY_FORMAT else None
        view = _map(handle) if end is not None else None
        if view is None:
            return {n: e for n, e in entries_since(files, min(sequences)).items() if n in sequences}
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


#: Bytes read at a time by :class:`OffsetReader`.
BLOCK = 1 << 16


class OffsetReader:
    """An open canonical history read a part at a time, by byte offset: for
    a reader that shows a part of a long history (``logist serve``'s job
    page and its live updates, :mod:`logist.views.window`).

    Every entry starts with :data:`ENTRY_START` followed by its number, and
    the numbers grow with the offset, so the entry with a given number is
    found by bisection over the file's bytes (:meth:`locate`: about
    log2(size / :data:`BLOCK`) reads of a few blocks), and from there the
    entries are read forward (:meth:`forward`) or backward
    (:meth:`backward`), a block at a time. Nothing before or after what is
    asked for is read, and the file is read with ``read``, not mapped (the
    pages of a map touched by a search count in the process's resident
    memory). ``end`` is where the entries ended when it was opened (an
    append in progress excluded); :meth:`refresh` moves it to where they
    end now. Use :func:`open_offset_reader`."""

    def __init__(self, files: "JobFiles", handle, end: int, first: int):
        self.files = files
        self.path = files.history_path
        self.handle = handle
        self.end = end
        #: The offset of the first entry (the end: no entry).
        self.first = first

    def close(self) -> None:
        self.handle.close()

    def __enter__(self) -> "OffsetReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _read(self, offset: int, size: int) -> bytes:
        self.handle.seek(offset)
        return self.handle.read(max(0, min(size, self.end - offset)))

    def refresh(self) -> bool:
        """Move :attr:`end` to where the entries end now; False when the file
        is no longer this canonical history (replaced, cut back, rewritten)."""
        path = self.path
        try:
            same = os.fstat(self.handle.fileno())[1:3] == os.stat(path)[1:3]
        except OSError:
            return False
        end = _canonical_end(self.files, self.handle) if same else None
        if end is None or end < self.end:
            return False
        self.end = end
        return True

    def next_start(self, offset: int, limit: Optional[int] = None) -> Optional[int]:
        """The offset of the first entry starting at ``offset`` or after it, before ``limit`` (default: the end)."""
        limit = self.end if limit is None else min(limit, self.end)
        overlap = len(ENTRY_START) - 1
        while offset < limit:
            chunk = self._read(offset, min(BLOCK, limit - offset) + overlap)
            found = chunk.find(ENTRY_START)
            if found >= 0:
                return offset + found if offset + found < limit else None
            if len(chunk) <= overlap:
                return None
            offset += len(chunk) - overlap
        return None

    def sequence_at(self, offset: int) -> Optional[int]:
        """The number of the entry starting at ``offset`` (None: none does)."""
        head = self._read(offset, len(ENTRY_START) + 24)
        if not head.startswith(ENTRY_START):
            return None
        digits = head[len(ENTRY_START):].split(b",", 1)[0]
        return int(digits) if digits.isdigit() else None

    def locate(self, sequence: int) -> int:
        """The offset of entry ``sequence``, or of the first entry after it
        (:attr:`end`: none is), found by bisection."""
        lo = self.first
        if lo >= self.end or (self.sequence_at(lo) or 0) >= sequence:
            return lo
        # seq(lo) < sequence; the answer is the first entry in (lo, hi) numbered sequence or more, else best.
        hi = best = self.end
        while hi - lo > 4 * BLOCK:
            mid = (lo + hi) // 2
            start = self.next_start(mid, hi)
            number = None if start is None else self.sequence_at(start)
            if start is None:
                hi = mid
            elif number is not None and number >= sequence:
                best = hi = start
            else:
                lo = start
        start = self.next_start(lo + 1, hi)
        while start is not None:
            number = self.sequence_at(start)
            if number is not None and number >= sequence:
                return start
            start = self.next_start(start + 1, hi)
        return best

    def forward(self, offset: int) -> Iterator[tuple[int, bytes]]:
        """Each entry from the first starting at ``offset`` or after it to
        the end, as ``(offset, its bytes)``, holding a block (and the entry) at a time."""
        found = self.next_start(offset)
        if found is None:
            return
        offset = found
        buffer, base, pos = bytearray(), offset, offset  # buffer holds the file's bytes [base, pos)
        start = 0  # where the current entry starts in the buffer
        while True:
            following = buffer.find(ENTRY_START, start + 1)
            while following < 0 and pos < self.end:
                chunk = self._read(pos, BLOCK)
                if not chunk:
                    break
                pos += len(chunk)
                buffer += chunk
                following = buffer.find(ENTRY_START, max(start + 1, len(buffer) - len(chunk) - len(ENTRY_START)))
            stop = following if following >= 0 else len(buffer)
            if stop > start:
                yield base + start, bytes(buffer[start:stop]).rstrip(b",")
            if following < 0:
                return
            del buffer[:following]  # a bytearray drops its front in place
            base += following
            start = 0

    def backward(self, offset: int) -> Iterator[tuple[int, bytes]]:
        """Each entry before ``offset`` (an entry's start, or :attr:`end`),
        the newest first, as ``(offset, its bytes)``."""
        buffer, base, stop = b"", offset, offset  # buffer holds the file's bytes [base, offset_of_buffer_end)
        while stop > self.first:
            found = buffer.rfind(ENTRY_START, 0, stop - base)
            while found < 0 and base > self.first:
                size = min(max(BLOCK, len(buffer)), base - self.first)  # doubling: a long entry costs its length
                self.handle.seek(base - size)
                buffer = self.handle.read(size) + buffer[: stop - base]
                base -= size
                found = buffer.rfind(ENTRY_START, 0, stop - base)
            if found < 0:
                return
            yield base + found, buffer[found: stop - base].rstrip(b",")
            stop = base + found
            buffer = buffer[:found]

    def parse(self, text: bytes) -> dict:
        try:
            return json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise _corrupt(self.path, exc) from None


def open_offset_reader(files: "JobFiles") -> Optional[OffsetReader]:
    """An :class:`OffsetReader` of the job's history, or None when it is not
    a canonical file in the current format (read it whole: :func:`logist.store.history.iter_entry_data`)."""
    handle = open_history(files.history_path)
    try:
        end = _canonical_end(files, handle) if format_of(handle) >= HISTORY_FORMAT else None
        if end is None:
            handle.close()
            return None
        reader = OffsetReader(files, handle, end, end)
        first = reader.next_start(0)
        reader.first = end if first is None else first
        return reader
    except BaseException:
        handle.close()
        raise
