"""A job's lease: which runner owns the job for the length of a run.

A job's lock (``.lock``) is held for one step at a time, so that a person
can act between any two steps. A batch (``job run --all``) needs more: once
a runner has started a job, another runner on the same jobs directory (a
second ``run --all``, a retried Ray task) must leave it alone until the
first is done with it, not step it in turns with it. That is the lease:
``lease.json`` in the job's folder, written when a runner takes the job and
removed when it is done::

    {"host": "node-3", "pid": 4121, "started": "81234", "engine": "ray", "task": "c2f1...",
     "token": "6f0e...", "acquired_at": "...", "expires_at": "..."}

The runner renews it (a thread, every third of :data:`LEASE_SECONDS`) for as
long as it runs the job. Another runner that finds a live lease skips the
job and says who holds it. A lease is over when it is past ``expires_at``
(the runner's host died or hung), or at once when it names this host and a
process that is not running: gone, a zombie (killed, not yet reaped by its
parent: Ray's retry can come that early), or a later process given the same
id (the lease records when its process started); then the next runner
takes it over and the job's own recovery repairs whatever the dead runner
left half done.

Every read-decide-write of the lease happens under ``.lease.lock`` (a file
lock, like ``.lock``, held only for that moment) and the new lease replaces
the old by an atomic rename, so two runners can never both take a job. It
is not the job's own lock on purpose: that one is held for the whole of a
step, model call included, and a runner looking for work must not wait
out another's call. A runner stopped (SIGSTOP) in the moment it holds
``.lease.lock`` would keep every other runner from its lease for as long as
it is stopped: the lock of a stopped process of this host is broken instead
(:func:`logist.store.locks.hold_breakable_lock`), and the stopped runner, let
go on, sees that before it writes and reads the lease again, under the lock
as it is now. (What is left: a runner stopped in the instant between that
check and its rename, and its lock broken meanwhile, writes once more when
let go on; the new holder then finds its lease gone the next time it
renews it or opens the job, and stops, so the job is still stepped by one
runner at a time.)

On a shared filesystem (NFS, EFS) this needs what the job's lock needs:
``flock`` honoured across hosts (NFSv4, or v3 with lockd; never mounted with
``nolock`` or ``local_lock=flock``/``all``), renames atomic, close-to-open
consistency (the default; not ``nocto``), and clocks in step (NTP): expiry
is wall time, compared on each host. A lease that ends further ahead than
its own length (plus :data:`CLOCK_SLACK`) was written by a clock ahead of
the reader's; it is over, not honoured for as long as that clock is ahead.

A runner that takes over a lapsed lease whose holder is alive but stalled
(stopped, or on a slow clock) may find the job's lock still held by that
holder's step: it waits for that step (however long the holder is stalled:
its answer may be paid) rather than give up, and the stalled holder, once
it goes on, finds its lease taken and stops, naming the runner that has the
job now. A stopped process of this host (SIGSTOP) renews nothing: its lease
is watched until it lapses, as another host's that is not renewed is.

The length is config.json's ``lease_seconds`` (:data:`LEASE_SECONDS` by
default, :data:`MIN_LEASE_SECONDS` at least); a reader takes the length a
lease was written with from the lease itself.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterator, Optional

from ..errors import LogistError
from ..workspace.sandbox import running, start_time, stopped
from .atomic import atomic_writer, dump_json
from .locks import BreakableLock, hold_breakable_lock

#: How long a lease lasts unless renewed (config.json's ``lease_seconds``); renewed every third of it.
LEASE_SECONDS = 60.0
#: The shortest lease config.json may ask for: renewed every third of it, a renewal
#: must reach the file before it lapses even on a loaded machine.
MIN_LEASE_SECONDS = 2.0
#: How long a runner waits for ``.lease.lock`` (held only while a lease is read and replaced).
LOCK_WAIT = 30.0
#: How far apart two hosts' clocks may be and their leases still be read as written (seconds).
CLOCK_SLACK = 5.0
#: How long after a watched lease's expiry it is read again (seconds): it is over once past its expiry.
LOOK_AFTER_EXPIRY = 0.05
#: The longest a watched lease goes unread (seconds): one of this host whose process is gone is over at once.
WATCH_INTERVAL = 1.0


class _LockBroken(Exception):
    """The lease's lock was broken while this process held it (it was stopped): read again."""


@contextmanager
def _lease_lock(files: "JobFiles") -> Iterator[BreakableLock]:
    with hold_breakable_lock(files.lease_lock_path, "the job's lease", LOCK_WAIT) as lock:
        yield lock


