"""``jobHistory.json``: the append-only audit trail, written here only.

The file is one JSON document that a person can open, and ``json.load``,
at any time::

    {"$schema": ..., "format": 4, "job_id": ..., "interactions": [entry, ...]}

No path in it is absolute: the workspace is always the job's
``workspace/`` (every call entry says so: ``"workspace_path": "workspace"``),
so a jobs directory can be moved or mounted anywhere.

Entries are :class:`~logist.store.entries.HistoryEntry` (what each holds:
:mod:`logist.store.entries`), each written as :meth:`HistoryEntry.dump`
gives it: self-contained but for the one delta of a turn's later calls
(``continues`` + ``added``). Rewriting the file on every step would cost
time proportional to its length, so an append writes in place instead:

* The file always ends with the same closing bytes, :data:`TAIL`, and every
  entry starts on a line of its own at a fixed indent, with its
  ``sequence`` first, so an entry is found by its number without parsing
  the others (:func:`logist.store.seek.read_entry`).
* To append, Logist records the current length in a small journal
  (``jobHistory.json.append``, written atomically), then writes
  ``,<entry>`` + :data:`TAIL` over the old tail with one ``write`` call,
  fsyncs, and deletes the journal. The cost is that of the new entry only.
  A kill before or after that one call leaves a whole document; only a power
  loss (or a kill inside the call) can leave half an entry. A step's append
  writes its journal without fsyncs: the step's own journal
  (:mod:`logist.store.journal`), fsynced before, records the same length
  (``history_offset``), and :func:`repair` takes it from there when a power
  loss took the append journal (:func:`append_entry`).
* :func:`repair` (run under the job's lock before any change) finishes or
  undoes an append the journal says was interrupted: it keeps the new entry
  when it was written whole and otherwise cuts the file back to the recorded
  length and restores the tail. A reader without the lock that finds a
  journal reads only the recorded prefix, so it never sees half an entry.

A file that does not end in :data:`TAIL` (edited by hand, say) but parses is
rewritten once in the canonical form; one that does not parse is moved aside,
its readable entries are kept, and the loss is reported. A file in an older
format (1 to 4) is read through :mod:`logist.store.upgrade`, one function per
version, and rewritten in the current one the first time a command changes the job
(or by ``logist job upgrade``), the old file kept beside it
(:func:`upgrade_file`).
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import BinaryIO, Iterator, Optional

from pydantic import ValidationError

from ..secrets.redact import redact_data
from .atomic import COMPACT, atomic_write, atomic_write_json, atomic_writer, fsync_dir, move_aside, naming
from ..errors import CorruptFileError
from ..failpoints import failpoint
from .entries import HistoryEntry, JobHistory
from .manifest import utc_now
from .response_formats import kept_in
from .upgrade import HISTORY_FORMAT, HISTORY_SCHEMA, keep_beside, upgrade_history_data

TAIL = b"\n  ]\n}\n"
ENTRY_INDENT = "    "
#: The bytes that start every entry; the entry's sequence number follows.
ENTRY_START = b"\n" + ENTRY_INDENT.encode() + b'{\n' + ENTRY_INDENT.encode() + b'  "sequence": '


def header(job_id: str) -> bytes:
    return (
        "{\n"
        f'  "$schema": "{HISTORY_SCHEMA}",\n'
        f'  "format": {HISTORY_FORMAT},\n'
        f'  "job_id": {json.dumps(job_id, ensure_ascii=False)},\n'
        '  "interactions": ['
    ).encode("utf-8")


def layout(entry: dict) -> bytes:
    """An entry (:meth:`HistoryEntry.dump`) as the file holds it. Its plain fields (numbers, texts) share
    a line, so the first line says what the step was (``"sequence": 4,
    "kind": "llm_call", "timestamp": ..., "role": "Worker"``); each field
    that holds an object or a list (the request, the answer, the state) has
    a line of its own, its value in compact JSON. Readable in any editor,
    and the indentation a nested layout would repeat on every line of every
    entry is not paid for. Readers find an entry by :data:`ENTRY_START`
    alone: the layout after its number is free. No known secret value is
    written (:func:`logist.secrets.redact.redact_data`)."""
    entry = redact_data(entry)
    inner = ENTRY_INDENT + "  "
    lines: list[list[str]] = []
    plain = False
    for key, value in entry.items():
        field = f"{json.dumps(key, ensure_ascii=False)}: {json.dumps(value, ensure_ascii=False, separators=COMPACT)}"
        structured = isinstance(value, (dict, list))
        if structured or not plain or not lines:
            lines.append([field])
        else:
            lines[-1].append(field)
        plain = not structured
    text = "{\n" + ",\n".join(inner + ", ".join(line) for line in lines) + "\n" + ENTRY_INDENT + "}"
    return ("\n" + ENTRY_INDENT + text).encode("utf-8")


def create_history(files: "JobFiles", job_id: str) -> None:
    files.forget_held()
    atomic_write(files.history_path, header(job_id) + TAIL)


def write_canonical(files: "JobFiles", job_id: str, entries: list[dict]) -> None:
    """Write entries in memory (:meth:`HistoryEntry.dump`) as the whole file, in the current format."""
    files.forget_held()
    body = b",".join(layout(kept_in(files, e)) for e in entries)
    atomic_write(files.history_path, header(job_id) + body + TAIL)


def open_history(path: Path) -> BinaryIO:
    """The history open for reading, checked to be a file first: a folder,
    or a pipe, which a plain open would block on, is :class:`CorruptFileError`.
    Opened without blocking and checked on the open descriptor: one open and
    one ``fstat``, where a check by name before the open took two more."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except IsADirectoryError:  # pragma: no cover - O_RDONLY opens a folder; kept for other systems
        raise CorruptFileError(f"{path} is not a file") from None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise CorruptFileError(f"{path} is not a file")
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _head_of(handle: BinaryIO) -> bytes:
    """The header of the history open as ``handle``: its bytes before the
    list of entries (read where they are, the handle's position unmoved)."""
    head = os.pread(handle.fileno(), 8192, 0)
    end = head.find(b'"interactions"')
    return head if end < 0 else head[:end]


