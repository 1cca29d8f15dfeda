"""Changing a job: lock, repair, (the caller decides and records), unlock, refresh the views.

Every entry point that changes a job (a step, a person's action, a rewind,
the queue's check of each job) does the same things around its own work:
take the job's lock, open its session (:meth:`logist.store.session.JobSession.open`:
:mod:`logist.store.recovery` repairs
whatever an interrupted command left (recording what it did; a call an
interrupted step made is recorded as the call it was, by
:func:`logist.engine.call.finish_interrupted`), hand the
session (its manifest set) to the caller, release the lock, and only then bring the views
(``transcript.md``) up to date. :func:`open_locked` is that sequence, so it
is written once and the order cannot differ between commands.

The views come last and outside the lock on purpose: they are derived from
the history, so writing them is not part of recording a step. A crash or a
failure while they are written cannot lose or undo anything, and a person's
command waiting for the lock does not wait for them.
"""

from __future__ import annotations

from contextlib import contextmanager
from typing import Iterator, Optional

from ..views.refresh import refresh
from ..store import lease as leases
from ..errors import MovedOnError
from ..store.session import JobFiles, JobSession
from .call import finish_interrupted


@contextmanager
def open_locked(job: JobFiles, timeout: float = 0, at: Optional[int] = None) -> Iterator[JobSession]:
    """Hold ``job``'s lock with the job repaired; yields the
    :class:`~logist.store.session.JobSession`, its :attr:`manifest` set.

    ``at``: the history entry the caller decided on (a page's form carries
    the one it was shown for); if the job has recorded another since,
    :class:`~logist.errors.MovedOnError` and nothing is done. Checked under
    the lock, so no step can land between the check and the caller's entry.

    Once the job is open, the views are refreshed after the lock is
    released, whether the body recorded anything, returned early or raised
    (recovery alone may have recorded an entry). A job that is busy or
    cannot be opened is left alone: nothing was recorded.
    """
    session = job.session
    opened = False
    try:
        with job.lock(timeout):
            if session.lease is not None and not session.lease.held():
                # Taken over while this runner stalled past its expiry: the new holder
                # runs the job now, and this runner takes no step of it, not even a repair.
                holder = job.read_lease() or {}
                raise leases.LeaseLost(f"job '{job.id}': its lease was taken over by {leases.describe(holder)} "
                                       "while this runner was stalled; this runner stops")
            try:
                session.open(finish_interrupted(job))
                opened = True
                manifest = session.manifest
                if at is not None and manifest.last_sequence != at:
                    raise MovedOnError(
                        f"job '{job.id}' has moved on: it is at entry {manifest.last_sequence}, "
                        f"not {at}, and {manifest.status} now"
                    )
                yield session
            finally:
                session.close()
    finally:
        if opened:
            refresh(job)


def upgrade(job: JobFiles, timeout: float = 0) -> Optional[str]:
    """Rewrite a job written in an older format in the current one (the
    old files are kept beside it); what was done, or None when the job is
    current. ``job upgrade`` runs this; any command that changes a job does
    it too, through :func:`open_locked`."""
    if not job.needs_upgrade():
        return None
    with job.lock(timeout):
        return job.session.upgrade()
