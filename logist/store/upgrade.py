"""Upgrading job files from format 1 to format 2 (and a history to format 3), and to relative paths.

A format 2 history written before paths in job files were relative names
the absolute workspace path in its header; :func:`relative_paths` rewrites
it without (each command keeps where it ran, ``command.cwd``).

Format 1 (files without a ``format`` field) kept the whole conversation in
the manifest (``turn.messages``) and, in every history entry, the whole
prompt and a copy of the whole manifest (``manifest_after``). Format 2 keeps
what is new (:mod:`logist.store.entries`). The upgrade loses nothing the job
needs: every request is still rebuilt exactly (a prompt that extends an
earlier call of the same role and that call's answer becomes ``continues`` +
``added``), every entry keeps the state after it, and the turn's messages
become pointers to the entries that hold them.

Readers upgrade in memory (:func:`upgrade_history_data`,
:func:`upgrade_manifest_data`); the first command that changes the job, or
``logist job upgrade``, rewrites the files (:func:`upgrade_job`), keeping the
format 1 files beside them as ``*.v1``.

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
from typing import Any, Optional

from .atomic import atomic_write, atomic_write_json, fsync_dir

#: How many earlier calls of the same role are tried as the one a request continues.
_CANDIDATES = 50


def _v1(data: Any) -> bool:
    return isinstance(data, dict) and "format" not in data


def _turn(turn: Optional[dict], pointers: Optional[dict] = None) -> Optional[dict]:
    if turn is None:
        return None
    turn = dict(turn)
    messages = turn.pop("messages", []) or []
    turn["rounds"] = len(messages) // 2
    turn.update(pointers or {})
    return turn


def _ms(seconds: Any) -> int:
    return int(round(float(seconds or 0) * 1000))


def upgrade_manifest_data(data: Any, pointers: Optional[dict] = None) -> Any:
    """A format 1 manifest as format 2 (anything else unchanged).

    ``pointers`` maps "turn" and "planner_turn" to the history pointers of
    their conversations, which only the history can tell.
    """
    if not _v1(data):
        return data
    from .manifest import MANIFEST_FORMAT, MANIFEST_SCHEMA

    pointers = pointers or {}
    out = {"$schema": MANIFEST_SCHEMA, "format": MANIFEST_FORMAT, **data}
    if "steps" in out:
        out["calls"] = out.pop("steps")
    totals = dict(out.get("totals") or {})
    if "wall_seconds" in totals:
        totals["wall_ms"] = _ms(totals.pop("wall_seconds"))
    out["totals"] = totals
    out["turn"] = _turn(out.get("turn") or {}, pointers.get("turn"))
    out["planner_turn"] = _turn(out.get("planner_turn"), pointers.get("planner_turn"))
    return out


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
    from .entries import HistoryEntry
    from .manifest import JobDefinition, JobManifest

    out = dict(entry)
    if out.get("kind") == "recovery":
        out["kind"] = "repair"
    if "duration_seconds" in out:
        out["duration_ms"] = _ms(out.pop("duration_seconds"))
    if out.get("command") and "duration_seconds" in out["command"]:
        command = dict(out["command"])
        command["duration_ms"] = _ms(command.pop("duration_seconds"))
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


def upgrade_history_data(data: Any) -> Any:
    """A history document of any format with its entries as in memory: a
    format 1 one upgraded, a format 3 one with what its entries leave out
    put back (:mod:`logist.store.forms`; format 2 writes it all out)."""
    if isinstance(data, dict) and isinstance(data.get("format"), int) and data["format"] >= 3 \
            and isinstance(data.get("interactions"), list):
        from .forms import Sources, read_all

        entries = [e for e in data["interactions"] if isinstance(e, dict)]
        return {**data, "interactions": list(read_all(entries, Sources()))}
    return upgrade_files(None, data)[1]


def upgrade_files(manifest_data: Any, history_data: Any) -> tuple[Any, Any]:
    """Both files of a job in format 2; the manifest's turn pointers come
    from the history."""
    if not _v1(history_data):
        return upgrade_manifest_data(manifest_data), history_data
    from .history import HISTORY_FORMAT, HISTORY_SCHEMA

    upgrader = _Upgrader()
    raw = history_data.get("interactions") or []
    entries = [_entry(e, upgrader, i == 0) for i, e in enumerate(raw)]
    # The first entry's workspace path goes to the header; an entry keeps its own only when it differs.
    workspace = entries[0].get("workspace_path") if entries else None
    for entry in entries:
        if entry.get("workspace_path") == workspace:
            entry.pop("workspace_path", None)
    pointers = upgrader.pointers({"kind": None, "sequence": None}, manifest_data) if _v1(manifest_data) else None
    history = {"$schema": HISTORY_SCHEMA, "format": HISTORY_FORMAT, "job_id": history_data.get("job_id"),
               **({"workspace_path": workspace} if workspace else {}), "interactions": entries}
    return upgrade_manifest_data(manifest_data, pointers), history


def upgrade_job(job_dir: Path) -> Optional[str]:
    """Rewrite a job's files in the current form: a format 1 job in format
    2 (:func:`upgrade_v1`), then a history that names absolute paths with
    none (:func:`relative_paths`). Returns what was done, or None when
    there was nothing to do. Call with the job's lock held."""
    done = [what for what in (upgrade_v1(job_dir), upgrade_v2(job_dir), relative_paths(job_dir)) if what]
    return "; ".join(done) or None


