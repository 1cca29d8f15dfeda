"""What a format 3 ``jobHistory.json`` entry leaves out, and putting it back.

An entry in memory (:meth:`~logist.store.entries.HistoryEntry.dump`, what
every reader gets) is the same whatever the file's format. Format 3 writes
three things of it shorter, each unambiguous from the entry itself or from
one entry it names:

* ``request.metadata`` of a request that continues an earlier one with the
  same model and parameters is the number of the entry that holds them in
  full (``"metadata": 2``: as entry 2's). The number always names an entry
  whose metadata is written out, so a reader looks up one entry. A call
  made with another model or other parameters (a role's model edited
  between two steps, say) writes its metadata in full, and later calls of
  the turn name that entry.
* ``state.turn.last_call`` is left out when it is the entry's own
  ``sequence`` (a round of the turn); when the turn has no call yet it is
  written as ``null``.
* ``state.turn.pending`` is left out when it is the entry's
  ``command.output`` (a command's output is the next message the model is
  sent; format 2 said so with ``"pending_is_command_output": true``); when
  the entry has an output but no pending message it is written as ``null``.

A format 2 entry is read as it is (it writes all three out).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Iterable, Iterator, Optional

from ..errors import CorruptFileError

#: Format 2's flag for a pending message left out because it is the command's output.
PENDING_FLAG = "pending_is_command_output"


def _output(entry: dict) -> Optional[str]:
    command = entry.get("command")
    return command.get("output") if isinstance(command, dict) else None


def to_file(entry: dict) -> dict:
    """An entry in memory as format 3 writes it (its metadata in full)."""
    state, turn = entry.get("state"), None
    if isinstance(state, dict) and isinstance(state.get("turn"), dict):
        turn = dict(state["turn"])
    if turn is None:
        return entry
    out = {k: v for k, v in entry.items() if k != PENDING_FLAG}
    if "last_call" not in turn:
        turn["last_call"] = None
    elif turn["last_call"] == entry.get("sequence"):
        del turn["last_call"]
    if _output(entry) is not None and not entry.get(PENDING_FLAG):
        if "pending" not in turn:
            turn["pending"] = None
        elif turn["pending"] == _output(entry):
            del turn["pending"]
    out["state"] = {**state, "turn": turn}
    return out


def from_file(entry: dict, metadata_of: Callable[[int], dict]) -> dict:
    """A format 3 entry as read: what :func:`to_file` and
    :func:`refer_metadata` left out put back. ``metadata_of(n)`` is entry
    n's ``request.metadata`` as written (in full)."""
    out = entry
    request = entry.get("request")
    if isinstance(request, dict) and _is_number(request.get("metadata")):
        out = {**entry, "request": {**request, "metadata": dict(metadata_of(request["metadata"]))}}
    state = entry.get("state")
    if isinstance(state, dict) and isinstance(state.get("turn"), dict):
        turn = dict(state["turn"])
        if "last_call" not in turn:
            turn["last_call"] = entry.get("sequence")
        elif turn["last_call"] is None:
            del turn["last_call"]
        flag = False
        if "pending" not in turn and _output(entry) is not None:
            flag = True
        elif "pending" in turn and turn["pending"] is None:
            del turn["pending"]
        out = {**out, "state": {**state, "turn": turn}}
        if flag:
            out[PENDING_FLAG] = True
    return out