def _head(path: Path) -> bytes:
    """The file's header: its bytes before the list of entries."""
    with open_history(path) as handle:
        return _head_of(handle)


def format_of(handle: BinaryIO) -> int:
    """The format version the header of the history open as ``handle`` names
    (1: none named): a reader that goes on to read the file asks it of the
    handle it reads with, so the file is opened once."""
    return _format_in(_head_of(handle))


def read_head(files: "JobFiles") -> Optional[bytes]:
    """The history's header (its bytes before the list of entries; None: no
    file), for a caller that asks it several questions (:func:`format_in`, ...)."""
    try:
        return _head(files.history_path)
    except FileNotFoundError:
        return None


def format_in(head: bytes) -> int:
    """The format version ``head`` (:func:`read_head`) names (1: none named)."""
    return _format_in(head)


def _format_in(head: bytes) -> int:
    marker = head.find(b'"format":')
    if marker < 0:
        return 1
    digits = head[marker + 9 :].lstrip()[:6]
    number = digits[: len(digits) - len(digits.lstrip(b"0123456789"))]
    return int(number or b"1")


def recorded_workspace(files: "JobFiles") -> Optional[str]:
    """The absolute workspace path the header of a history written before
    paths were relative names (None: none, as in every file written now)."""
    try:
        head = _head(files.history_path)
    except FileNotFoundError:
        return None
    return _workspace_in(head)


def _workspace_in(head: bytes) -> Optional[str]:
    found = re.search(rb'"workspace_path":\s*("(?:[^"\\]|\\.)*")', head)
    return json.loads(found.group(1)) if found else None


def file_format(files: "JobFiles") -> int:
    """The format version the file's header names (1: none named)."""
    with open_history(files.history_path) as handle:
        return format_of(handle)


def entries_end(files: "JobFiles") -> Optional[int]:
    """Where the next append starts (its length less :data:`TAIL`): what a
    step's journal records as ``history_offset``. None when the file is not
    a canonical history of the current format (an append rewrites it first,
    so it would not start there)."""
    held = files.held_mark
    if held is not None:
        return held[2]  # the session's own, under the lock (see JobSession.held_mark)
    try:
        with open_history(files.history_path) as handle:
            if format_of(handle) < HISTORY_FORMAT:
                return None
            size = handle.seek(0, os.SEEK_END)
            handle.seek(max(0, size - len(TAIL)))
            return size - len(TAIL) if handle.read() == TAIL else None
    except OSError:
        return None


