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
up to date. It knows where it is from the *marker*, a Markdown comment
ending the file (invisible when rendered) that names the last entry it
holds and the little memory the next append needs (see
:mod:`logist.views.prompt_tracker`). So the usual update reads the marker
and the history's last entry, appends one block, and costs the size of that
entry, not of the job. A file that is behind by several entries gets them
appended; one that does not end in a marker (missing, cut by a crash,
edited by hand) or is ahead of the history is rebuilt whole from the
history: it is derived data, so that is always safe. :func:`rebuild` does
the same on demand (``logist job transcript JOB --rebuild``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Iterable, Optional

from ..failpoints import armed, failpoint
from ..store import history as hist
from ..store.atomic import atomic_write
from ..store.history import HistoryEntry, load_history
from .markdown import header, render_entry
from .prompt_tracker import PromptTracker

TRANSCRIPT_NAME = "transcript.md"
MARKER_PREFIX = "<!-- logist-transcript "
MARKER_SUFFIX = " -->\n"


def transcript_path(job_dir: Path) -> Path:
    return Path(job_dir) / TRANSCRIPT_NAME


def _marker(tracker: PromptTracker, sequence: int) -> str:
    return MARKER_PREFIX + json.dumps(tracker.state(sequence), separators=(",", ":")) + MARKER_SUFFIX


def _blocks(entries: Iterable[HistoryEntry], tracker: PromptTracker) -> str:
    """Each entry's block followed by the marker that ends the file after it."""
    return "".join("\n" + render_entry(e, tracker) + "\n" + _marker(tracker, e.sequence) for e in entries)


def render(entries: Iterable[HistoryEntry], job_id: str) -> str:
    """The whole transcript of ``entries``."""
    entries = list(entries)
    tracker = PromptTracker()
    if not entries:
        return header(job_id, None) + "\n" + _marker(tracker, 0)
    return header(job_id, entries[0].definition.objective if entries[0].definition else None) + _blocks(entries, tracker)


def read_marker(path: Path) -> Optional[dict]:
    """The marker ending the file, or None when the file does not end in one."""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            start = max(0, size - 8192)
            handle.seek(start)
            tail = handle.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return None
    if not tail.endswith(MARKER_SUFFIX):
        return None
    at = tail.rfind(MARKER_PREFIX)
    if at < 0:
        return None
    try:
        state = json.loads(tail[at + len(MARKER_PREFIX) : -len(MARKER_SUFFIX)])
    except ValueError:
        return None
    return state if isinstance(state, dict) and isinstance(state.get("seq"), int) else None


def rebuild(job_dir: Path) -> Path:
    """Write the transcript afresh from ``jobHistory.json``; returns its path.

    Call with the views' lock held (:func:`logist.views.views_lock`).
    """
    history = load_history(job_dir)
    path = transcript_path(job_dir)
    # errors="replace": a lone surrogate from a model must not make every
    # later update fail and rebuild again.
    atomic_write(path, render(history.interactions, history.job_id).encode("utf-8", errors="replace"))
    return path


def _append(path: Path, entries: list[HistoryEntry], state: dict) -> None:
    data = _blocks(entries, PromptTracker.from_state(state))
    with open(path, "a", encoding="utf-8", errors="replace") as handle:
        if armed("mid_transcript"):
            handle.write(data[: len(data) // 2])
            handle.flush()
            failpoint("mid_transcript")
        handle.write(data)


def update(job_dir: Path) -> str:
    """Bring the transcript up to the history's last entry; says what it did
    ("current", "appended" or "rebuilt"). Call with the views' lock held.

    Costs the new entries only, unless the file must be rebuilt (see the
    module docstring).
    """
    path = transcript_path(job_dir)
    if path.exists() and not path.is_file():
        raise OSError(f"{path} is not a file")  # before paying for a rebuild that cannot be written
    last = hist.last_entry(job_dir)
    last_sequence = last.sequence if last is not None else 0
    state = read_marker(path)
    if state is not None and state["seq"] == last_sequence:
        return "current"
    if state is None or state["seq"] > last_sequence or last is None:
        rebuild(job_dir)
        return "rebuilt"
    if state["seq"] == last_sequence - 1:
        missing = [last]
    else:  # several commands' entries, or a recovery and a step: rare, so read the history
        missing = [e for e in load_history(job_dir).interactions if e.sequence > state["seq"]]
        if [e.sequence for e in missing] != list(range(state["seq"] + 1, last_sequence + 1)):
            rebuild(job_dir)
            return "rebuilt"
    _append(path, missing, state)
    return "appended"


def is_current(job_dir: Path, last_sequence: int) -> bool:
    """Whether the transcript ends with entry ``last_sequence``."""
    state = read_marker(transcript_path(job_dir))
    return state is not None and state["seq"] == last_sequence
