"""What one process holds of one job while it works on it.

A process that runs a job (``job run``, a batch thread, a Ray actor) steps
it many times, taking and releasing the job's lock around each step so
that a person can act between any two. Each step rebuilds the turn's
conversation (its request repeats every earlier message of the turn), and
reading it back from the history at every round would cost time that grows
with the turn. The :class:`JobStore` of the process's
:class:`~logist.store.jobsdir.Job` holds it instead: the manifest while
the lock is held (:func:`logist.engine.session.open_locked` sets it), the
history's entries the process last read (its parsed tail) and the turn's
conversation as last sent, with the mark of the file they were read from
(:func:`logist.store.seek.file_mark`). When the file no longer holds that
mark (another process rewrote it, a repair cut an entry back), what was
kept is dropped and read afresh (a :class:`logist.store.requests.HistoryReader`
made with the store checks it).

Nothing here is shared between jobs or kept at module level: a lock-free
reader (``job status``, ``job list``, the views) has no store and reads the
files as they are.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional


class JobStore:
    """One job's files as this process last read them (see the module's doc)."""

    def __init__(self, job_dir: Path):
        self.dir = Path(job_dir)
        #: The job's manifest while this process holds its lock (None otherwise).
        self.manifest: Optional[Any] = None
        #: The history's entries last read, by number, as the file holds them (do not change them).
        self.entries: dict[int, dict] = {}
        #: The messages of the last request rebuilt: (its entry's number, the messages).
        self.conversation: Optional[tuple[int, list[dict]]] = None
        #: What the history was when the above were read (logist.store.seek.file_mark).
        self.mark: Optional[tuple] = None
        #: The lease this process runs the job under (logist.store.lease.Lease), if any:
        #: checked each time the job is opened under its lock.
        self.lease: Optional[Any] = None

    def forget(self) -> None:
        """Drop what was read of the history."""
        self.entries, self.conversation, self.mark = {}, None, None

    def __repr__(self) -> str:
        return f"JobStore({str(self.dir)!r})"