def repair(files: "JobFiles", journalled: Optional[int] = None) -> Optional[str]:
    """Finish or undo an interrupted append. Returns what was done, or None.

    ``journalled``: the ``history_offset`` the step journal left behind
    records (fsynced), which stands in for an append journal a power loss
    took (a step's append journal is not fsynced: see :func:`append_entry`).
    Call with the job's lock held.
    """
    files.forget_held()
    path, journal = files.history_path, files.history_append_path
    if not journal.exists():
        return _repair_journalled(files, journalled) if journalled is not None else None
    try:
        info = json.loads(journal.read_text(encoding="utf-8"))
        offset = int(info["offset"])
    except (OSError, ValueError, KeyError, TypeError):
        journal.unlink(missing_ok=True)
        if journalled is not None:  # a step's append journal, not fsynced, that a power loss left unreadable
            return _repair_journalled(files, journalled)
        # An append journal fsynced is written atomically, so this is not a
        # crash of ours; leave the file alone and let the parse decide.
        return "discarded an unreadable append journal"
    with open(path, "r+b") as handle:
        complete = False
        if _could_be_an_append(handle, offset):
            handle.seek(offset)
            added = handle.read()
            fragment = added[: -len(TAIL)].lstrip(b",")
            try:
                json.loads(fragment)
                complete = True
            except ValueError:
                complete = not fragment.strip()  # nothing was written yet
        if not complete:
            handle.seek(offset)
            handle.write(TAIL)
            handle.truncate()
            handle.flush()
            os.fsync(handle.fileno())
    journal.unlink()
    fsync_dir(path.parent)
    return None if complete else "removed a half-written history entry left by an interrupted append"


def _repair_journalled(files: "JobFiles", offset: int) -> Optional[str]:
    """An append the step journal recorded the start of (``offset``), with
    no readable append journal: the bytes from there are kept when they are
    whole entries (the step's own, or later ones when the journal outlived
    its step), and otherwise cut back to ``offset``, but only where
    ``offset`` ends an entry (or the header) and the file as it is does not
    end as a whole document: an offset that names no append in this file (a
    history rewritten since, say) changes nothing, and the parse decides."""
    files.forget_held()
    path = files.history_path
    if file_format(files) < HISTORY_FORMAT:
        return None  # the journal names an offset in a canonical file of the current format only
    with open(path, "r+b") as handle:
        size = handle.seek(0, os.SEEK_END)
        if offset <= 0 or offset > size:
            return None
        handle.seek(offset - 1)
        if handle.read(1) not in (b"}", b"["):
            return None
        if _could_be_an_append(handle, offset):
            handle.seek(offset)
            fragment = handle.read()[: -len(TAIL)].lstrip(b",")
            try:
                json.loads(b"[" + fragment + b"]")
                return None  # whole: nothing, or entries written whole
            except ValueError:
                pass
        handle.seek(offset)
        handle.write(TAIL)
        handle.truncate()
        handle.flush()
        os.fsync(handle.fileno())
    return "removed a half-written history entry left by an interrupted append"


def _could_be_an_append(handle, offset: int) -> bool:
    """Whether the bytes from ``offset`` on can be one whole append (an entry
    and :data:`TAIL`, or the tail alone: nothing written yet), judged from
    their first and last bytes only: what a crash left there (blocks of zeros
    a power loss leaves, say, a gigabyte of them) is not read into memory."""
    size = handle.seek(0, os.SEEK_END)
    if size - offset < len(TAIL):
        return False
    handle.seek(size - len(TAIL))
    if handle.read() != TAIL:
        return False
    if size - offset == len(TAIL):
        return True
    handle.seek(offset)
    return handle.read(len(ENTRY_START) + 1).lstrip(b",").startswith(ENTRY_START)


