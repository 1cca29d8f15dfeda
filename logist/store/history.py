"""``jobHistory.json``: the append-only audit trail, written here only.

The file is one JSON document, ``{"job_id": ..., "interactions": [...]}``,
that a person can open at any time. Rewriting it whole on every step would
cost time proportional to its length (jobs run thousands of steps with
prompts of tens of KB), so an append writes in place instead:

* The file always ends with the same closing bytes, :data:`TAIL`.
* To append, Logist first records the current length and tail in a small
  journal file (``jobHistory.json.append``, written atomically), then writes
  ``,<entry>`` + :data:`TAIL` over the old tail with one write, fsyncs, and
  deletes the journal. The cost is that of the new entry only.
* If the process dies in between, the journal says where the last complete
  document ended. :func:`repair` (run before any read or append, under the
  job's lock) keeps the new entry when it was written whole and otherwise
  cuts the file back to the recorded length and restores the tail, so the
  file is whole again and no entry that was completely written is lost.
* A reader without the lock that finds a journal reads only the recorded
  prefix, so it never sees a half-written entry either.

A file that does not end in :data:`TAIL` (edited by hand, say) but parses is
rewritten once in the canonical form; one that does not parse is moved aside,
its readable entries are kept, and the loss is reported.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterator, Literal, Optional

from pydantic import BaseModel, ConfigDict, ValidationError

from .atomic import atomic_write, atomic_write_json, fsync_dir, move_aside
from ..errors import CorruptFileError
from ..failpoints import armed, failpoint
from .manifest import Message, utc_now

HISTORY_NAME = "jobHistory.json"
JOURNAL_SUFFIX = ".append"
TAIL = b"\n  ]\n}\n"
ENTRY_INDENT = "    "


class RequestMetadata(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: str
    phase: str
    model: str
    temperature: Optional[float] = None
    max_tokens: Optional[int] = None


class Request(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prompt: list[Message]
    files_context: list[str] = []
    metadata: RequestMetadata


class Response(BaseModel):
    model_config = ConfigDict(extra="forbid")
    #: SUCCESS: a valid answer; INVALID: not JSON or against the schema;
    #: ERROR: the call failed (no answer).
    status: Literal["SUCCESS", "INVALID", "ERROR"]
    actions: list[str] = []
    evidence_files: list[str] = []
    summary_for_supervisor: Optional[str] = None
    raw_response: Optional[str] = None
    error: Optional[str] = None
    #: Workspace paths the answer's file changes wrote or deleted.
    files_changed: list[str] = []


class Usage(BaseModel):
    model_config = ConfigDict(extra="forbid")
    prompt_tokens: Optional[int] = None
    completion_tokens: Optional[int] = None
    cost_usd: Optional[float] = None


class CommandRecord(BaseModel):
    """A command the model asked for, and what became of it."""

    model_config = ConfigDict(extra="forbid")
    command: str
    #: run: executed; ask: held for a person; deny: refused by the policy.
    decision: Literal["run", "ask", "deny"]
    exit_code: Optional[int] = None
    timed_out: bool = False
    duration_seconds: float = 0.0
    #: The cleaned output exactly as the model is shown it.
    output: Optional[str] = None


class UserInput(BaseModel):
    model_config = ConfigDict(extra="forbid")
    action: str
    text: Optional[str] = None


class HistoryEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sequence: int
    timestamp: str
    #: llm_call: one call of the model (or one posted answer: ``job poststep``
    #: and ``job replay`` go through the same code); user_action: a person's
    #: command; compaction: a summary call (SPEC section 7); recovery: what
    #: Logist did to repair an interrupted command; rewind: a restep or rerun;
    #: limit: a budget or the step limit stopped the job before a call.
    kind: Literal["llm_call", "compaction", "user_action", "recovery", "rewind", "limit"]
    state_before: str
    state_after: str
    role: Optional[str] = None
    workspace_path: str
    request: Optional[Request] = None
    response: Optional[Response] = None
    usage: Optional[Usage] = None
    duration_seconds: float = 0.0
    workspace_commit: Optional[str] = None
    user_input: Optional[UserInput] = None
    command: Optional[CommandRecord] = None
    #: rewind entries: the sequence of the entry whose end state was restored.
    rewound_to: Optional[int] = None
    note: Optional[str] = None
    manifest_after: dict[str, Any]

    def dump(self) -> dict:
        return self.model_dump(mode="json")


class JobHistory(BaseModel):
    """The whole file, for readers; appends never build this."""

    model_config = ConfigDict(extra="forbid")
    job_id: str
    interactions: list[HistoryEntry]


def history_path(job_dir: Path) -> Path:
    return Path(job_dir) / HISTORY_NAME


def _journal_path(path: Path) -> Path:
    return path.with_name(path.name + JOURNAL_SUFFIX)


def _header(job_id: str) -> bytes:
    return ("{\n" + f'  "job_id": {json.dumps(job_id, ensure_ascii=False)},\n' + '  "interactions": [').encode("utf-8")


def _entry_bytes(entry: dict) -> bytes:
    text = json.dumps(entry, indent=2, ensure_ascii=False)
    return ("\n" + ENTRY_INDENT + text.replace("\n", "\n" + ENTRY_INDENT)).encode("utf-8")


def create_history(job_dir: Path, job_id: str) -> None:
    atomic_write(history_path(job_dir), _header(job_id) + TAIL)


def _write_canonical(path: Path, job_id: str, entries: list[dict]) -> None:
    body = b",".join(_entry_bytes(e) for e in entries)
    atomic_write(path, _header(job_id) + body + TAIL)


def repair(job_dir: Path) -> Optional[str]:
    """Finish or undo an interrupted append. Returns what was done, or None.

    Call with the job's lock held.
    """
    path = history_path(job_dir)
    journal = _journal_path(path)
    if not journal.exists():
        return None
    try:
        info = json.loads(journal.read_text(encoding="utf-8"))
        offset = int(info["offset"])
    except (OSError, ValueError, KeyError, TypeError):
        # The journal is written atomically, so this is not a crash of ours;
        # leave the file alone and let the parse decide.
        journal.unlink(missing_ok=True)
        return "discarded an unreadable append journal"
    with open(path, "r+b") as handle:
        handle.seek(offset)
        added = handle.read()
        complete = False
        if added.endswith(TAIL):
            fragment = added[: -len(TAIL)].lstrip(b",")
            try:
                json.loads(fragment)
                complete = True
            except ValueError:
                complete = False
        if not complete:
            handle.seek(offset)
            handle.write(TAIL)
            handle.truncate()
            handle.flush()
            os.fsync(handle.fileno())
    journal.unlink()
    fsync_dir(path.parent)
    return None if complete else "removed a half-written history entry left by an interrupted append"


def append_entry(job_dir: Path, entry: HistoryEntry) -> None:
    """Append one entry at a cost independent of the history's length.

    Call with the job's lock held.
    """
    path = history_path(job_dir)
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
            _normalise(job_dir)
            return append_entry(job_dir, entry)
        empty = before_and_tail[:1] == b"["
        chunk = (b"" if empty else b",") + _entry_bytes(entry.dump()) + TAIL
        atomic_write_json(_journal_path(path), {"offset": offset, "sequence": entry.sequence})
        handle.seek(offset)
        if armed("mid_history_append"):
            handle.write(chunk[: len(chunk) // 2])
            handle.flush()
            failpoint("mid_history_append")
        handle.write(chunk)
        handle.flush()
        os.fsync(handle.fileno())
    _journal_path(path).unlink()
    fsync_dir(path.parent)


def _read_committed_bytes(path: Path) -> bytes:
    """The file as of its last complete append (see module docstring)."""
    data = path.read_bytes()
    end, in_progress = _committed_end(path, len(data))
    return data[:end] + TAIL if in_progress else data


def load_history(job_dir: Path) -> JobHistory:
    path = history_path(job_dir)
    try:
        data = json.loads(_read_committed_bytes(path))
        return JobHistory.model_validate(data)
    except FileNotFoundError:
        raise
    except (ValueError, ValidationError) as exc:
        first = str(exc).strip().splitlines()[0]
        raise CorruptFileError(f"{path} is corrupt: {first}") from None


def iter_entries(job_dir: Path) -> Iterator[HistoryEntry]:
    yield from load_history(job_dir).interactions


def _committed_end(path: Path, size: int) -> tuple[int, bool]:
    """Where the last complete document's entries end, and whether an append
    is in progress (see module docstring). The document is the bytes up to
    that point followed by :data:`TAIL`."""
    journal = _journal_path(path)
    if journal.exists():
        try:
            return int(json.loads(journal.read_text(encoding="utf-8"))["offset"]), True
        except (OSError, ValueError, KeyError, TypeError):
            pass
    return size - len(TAIL), False


def last_entry(job_dir: Path) -> Optional[HistoryEntry]:
    """The last entry, reading only the end of the file.

    Entries are written with a fixed indent, so the last one starts at the
    last line that opens an object at that indent (a newline inside a JSON
    string is always escaped). The file is read backwards in blocks until
    that line is found, so the cost is the size of the last entry.
    """
    path = history_path(job_dir)
    marker = b"\n" + ENTRY_INDENT.encode() + b"{"
    with open(path, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        end, in_progress = _committed_end(path, size)
        if end > size:
            raise CorruptFileError(f"{path} is shorter than its append journal says")
        if not in_progress:  # the file must end in TAIL
            handle.seek(end)
            if handle.read(len(TAIL)) != TAIL:
                entries = load_history(job_dir).interactions
                return entries[-1] if entries else None
        block = 1 << 16
        start = end
        buffer = b""
        while True:
            start = max(0, start - block)
            handle.seek(start)
            buffer = handle.read(end - start)
            found = buffer.rfind(marker)
            if found >= 0 or start == 0:
                break
            block *= 2
    if found < 0:
        if buffer.rstrip().endswith(b"["):
            return None
        entries = load_history(job_dir).interactions
        return entries[-1] if entries else None
    try:
        return HistoryEntry.model_validate(json.loads(buffer[found:]))
    except (ValueError, ValidationError):
        raise CorruptFileError(f"{path} is corrupt: its last entry cannot be parsed") from None


def _normalise(job_dir: Path) -> None:
    """Rewrite a parseable history that lost its canonical layout."""
    path = history_path(job_dir)
    history = load_history(job_dir)
    _write_canonical(path, history.job_id, [e.dump() for e in history.interactions])


def salvage(job_dir: Path, job_id: str) -> tuple[Path, int]:
    """Move a corrupt history aside and keep the entries that still parse.

    Returns the path the damaged file was moved to and how many entries were
    kept. Nothing is deleted: the damaged file stays beside the new one.
    """
    path = history_path(job_dir)
    raw = path.read_bytes()
    kept: list[dict] = []
    decoder = json.JSONDecoder()
    text = raw.decode("utf-8", errors="replace")
    start = text.find("[")
    pos = start + 1 if start >= 0 else len(text)
    while pos < len(text):
        while pos < len(text) and text[pos] in " \t\r\n,":
            pos += 1
        if pos >= len(text) or text[pos] != "{":
            break
        try:
            obj, pos = decoder.raw_decode(text, pos)
            kept.append(HistoryEntry.model_validate(obj).dump())
        except (ValueError, ValidationError):
            break
    aside = move_aside(path, utc_now().replace(":", ""))
    _write_canonical(path, job_id, kept)
    return aside, len(kept)