def _write(lock: BreakableLock, path: Path, data: dict) -> None:
    """Replace the lease with ``data`` under ``lock``, unless the lock was
    broken meanwhile (:class:`_LockBroken`: nothing written)."""
    with atomic_writer(path) as handle:
        handle.write(dump_json(data).encode("utf-8"))
        if not lock.intact():
            raise _LockBroken


class LeaseHeld(LogistError):
    """Another runner holds the job's lease: the job is skipped, not failed."""


class LeaseLost(LogistError):
    """This runner's lease was taken over (it stalled past its expiry): it
    takes no further step of the job."""


def _now() -> datetime:
    return datetime.now(timezone.utc)


def _stamp(moment: datetime) -> str:
    return moment.isoformat(timespec="milliseconds")


def this_host() -> str:
    return socket.gethostname()


def read_lease(files: "JobFiles") -> Optional[dict]:
    """The job's lease as written, or None when there is none (or it cannot
    be read: a lease that cannot be read protects nothing)."""
    try:
        data = json.loads(files.lease_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def expiry(data: dict) -> Optional[datetime]:
    """When lease ``data`` expires, or None when it names no valid expiry."""
    try:
        expires = datetime.fromisoformat(str(data.get("expires_at")))
    except ValueError:
        return None
    return expires if expires.tzinfo is not None else None


def over(data: dict, now: Optional[datetime] = None) -> Optional[str]:
    """Why lease ``data`` is over (it may be taken over), or None while it is live."""
    now = now or _now()
    expires = expiry(data)
    if expires is None:
        return "it names no valid expiry"
    if expires <= now:
        return f"it expired at {data.get('expires_at')}"
    pid, started = data.get("pid"), data.get("started")
    if data.get("host") == this_host() and isinstance(pid, int):
        if not running(pid):
            return f"its process {pid} on this host is gone"
        if isinstance(started, str) and not running(pid, started):
            return f"its process {pid} on this host is gone (the id now names a process started later)"
    if expires > now + timedelta(seconds=_length(data) + CLOCK_SLACK):
        # Renewed leases end at most one lease length ahead: this one was
        # written by a clock that is ahead (or by hand), and would hold the job
        # for as long as that clock is ahead.
        return f"it expires at {data.get('expires_at')}, further ahead than one lease length (a clock ahead of this one's)"
    return None


def _length(data: dict) -> float:
    """The lease length ``data`` was written with (its expiry less its last
    renewal), else :data:`LEASE_SECONDS`; never less than a second."""
    try:
        written = datetime.fromisoformat(str(data.get("renewed_at") or data.get("acquired_at")))
        length = (datetime.fromisoformat(str(data.get("expires_at"))) - written).total_seconds()
    except (ValueError, TypeError):
        return LEASE_SECONDS
    return max(1.0, length) if length > 0 else LEASE_SECONDS


def next_look(data: dict, now: Optional[datetime] = None) -> float:
    """How long to wait (seconds) before reading lease ``data`` again while
    watching it: until just past its expiry, so it is taken over as it
    lapses, not up to a period later; a third of its length at most, so a
    renewal is seen as soon as a live runner makes it."""
    now = now or _now()
    expires = expiry(data)
    until = (expires - now).total_seconds() + LOOK_AFTER_EXPIRY if expires is not None else 0.0
    return max(LOOK_AFTER_EXPIRY, min(_length(data) / 3, until))


def _renewal(data: dict) -> tuple:
    return data.get("renewed_at"), data.get("expires_at")


def _alive_here(data: dict) -> bool:
    """A live lease of a process on this host that is not stopped (checked
    by its process, not by watching it). A stopped one (SIGSTOP) renews
    nothing: its lease is watched until it lapses, as another host's that
    is not renewed is, so that a batch run beside it takes its jobs over
    within one lease length instead of leaving them for as long as it is stopped."""
    pid = data.get("pid")
    return data.get("host") == this_host() and isinstance(pid, int) and not stopped(pid)


def describe(data: dict) -> str:
    """``host node-3, pid 4121 (ray task c2f1...), until 2026-...``"""
    task = f" ({data.get('engine')} task {data.get('task')})" if data.get("task") else ""
    return f"host {data.get('host')}, pid {data.get('pid')}{task}, until {data.get('expires_at')}"


@dataclass
class Lease:
    """A lease this process holds on one job."""

    files: "JobFiles"
    token: str
    engine: str
    task: str
    ttl: float = LEASE_SECONDS
    #: Why the lease was taken: "" for a free job, else why the previous one was over.
    took_over: str = ""
    #: Set when a renewal found the lease taken by another runner (this one
    #: stalled past its expiry): the run stops after the step in hand.
    lost: threading.Event = field(default_factory=threading.Event)

    @property
    def path(self) -> Path:
        return self.files.lease_path

    def _data(self, acquired_at: str) -> dict:
        now = _now()
        return {"host": this_host(), "pid": os.getpid(), "started": start_time(os.getpid()),
                "engine": self.engine, "task": self.task,
                "token": self.token, "acquired_at": acquired_at, "renewed_at": _stamp(now),
                "expires_at": _stamp(now + timedelta(seconds=self.ttl))}

    def held(self) -> bool:
        """Whether the lease is still this runner's (not taken over)."""
        current = read_lease(self.files)
        return current is not None and current.get("token") == self.token

    def renew(self) -> bool:
        """Push the expiry out; False (and :attr:`lost` set) when another runner holds it now."""
        while True:
            with _lease_lock(self.files) as lock:
                current = read_lease(self.files)
                if current is None or current.get("token") != self.token:
                    self.lost.set()
                    return False
                try:
                    _write(lock, self.path, self._data(current.get("acquired_at") or _stamp(_now())))
                except _LockBroken:
                    continue
            return True

    def release(self) -> None:
        """Remove the lease if it is still this runner's."""
        while True:
            with _lease_lock(self.files) as lock:
                current = read_lease(self.files)
                if current is None or current.get("token") != self.token:
                    return
                if lock.intact():
                    self.path.unlink()
                    return


def acquire(files: "JobFiles", *, engine: str, task: str, ttl: float = LEASE_SECONDS, wait: float = 0.0,
            supersedes: Optional[str] = None) -> Lease:
    """Take the job's lease, or raise :class:`LeaseHeld` naming its holder
    (after waiting up to ``wait`` seconds for its lease to be over). A live
    lease of a process on this host is held; one of another host is held
    once it is seen renewed (every third of its length while its runner
    lives), and watched until it lapses otherwise: a lease whose runner or
    host is gone is taken over within one lease length, whatever its host.
    ``supersedes``: the task of a runner the caller's batch saw die (a Ray
    runner its driver lost): a lease that task holds is taken over at once,
    by its task name, without waiting for it to expire. Should that runner
    in fact live on, it stops the next time it opens the job (its lease is
    checked then), and the job's lock keeps the two from stepping at once."""
    lease = Lease(files, uuid.uuid4().hex, engine, task, ttl)
    deadline = time.monotonic() + wait
    first_seen: Optional[dict] = None
    while True:
        with _lease_lock(files) as lock:
            current = read_lease(files)
            reason = over(current) if current is not None else ""
            if reason is None and supersedes and current.get("task") == supersedes:
                reason = "its runner died (its batch's driver saw it end) and this runner took its jobs"
            if reason is not None:
                lease.took_over = f"took over the lease of {describe(current)}: {reason}" if current is not None else ""
                try:
                    _write(lock, lease.path, lease._data(_stamp(_now())))
                except _LockBroken:
                    continue
                return lease
        first_seen = first_seen or current
        renewed = current.get("token") != first_seen.get("token") or _renewal(current) != _renewal(first_seen)
        if time.monotonic() >= deadline and (renewed or _alive_here(current)):
            waited = f" (waited {wait:.0f} s)" if wait else ""
            raise LeaseHeld(f"run by another runner{waited}: {describe(current)}")
        # Another host's lease is live only while it is renewed: one seen renewed is
        # skipped; one that is not renewed is watched until it lapses, then taken over
        # (its runner or its host is gone), as it lapses: within one lease length.
        look = min(next_look(current), WATCH_INTERVAL)
        if time.monotonic() < deadline:
            look = min(look, max(LOOK_AFTER_EXPIRY, deadline - time.monotonic()))
        time.sleep(look)


@contextmanager
def holding(files: "JobFiles", *, engine: str, task: str, ttl: float = LEASE_SECONDS,
            wait: float = 0.0, supersedes: Optional[str] = None) -> Iterator[Lease]:
    """Hold the job's lease for the block: taken (waiting up to ``wait``
    seconds for another's to be over), renewed by a thread every ``ttl / 3``
    seconds, released at the end (a crash leaves it to expire, or to be
    taken over at once on the same host)."""
    lease = acquire(files, engine=engine, task=task, ttl=ttl, wait=wait, supersedes=supersedes)
    stop = threading.Event()

    def renew() -> None:
        while not stop.wait(ttl / 3):
            try:
                if not lease.renew():
                    return
            except (LogistError, OSError):
                pass  # try again at the next tick; the lease lasts ttl

    renewer = threading.Thread(target=renew, name=f"logist-lease-{files.id}", daemon=True)
    renewer.start()
    try:
        yield lease
    finally:
        stop.set()
        renewer.join()
        try:
            lease.release()
        except (LogistError, OSError):
            pass  # it expires on its own