def append_entry(files: "JobFiles", entry: HistoryEntry, journalled: Optional[int] = None,
                 current: bool = False) -> tuple[int, bytes]:
    """Append one entry at a cost independent of the history's length.

    Call with the job's lock held. A file in an older format is rewritten
    in the current one first (one format per file; :func:`upgrade_file`).
    ``journalled``: where the step journal (fsynced, on disk until the entry
    is recorded) says the append starts (its ``history_offset``). When that
    is where it starts, the append journal is written for lock-free readers
    only, without its two fsyncs: after a power loss, :func:`repair` finds
    the start in the step journal. ``current``: the caller knows the file is
    in the current format (its session read it so under the lock). Returns
    where the append started and the bytes appended there before
    :data:`TAIL` (the entry, after the comma that joins it to the one before).
    """
    path = files.history_path
    if not current and file_format(files) < HISTORY_FORMAT:
        upgrade_file(files)
    with open(path, "r+b") as handle:
        size = handle.seek(0, os.SEEK_END)
        offset = size - len(TAIL)
        tail_ok = False
        if offset > 0:
            handle.seek(offset - 1)
            before_and_tail = handle.read()
            tail_ok = before_and_tail[1:] == TAIL
        if not tail_ok:
            handle.close()
            _normalise(files)
            return append_entry(files, entry, journalled)
        empty = before_and_tail[:1] == b"["
        chunk = (b"" if empty else b",") + layout(kept_in(files, entry.dump())) + TAIL
        atomic_write_json(files.history_append_path, {"offset": offset, "sequence": entry.sequence},
                          durable=journalled != offset)
        failpoint("before_history_append")
        handle.seek(offset)
        with naming(path):
            handle.write(chunk)  # one call: see the module's docstring
            handle.flush()
            os.fsync(handle.fileno())
    # The journal's removal is not fsynced: found again after a power loss, it
    # names an entry written whole, which repair keeps.
    files.history_append_path.unlink()
    return offset, chunk[: -len(TAIL)]


def _committed_end(files: "JobFiles", size: int) -> tuple[int, bool]:
    """Where the last complete document's entries end, and whether an append
    is in progress (see module docstring). The document is the bytes up to
    that point followed by :data:`TAIL`."""
    journal = files.history_append_path
    if journal.exists():
        try:
            return int(json.loads(journal.read_text(encoding="utf-8"))["offset"]), True
        except (OSError, ValueError, KeyError, TypeError):
            pass
    return size - len(TAIL), False


def _read_committed_bytes(files: "JobFiles") -> bytes:
    """The file as of its last complete append (see module docstring)."""
    data = files.history_path.read_bytes()
    end, in_progress = _committed_end(files, len(data))
    return data[:end] + TAIL if in_progress else data


def _corrupt(path: Path, exc: Exception) -> CorruptFileError:
    if isinstance(exc, RecursionError):  # JSON nested thousands deep: no file Logist writes
        return CorruptFileError(f"{path} is corrupt: it is nested too deep to be read")
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    if isinstance(exc, ValueError) and not getattr(exc, "doc", "x").strip():
        first = "it is empty"  # a JSONDecodeError of nothing but blanks
    return CorruptFileError(f"{path} is corrupt: {first}")


