"""Older formats of a job's files read as the current one, and rewritten.

A history's format is named in its header (``"format": N``; format 1 named
none). Each format is upgraded to the next by one function of
:data:`UPGRADES` (as simonw/llm's migrations are: a list, applied in order
from the file's own version), each taking the document as a file of its
format holds it and giving it as a file of the next holds it:

1 -> 2
    Format 1 kept the whole conversation in the manifest
    (``turn.messages``) and, in every history entry, the whole prompt and
    a copy of the whole manifest (``manifest_after``). Format 2 keeps what
    is new (:mod:`logist.store.entries`): every request is still rebuilt
    exactly (a prompt that extends an earlier call of the same role and
    that call's answer becomes ``continues`` + ``added``), every entry
    keeps the state after it, and the turn's messages become pointers to
    the entries that hold them.
2 -> 3
    Format 3 wrote ``state.turn.last_call`` and ``state.turn.pending`` only
    when the entry itself did not say them (and could name another entry's
    request metadata by number; the upgrade writes it out).
3 -> 4
    Format 4 writes every call entry self-contained, shaped as the reference Logist design's: the
    request metadata in full (role and phase too), ``files_context``, the
    response's status (``FAILED`` where the older formats said ``ERROR``),
    actions, evidence, summary and raw answer, ``workspace_path``
    (``"workspace"``), the turn's ``last_call`` and ``pending``. The
    absolute workspace path an older header (or entry) named goes into
    each command's ``cwd``, where a command records where it ran.
4 -> 5
    Format 5 takes a call's key (``Idempotency-Key``: :mod:`logist.store.calls`)
    over the body's bytes as sent; format 4 took it over the messages'
    roles and texts, framed. An entry leaves out a key its rebuilt body
    gives, so each format 4 entry with a request and no key of its own
    says which rule derives it (``request.metadata.key_format``: 4).

Readers upgrade in memory (:func:`upgrade_history_data`,
:func:`upgrade_manifest_data`); the first command that changes the job, or
``logist job upgrade``, rewrites the files
(:func:`logist.store.history.upgrade_file`,
:func:`logist.store.upgrading.upgrade_job`), keeping the old ones beside
them as ``*.v<format>``.

The context file moved out of the workspace: a job read
``<workspace>/.logist/context.md`` before every prompt, so a model could
rewrite what later system prompts say; it now reads ``<job>/context.md``,
copied when the job is created. A job made before reads the file as it was
in its baseline commit (:func:`context_at_start`), and the first command
that changes it writes that copy (:func:`move_context`).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path
from typing import Any, Callable, Optional

from .atomic import atomic_write
from .calls import FORMAT_4_KEYS
from .entries import FAILED, HistoryEntry
from ..errors import CorruptFileError, LogistError
from .manifest import JobDefinition, JobManifest, is_format_1, milliseconds, upgrade_manifest_data
from ..workspace.repository import Workspace

#: The history format this version of Logist writes, and its schema.
HISTORY_FORMAT = 5
HISTORY_SCHEMA = "job-history.v5.schema.json"

#: How many earlier calls of the same role are tried as the one a request continues.
_CANDIDATES = 50


def _key(messages: list) -> str:
    return json.dumps(messages, sort_keys=True, ensure_ascii=False)


class _Upgrader:
    def __init__(self) -> None:
        self.full: dict[int, list[dict]] = {}  # sequence -> messages sent
        self.answer: dict[int, str] = {}
        self.by_role: dict[str, list[int]] = {}
        self.root: dict[int, int] = {}  # sequence -> the entry with its prompt in full
        #: key of a turn's raw messages -> the call entry that completed them
        self.produced: dict[str, int] = {}

    def request(self, entry: dict) -> Optional[dict]:
        request = entry.get("request")
        if not request:
            return None
        sequence = entry["sequence"]
        prompt = [dict(m) for m in request.get("prompt") or []]
        out = {k: v for k, v in request.items() if k != "prompt"}
        role = (request.get("metadata") or {}).get("role") or entry.get("role") or ""
        base = None
        if entry.get("kind") == "llm_call":
            for candidate in reversed(self.by_role.get(role, [])[-_CANDIDATES:]):
                sent = self.full[candidate] + [{"role": "assistant", "content": self.answer[candidate]}]
                if len(sent) < len(prompt) and prompt[: len(sent)] == sent:
                    base = candidate, len(sent)
                    break
        if base is None:
            out = {"prompt": prompt, **out}
            self.root[sequence] = sequence
        else:
            out = {"continues": base[0], "added": prompt[base[1]:], **out}
            self.root[sequence] = self.root[base[0]]
        self.full[sequence] = prompt
        raw = (entry.get("response") or {}).get("raw_response")
        if entry.get("kind") == "llm_call" and raw is not None:
            self.answer[sequence] = raw
            self.by_role.setdefault(role, []).append(sequence)
        return out

    def pointers(self, entry: dict, manifest: dict) -> dict:
        """Turn pointers for a format 1 manifest copy, from the entries so far."""
        result = {}
        for name in ("turn", "planner_turn"):
            turn = manifest.get(name)
            if not turn:
                continue
            messages = turn.get("messages") or []
            if entry.get("kind") == "llm_call" and messages and _key(messages) not in self.produced:
                if messages[-1].get("role") == "assistant" and entry["sequence"] in self.answer:
                    self.produced[_key(messages)] = entry["sequence"]
            last = self.produced.get(_key(messages)) if messages else None
            first = self.produced.get(_key(messages[:2])) if messages else None
            root = self.root.get(last) if last is not None else None
            result[name] = {"last_call": last, "first_call": first, "prompt_call": root}
        return result


def _entry(entry: dict, upgrader: _Upgrader, first: bool) -> dict:
    out = dict(entry)
    if out.get("kind") == "recovery":
        out["kind"] = "repair"
    if "duration_seconds" in out:
        out["duration_ms"] = milliseconds(out.pop("duration_seconds"))
    if out.get("command") and "duration_seconds" in out["command"]:
        command = dict(out["command"])
        command["duration_ms"] = milliseconds(command.pop("duration_seconds"))
        out["command"] = command
    request = upgrader.request(entry)
    if request is not None:
        out["request"] = request
    after = out.pop("manifest_after", None) or {}
    manifest = JobManifest.model_validate(upgrade_manifest_data(after, upgrader.pointers(entry, after)))
    if first:
        out["definition"] = JobDefinition.model_validate(manifest.model_dump(include=set(JobDefinition.model_fields)))
    out["state"] = manifest.state_dump()
    return HistoryEntry.model_validate(out).dump()


def _v1_to_v2(data: dict) -> dict:
    return _v1_files(None, data)[1]


def _v1_files(manifest_data: Any, history_data: dict) -> tuple[Any, dict]:
    """A format 1 job's manifest and history in format 2; the manifest's
    turn pointers come from the history."""
    upgrader = _Upgrader()
    raw = history_data.get("interactions") or []
    entries = [_entry(e, upgrader, i == 0) for i, e in enumerate(raw)]
    # The first entry's workspace path goes to the header; an entry keeps its own only when it differs.
    workspace = entries[0].get("workspace_path") if entries else None
    for entry in entries:
        if entry.get("workspace_path") == workspace:
            entry.pop("workspace_path", None)
    pointers = upgrader.pointers({"kind": None, "sequence": None}, manifest_data) if is_format_1(manifest_data) else None
    history = {"$schema": "job-history.v2.schema.json", "format": 2, "job_id": history_data.get("job_id"),
               **({"workspace_path": workspace} if workspace else {}), "interactions": entries}
    return upgrade_manifest_data(manifest_data, pointers), history


def _turn_of(entry: dict) -> Optional[dict]:
    state = entry.get("state")
    return dict(state["turn"]) if isinstance(state, dict) and isinstance(state.get("turn"), dict) else None


def _output(entry: dict) -> Optional[str]:
    command = entry.get("command")
    return command.get("output") if isinstance(command, dict) else None


#: Format 2's flag for a pending message left out because it is the command's output.
_PENDING_FLAG = "pending_is_command_output"


def _v2_to_v3(data: dict) -> dict:
    """Format 3 left ``turn.last_call`` out when it is the entry's own
    sequence (``null`` when the turn had no call) and ``turn.pending``
    when it is ``command.output`` (``null`` when there was none), in place
    of format 2's flag."""
    entries = []
    for entry in data.get("interactions") or []:
        turn = _turn_of(entry) if isinstance(entry, dict) else None
        if turn is None:
            entries.append(entry)
            continue
        out = {k: v for k, v in entry.items() if k != _PENDING_FLAG}
        if "last_call" not in turn:
            turn["last_call"] = None
        elif turn["last_call"] == entry.get("sequence"):
            del turn["last_call"]
        if _output(entry) is not None and not entry.get(_PENDING_FLAG):
            if "pending" not in turn:
                turn["pending"] = None
            elif turn["pending"] == _output(entry):
                del turn["pending"]
        out["state"] = {**entry["state"], "turn": turn}
        entries.append(out)
    return {**data, "$schema": "job-history.v3.schema.json", "format": 3, "interactions": entries}