def _is_number(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class Sources:
    """Full metadata by entry number, of the entries read so far (only those
    that write it out: about one per turn); ``fetch(n)`` reads entry n from
    the file when it was not seen."""

    def __init__(self, fetch: Optional[Callable[[int], Optional[dict]]] = None):
        self.fetch = fetch
        self.known: dict[int, dict] = {}

    def see(self, entry: dict) -> None:
        meta = (entry.get("request") or {}).get("metadata") if isinstance(entry.get("request"), dict) else None
        if isinstance(meta, dict) and isinstance(entry.get("sequence"), int):
            self.known[entry["sequence"]] = meta

    def __call__(self, number: int) -> dict:
        if number not in self.known and self.fetch is not None:
            found = self.fetch(number)
            if found is not None:
                self.see(found)
        meta = self.known.get(number)
        if not isinstance(meta, dict):
            raise CorruptFileError(f"a history entry takes its request's metadata from entry {number}, "
                                   "which has none written out")
        return meta


def read_all(entries: Iterable[dict], sources: Sources) -> Iterator[dict]:
    """Format 3 entries, in file order, as read."""
    for entry in entries:
        sources.see(entry)
        yield from_file(entry, sources)


def refer_metadata(entry: dict, written_of: Callable[[int], Optional[dict]]) -> dict:
    """A format 3 entry (from :func:`to_file`) with its metadata named by
    number when it continues an entry made with the same: ``written_of(n)``
    is entry n as the file holds it (None: not there)."""
    request = entry.get("request")
    if not isinstance(request, dict) or not isinstance(request.get("metadata"), dict) or \
            not _is_number(request.get("continues")):
        return entry
    continued = written_of(request["continues"])
    if continued is None:
        return entry
    source, meta = continued.get("sequence"), (continued.get("request") or {}).get("metadata")
    if _is_number(meta):
        source = meta
        meta = ((written_of(source) or {}).get("request") or {}).get("metadata")
    if not isinstance(meta, dict) or meta != request["metadata"] or not _is_number(source):
        return entry
    return {**entry, "request": {**request, "metadata": source}}


def refer_all(entries: Iterable[dict]) -> Iterator[dict]:
    """Entries in memory, in file order, as format 3 writes them."""
    written: dict[int, dict] = {}
    for entry in entries:
        out = refer_metadata(to_file(entry), written.get)
        if isinstance(out.get("sequence"), int):
            # Only what a later entry may look up: the request's metadata.
            written[out["sequence"]] = {"sequence": out["sequence"], "request": {"metadata": (out.get("request") or {}).get("metadata")}}
        yield out


class _Written:
    """Per process and file: ``request.metadata`` as written of the entries
    last appended and of those they name, so that naming the metadata of
    the entry a call continues (:func:`logist.store.forms.refer_metadata`)
    usually reads nothing (else it reads one or two entries by number)."""

    def __init__(self, job_dir: Path, identity: tuple[int, int], size: int, known: dict):
        self.job_dir, self.identity, self.size, self.known = job_dir, identity, size, known

    def lookup(self, number: int) -> Optional[dict]:
        if number not in self.known:
            from .seek import read_entries

            found = read_entries(self.job_dir, {number}, raw=True).get(number)
            if found is None:
                return None
            request = found.get("request")
            self.known[number] = request.get("metadata") if isinstance(request, dict) else None
        return {"sequence": number, "request": {"metadata": self.known[number]}}

    def remember(self, data: dict, size: int) -> None:
        request = data.get("request")
        meta = request.get("metadata") if isinstance(request, dict) else None
        # The next call continues this entry: keep it and the entry it names.
        keep = {data["sequence"]: meta}
        if _is_number(meta) and meta in self.known:
            keep[meta] = self.known[meta]
        self.known = keep
        _WRITTEN[str(self.job_dir)] = (self.identity, size, self.known)
        while len(_WRITTEN) > 8:
            _WRITTEN.pop(next(iter(_WRITTEN)))


_WRITTEN: dict[str, tuple[tuple[int, int], int, dict]] = {}


def written_metadata(job_dir: Path, handle, size: int, tail: int) -> _Written:
    """What an append to the open history ``handle`` (its entries end at ``size``, followed by ``tail``
    closing bytes: logist.store.history.TAIL) knows of the metadata written."""
    info = os.fstat(handle.fileno())
    identity = (info.st_dev, info.st_ino)
    cached = _WRITTEN.pop(str(Path(job_dir)), None)
    # The file only grows in place; a shorter one was cut back (an append undone), a new inode rewritten.
    known = dict(cached[2]) if cached and cached[0] == identity and cached[1] <= size + tail else {}
    return _Written(Path(job_dir), identity, size, known)
