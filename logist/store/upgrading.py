"""Rewriting a job written in an older format in the current one.

What each format change is, and the functions that make it:
:mod:`logist.store.upgrade`. Here the files are rewritten: a format 1 job's
manifest and history together (the manifest's turn pointers come from the
history), a history of format 2 to 4 alone
(:func:`logist.store.history.upgrade_file`). The old files are kept beside
the new ones as ``*.v<format>``. ``logist job upgrade`` runs
:func:`upgrade_job`, and so does every command that changes a job, under
its lock, before it changes anything.
"""

from __future__ import annotations

import json
from typing import Optional

from .atomic import atomic_write_json, fsync_dir
from .history import HISTORY_FORMAT, file_format, format_in, upgrade_file, write_canonical
from .manifest import JobManifest
from .upgrade import keep_beside, upgrade_files


def upgrade_job(files: "JobFiles", head: Optional[bytes] = None) -> Optional[str]:
    """Rewrite a job's files in the current format: a format 1 job's
    manifest and history (:func:`upgrade_v1`), a history of format 2 to 4,
    or one whose header names the workspace's absolute path
    (:func:`logist.store.history.upgrade_file`). Returns what was done, or
    None when there was nothing to do. Call with the job's lock held.
    ``head``: the history's header as the caller read it
    (:func:`logist.store.history.read_head`; None: read here)."""
    if head is not None:
        return upgrade_v1(files, head) or upgrade_file(files, head)
    return upgrade_v1(files) or upgrade_file(files)


def upgrade_v1(files: "JobFiles", head: Optional[bytes] = None) -> Optional[str]:
    """Rewrite a format 1 job's manifest and history in the current
    formats, keeping the old files as ``job_manifest.json.v1`` and
    ``jobHistory.json.v1``. Returns what was done, or None when there was
    nothing to do. Call with the job's lock held."""
    hpath, mpath = files.history_path, files.manifest_path
    try:
        if (format_in(head) if head is not None else file_format(files)) >= 2:
            return None
    except FileNotFoundError:
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
        keep_beside(path, path.with_name(path.name + ".v1"))
    fsync_dir(files.dir)
    write_canonical(files, history["job_id"], history["interactions"])
    if manifest is not None:
        upgraded = JobManifest.model_validate(manifest)
        atomic_write_json(mpath, upgraded.dump())
        if not files.readme_path.exists():  # format 2 jobs explain their folder
            files.write_readme(upgraded.objective)
    return (f"upgraded the job's files from format 1 (now: manifest format 2, history format {HISTORY_FORMAT}; "
            f"the old ones are kept as {hpath.name}.v1 and {mpath.name}.v1)")