def _is_number(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _v3_entry(entry: dict, written: dict[int, dict]) -> dict:
    """A format 3 entry with what it left out put back: the request
    metadata it names by number (``written``: the metadata written out so
    far, by entry), the turn's ``last_call`` and ``pending``."""
    out = entry
    request = entry.get("request")
    if isinstance(request, dict):
        meta = request.get("metadata")
        if _is_number(meta):
            if meta not in written:
                raise CorruptFileError(f"a history entry takes its request's metadata from entry {meta}, "
                                       "which has none written out")
            out = {**entry, "request": {**request, "metadata": dict(written[meta])}}
        elif isinstance(meta, dict) and _is_number(entry.get("sequence")):
            written[entry["sequence"]] = meta
    turn = _turn_of(entry)
    if turn is not None:
        if "last_call" not in turn:
            turn["last_call"] = entry.get("sequence")
        elif turn["last_call"] is None:
            del turn["last_call"]
        if "pending" not in turn and _output(entry) is not None:
            turn["pending"] = _output(entry)
        elif "pending" in turn and turn["pending"] is None:
            del turn["pending"]
        out = {**out, "state": {**entry["state"], "turn": turn}}
    return out


def _v3_to_v4(data: dict) -> dict:
    created_in, written, entries = data.get("workspace_path"), {}, []
    for entry in data.get("interactions") or []:
        if not isinstance(entry, dict):
            continue
        entry = dict(_v3_entry(entry, written))
        where = entry.pop("workspace_path", None)
        where = where if isinstance(where, str) and os.path.isabs(where) else created_in
        command = entry.get("command")
        if where and isinstance(command, dict) and command.get("decision") == "run" and not command.get("cwd"):
            entry["command"] = {**command, "cwd": where}
        response = entry.get("response")
        if isinstance(response, dict) and response.get("status") == "ERROR":
            entry["response"] = {**response, "status": FAILED}
        entries.append(HistoryEntry.model_validate(entry).dump())
    return {"$schema": "job-history.v4.schema.json", "format": 4, "job_id": data.get("job_id"), "interactions": entries}


def _v4_to_v5(data: dict) -> dict:
    entries = []
    for entry in data.get("interactions") or []:
        request = entry.get("request") if isinstance(entry, dict) else None
        metadata = request.get("metadata") if isinstance(request, dict) else None
        if isinstance(metadata, dict) and not metadata.get("idempotency_key"):
            entry = {**entry, "request": {**request, "metadata": {**metadata, "key_format": FORMAT_4_KEYS}}}
        entries.append(entry)
    return {**data, "$schema": HISTORY_SCHEMA, "format": 5, "interactions": entries}


#: ``UPGRADES[n - 1]`` takes a history document of format n to format n + 1.
UPGRADES: list[Callable[[dict], dict]] = [_v1_to_v2, _v2_to_v3, _v3_to_v4, _v4_to_v5]
assert len(UPGRADES) == HISTORY_FORMAT - 1


def history_version(data: Any) -> int:
    """The format a history document is in (1: none named)."""
    found = data.get("format", 1) if isinstance(data, dict) else 1
    return found if _is_number(found) else 1


def upgrade_history_data(data: Any) -> Any:
    """A history document of any older format in the current one (the
    current format, a newer one or not a document: unchanged)."""
    if not isinstance(data, dict):
        return data
    for upgrade in UPGRADES[history_version(data) - 1:]:
        data = upgrade(data)
    return data


def upgrade_files(manifest_data: Any, history_data: Any) -> tuple[Any, Any]:
    """Both files of a job in the current format (a format 1 manifest's
    turn pointers come from the history)."""
    if not is_format_1(history_data):
        return upgrade_manifest_data(manifest_data), upgrade_history_data(history_data)
    manifest, history = _v1_files(manifest_data, history_data)
    return manifest, upgrade_history_data(history)


def keep_beside(path: Path, keep: Path) -> None:
    """A copy of ``path`` as ``keep`` (a hard link where it can), unless there is one."""
    if path.exists() and not keep.exists():
        try:
            os.link(path, keep)
        except OSError:
            shutil.copy2(path, keep)


#: Where a project keeps its context, in the workspace (read once, at the start).
WORKSPACE_CONTEXT = ".logist/context.md"


def context_at_start(files: "JobFiles", baseline: Optional[str]) -> Optional[str]:
    """A job without ``<job>/context.md``: its workspace's context file as it
    was in the job's baseline commit, or None. Costs a git process only when
    the workspace has that file now."""
    workspace = files.workspace
    if not baseline or not (workspace / WORKSPACE_CONTEXT).is_file():
        return None
    try:
        return Workspace(workspace).file_at(baseline, WORKSPACE_CONTEXT)
    except LogistError:  # not in the baseline: made later, by the model or by hand
        return None


def move_context(files: "JobFiles", baseline: Optional[str]) -> Optional[str]:
    """Write ``<job>/context.md`` for a job made before the context moved.
    Returns what was done, or None. Call with the job's lock held."""
    target = files.context_path
    if target.exists():
        return None
    text = context_at_start(files, baseline)
    if text is None:
        return None
    atomic_write(target, text)
    return f"copied the workspace's {WORKSPACE_CONTEXT} as it was at the job's start to {target.name}"