def relative_paths(job_dir: Path) -> Optional[str]:
    """Rewrite a history whose header names the absolute workspace path
    (files written before paths in job files were relative to the job's
    folder) without it: the workspace is always the job's ``workspace/``.
    Nothing is lost: the path where each command ran (the header's, or the
    entry's own ``workspace_path`` where the job had moved) goes into that
    entry's ``command.cwd``, where a replay looks for it. Returns what was
    done, or None. Call with the job's lock held."""
    from .history import load_history, history_path, recorded_workspace, write_canonical

    job_dir = Path(job_dir)
    created_in = recorded_workspace(job_dir)
    if created_in is None:
        return None
    history = load_history(job_dir)
    entries = []
    for entry in history.interactions:
        data = entry.dump()
        where = data.pop("workspace_path", None) or created_in
        command = data.get("command")
        if isinstance(command, dict) and command.get("decision") == "run" and not command.get("cwd"):
            command["cwd"] = where
        entries.append(data)
    write_canonical(history_path(job_dir), history.job_id, entries)
    return "the history no longer names the workspace's absolute path (each command keeps where it ran)"


def upgrade_v2(job_dir: Path) -> Optional[str]:
    """Rewrite a format 2 history in format 3 (:mod:`logist.store.forms`),
    keeping the old file as ``jobHistory.json.v2``. Every entry reads the
    same before and after. Returns what was done, or None when there was
    nothing to do. Call with the job's lock held."""
    from .history import HISTORY_FORMAT, file_format, history_path, load_history, write_canonical

    job_dir = Path(job_dir)
    hpath = history_path(job_dir)
    if not hpath.exists() or file_format(job_dir) != 2 or HISTORY_FORMAT < 3:
        return None
    from ..errors import CorruptFileError

    try:
        history = load_history(job_dir)
    except CorruptFileError:  # a damaged history: recovery salvages it (in the current format)
        return None
    _keep(hpath, hpath.with_name(hpath.name + ".v2"))
    fsync_dir(job_dir)
    write_canonical(hpath, history.job_id, [e.dump() for e in history.interactions], history.workspace_path)
    return f"upgraded the history from format 2 to format {HISTORY_FORMAT} (the old file is kept as {hpath.name}.v2)"


def _keep(path: Path, keep: Path) -> None:
    """A copy of ``path`` as ``keep`` (a hard link where it can), unless there is one."""
    if path.exists() and not keep.exists():
        try:
            os.link(path, keep)
        except OSError:
            shutil.copy2(path, keep)


def upgrade_v1(job_dir: Path) -> Optional[str]:
    """Rewrite a format 1 job's manifest and history in format 2, keeping the
    old files as ``job_manifest.json.v1`` and ``jobHistory.json.v1``.
    Returns what was done, or None when there was nothing to do. Call with
    the job's lock held."""
    from .history import file_format, history_path, write_canonical
    from .manifest import JobManifest, manifest_path

    job_dir = Path(job_dir)
    hpath, mpath = history_path(job_dir), manifest_path(job_dir)
    if not hpath.exists() or file_format(job_dir) >= 2:
        return None
    try:
        history_data = json.loads(hpath.read_bytes())
    except (ValueError, RecursionError):  # not a format 1 history but a damaged one: recovery salvages it
        return None
    if not isinstance(history_data, dict):
        return None
    try:
        manifest_data = json.loads(mpath.read_bytes()) if mpath.exists() else None
    except (ValueError, RecursionError):  # rebuilt from the history by recovery
        manifest_data = None
    manifest, history = upgrade_files(manifest_data, history_data)
    for path in (hpath, mpath):
        _keep(path, path.with_name(path.name + ".v1"))
    fsync_dir(job_dir)
    write_canonical(hpath, history["job_id"], history["interactions"], history.get("workspace_path"))
    if manifest is not None:
        upgraded = JobManifest.model_validate(manifest)
        atomic_write_json(mpath, upgraded.dump())
        from .layout import README_NAME, write_readme

        if not (job_dir / README_NAME).exists():  # format 2 jobs explain their folder
            write_readme(job_dir, upgraded.job_id, upgraded.objective)
    from .history import HISTORY_FORMAT

    return (f"upgraded the job's files from format 1 (now: manifest format 2, history format {HISTORY_FORMAT}; "
            f"the old ones are kept as {hpath.name}.v1 and {mpath.name}.v1)")


CONTEXT_NAME = "context.md"
#: Where a project keeps its context, in the workspace (read once, at the start).
WORKSPACE_CONTEXT = ".logist/context.md"


def context_at_start(job_dir: Path, baseline: Optional[str]) -> Optional[str]:
    """A job without ``<job>/context.md``: its workspace's context file as it
    was in the job's baseline commit, or None. Costs a git process only when
    the workspace has that file now."""
    workspace = Path(job_dir) / "workspace"
    if not baseline or not (workspace / WORKSPACE_CONTEXT).is_file():
        return None
    from ..errors import LogistError
    from ..workspace import Workspace

    try:
        return Workspace(workspace).file_at(baseline, WORKSPACE_CONTEXT)
    except LogistError:  # not in the baseline: made later, by the model or by hand
        return None


def move_context(job_dir: Path, baseline: Optional[str]) -> Optional[str]:
    """Write ``<job>/context.md`` for a job made before the context moved.
    Returns what was done, or None. Call with the job's lock held."""
    target = Path(job_dir) / CONTEXT_NAME
    if target.exists():
        return None
    text = context_at_start(job_dir, baseline)
    if text is None:
        return None
    atomic_write(target, text)
    return f"copied the workspace's {WORKSPACE_CONTEXT} as it was at the job's start to {CONTEXT_NAME}"