def _refuse_an_end_no_document_has(files: "JobFiles") -> None:
    """Raise :class:`CorruptFileError` when the file does not end as a JSON
    document does (its last byte but blanks a ``}``), looking at its end
    only: a file a crash left ending in zeros (a gigabyte of them, say) is
    not read whole to find out, so a command can still repair it (or cancel
    the job) with little memory."""
    path = files.history_path
    with open(path, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        if _committed_end(files, size)[1]:
            return  # an append in progress: its committed part is read, ending in TAIL
        handle.seek(max(0, size - 4096))
        last = handle.read().rstrip(b" \t\r\n")
    if last and not last.endswith(b"}"):
        what = "zeros" if last.endswith(b"\0") else "bytes that are not JSON"
        raise CorruptFileError(f"{path} is corrupt: it ends in {what}, not as a JSON document (a write cut short)")


def load_history(files: "JobFiles") -> JobHistory:
    """The whole history in memory (an older format upgraded on the way). For long
    histories prefer :func:`iter_entries`, which holds one entry at a time."""
    path = files.history_path
    try:
        _refuse_an_end_no_document_has(files)
        data = json.loads(_read_committed_bytes(files))
        return JobHistory.model_validate(upgrade_history_data(data))
    except FileNotFoundError:
        raise
    except (ValueError, ValidationError, KeyError, TypeError, RecursionError) as exc:
        raise _corrupt(path, exc) from None


def _canonical_end(files: "JobFiles", handle) -> Optional[int]:
    """Where the entries end in a canonical history (open as ``handle``), else None."""
    size = handle.seek(0, os.SEEK_END)
    end, in_progress = _committed_end(files, size)
    if end > size or end < 0:
        raise CorruptFileError(f"{files.history_path} is shorter than its append journal says")
    if not in_progress:
        handle.seek(end)
        if handle.read(len(TAIL)) != TAIL:
            return None
    return end


def iter_entries(files: "JobFiles", block: int = 1 << 20) -> Iterator[HistoryEntry]:
    """Every entry, oldest first, holding one entry (and one block) in memory."""
    for data in iter_entry_data(files, block):
        try:
            yield HistoryEntry.model_validate(data)
        except ValidationError as exc:
            raise _corrupt(files.history_path, exc) from None


def iter_entry_data(files: "JobFiles", block: int = 1 << 20) -> Iterator[dict]:
    """Like :func:`iter_entries`, as parsed JSON (:meth:`HistoryEntry.dump`, whatever the file's format)."""
    return iter_written(files, block)


def iter_written(files: "JobFiles", block: int = 1 << 20) -> Iterator[dict]:
    """Every entry as the file holds it (an older or non-canonical file: upgraded in memory)."""
    path = files.history_path
    with open_history(path) as handle:
        end = _canonical_end(files, handle) if format_of(handle) >= HISTORY_FORMAT else None
        if end is None:
            yield from (e.dump() for e in load_history(files).interactions)
            return
        handle.seek(0)
        buffer, pos, start = bytearray(), 0, -1
        while start < 0 and pos < end:  # the header: up to the first entry
            chunk = handle.read(min(block, end - pos))
            pos += len(chunk)
            buffer += chunk
            start = buffer.find(ENTRY_START)
        if start < 0:
            return
        del buffer[:start]
        while True:
            following = buffer.find(ENTRY_START, 1)
            while following < 0 and pos < end:
                chunk = handle.read(min(block, end - pos))
                pos += len(chunk)
                buffer += chunk
                # Only where the new bytes are: a long entry is not searched again block after block.
                following = buffer.find(ENTRY_START, max(1, len(buffer) - len(chunk) - len(ENTRY_START)))
            text = buffer if following < 0 else buffer[:following]
            try:
                yield json.loads(text.rstrip(b","))
            except ValueError as exc:
                raise _corrupt(path, exc) from None
            if following < 0:
                return
            # In place: a bytearray drops its front without copying the rest (slicing a bytes
            # object per entry copied the rest of the block each time).
            del buffer[:following]


def _normalise(files: "JobFiles") -> None:
    """Rewrite a parseable history that lost its canonical layout in the canonical form."""
    history = load_history(files)
    write_canonical(files, history.job_id, [e.dump() for e in history.interactions])


def upgrade_file(files: "JobFiles", head: Optional[bytes] = None) -> Optional[str]:
    """Rewrite a history in an older format (or one whose header names the
    absolute workspace path) in the current one, keeping the old file
    beside it as ``jobHistory.json.v<format>``. Every request and state
    reads the same before and after. Returns what was done, or None when
    there was nothing to do (or the file is damaged: recovery salvages it).
    Call with the job's lock held. ``head``: its header as the caller read it
    (:func:`read_head`; None: read here)."""
    path = files.history_path
    if head is None:
        try:
            head = _head(path)  # read once for both questions
        except FileNotFoundError:
            return None
    found = _format_in(head)
    if found > HISTORY_FORMAT or (found == HISTORY_FORMAT and _workspace_in(head) is None):
        return None
    try:
        history = load_history(files)
    except CorruptFileError:
        return None
    kept = path.with_name(f"{path.name}.v{found}")
    keep_beside(path, kept)
    fsync_dir(path.parent)
    write_canonical(files, history.job_id, [e.dump() for e in history.interactions])
    return f"upgraded the history from format {found} to format {HISTORY_FORMAT} (the old file is kept as {kept.name})"


#: The most bytes :func:`salvage` reads for one entry of a damaged history:
#: an entry longer than this (no entry Logist writes comes near it) is lost
#: with those after it, so that what a crash left (a gigabyte of zeros, a
#: line that never ends) is never held in memory whole.
SALVAGE_ENTRY_LIMIT = 64 << 20


def _salvageable_entries(handle, block: int = 1 << 20) -> Iterator[dict]:
    """The entries of a damaged history in the layout Logist writes, first to
    the last that still reads as an entry (each parsed alone: at most one
    entry, of :data:`SALVAGE_ENTRY_LIMIT` bytes, in memory)."""
    decoder = json.JSONDecoder()
    buffer = bytearray(handle.read(block))
    start = buffer.find(ENTRY_START)
    if start < 0:
        return
    del buffer[:start]
    ended = False
    while True:
        following = buffer.find(ENTRY_START, 1)
        while following < 0 and not ended and len(buffer) < SALVAGE_ENTRY_LIMIT:
            chunk = handle.read(block)
            # The end of the file, or zeros: no entry goes on past a NUL byte (JSON has none).
            ended = not chunk or b"\0" in chunk
            buffer += chunk
            following = buffer.find(ENTRY_START, max(1, len(buffer) - len(chunk) - len(ENTRY_START)))
        text = buffer if following < 0 else buffer[:following]
        try:
            data, _ = decoder.raw_decode(bytes(text).decode("utf-8").lstrip())
            entry = HistoryEntry.model_validate(data).dump()
        except (ValueError, ValidationError, RecursionError):
            return
        yield entry
        if following < 0:
            return
        del buffer[:following]


def _salvage_streamed(files: "JobFiles", job_id: str) -> Optional[tuple[Path, int]]:
    """:func:`salvage` of a current-format history in Logist's layout, one
    entry at a time (None: another file, salvaged whole)."""
    files.forget_held()
    path = files.history_path
    with open(path, "rb") as handle:
        head = handle.read(8192)
        if file_format(files) != HISTORY_FORMAT or b'"workspace_path"' in head.split(b'"interactions"')[0]:
            return None
        if ENTRY_START not in head and handle.seek(0, os.SEEK_END) <= SALVAGE_ENTRY_LIMIT:
            return None  # another layout (an edit by hand), small enough to read whole
        handle.seek(0)
        kept = 0
        # The new file is written beside the damaged one, which is moved aside just before it
        # takes its place: there is always a history.
        with atomic_writer(path) as out:
            out.write(header(job_id))
            for entry in _salvageable_entries(handle):
                out.write((b"," if kept else b"") + layout(kept_in(files, entry)))
                kept += 1
            out.write(TAIL)
            aside = move_aside(path, utc_now().replace(":", ""))
    return aside, kept


def salvage(files: "JobFiles", job_id: str) -> tuple[Path, int]:
    """Move a corrupt history aside and keep the entries that still parse.

    Returns the path the damaged file was moved to and how many entries were
    kept. Nothing is deleted: the damaged file stays beside the new one.
    A current-format file in the layout Logist writes is read one entry at a
    time, whatever its size; another is read whole.
    """
    streamed = _salvage_streamed(files, job_id)
    if streamed is not None:
        return streamed
    path = files.history_path
    raw = path.read_bytes()
    kept: list[dict] = []
    decoder = json.JSONDecoder()
    text = raw.decode("utf-8", errors="replace")
    version, header = file_format(files), {}
    found = re.search(rb'"workspace_path":\s*("(?:[^"\\]|\\.)*")', raw[:8192])
    if found:
        header["workspace_path"] = json.loads(found.group(1))
    start = text.find("[")
    pos = start + 1 if start >= 0 else len(text)
    while pos < len(text):
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] != "{":
            break
        try:
            obj, pos = decoder.raw_decode(text, pos)
        except (ValueError, RecursionError):
            break
        kept.append(obj)
    # The longest run of entries that still reads (an older format's are upgraded together: they may name earlier ones).
    while kept:
        try:
            data = upgrade_history_data({**header, "format": version, "job_id": job_id, "interactions": kept})
            kept = [HistoryEntry.model_validate(e).dump() for e in data["interactions"]]
            break
        except (ValueError, ValidationError, CorruptFileError, RecursionError, KeyError, TypeError):
            kept = kept[:-1]
    aside = move_aside(path, utc_now().replace(":", ""))
    write_canonical(files, job_id, kept)
    return aside, len(kept)
