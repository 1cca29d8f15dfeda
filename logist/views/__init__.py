"""What a person reads about a job, derived from its history and manifest.

Data flows one way: the store is read, the engine decides and records under
the job's lock, and only then, with the lock released, are the views
brought up to date (:func:`refresh`). Nothing in :mod:`logist.store` or on
the crash-safety path imports this package, so a view that cannot be
written (a full disk, a directory where the file should be, a crash in the
middle of the write) can never fail, slow down or undo a step: it is caught
up by the next command, or rebuilt from the history.

* :mod:`.summary` a job's summary, computed once (rows, states, budgets);
  every view below takes its words from it.
* :mod:`.transcript` ``transcript.md``, kept up to date after every command
  (:mod:`.markdown` renders one entry, :mod:`.prompt_tracker` remembers what
  the reader has already seen).
* :mod:`.report` ``report.html`` and the jobs index, written on demand
  (:mod:`.html` holds the page's pieces, ``assets/`` its style and script).

Since :func:`refresh` runs without the job's lock, the view files have a
lock of their own (``<job>/.views.lock``), taken without waiting, so two
processes never interleave their writes. When another process holds it, this
one skips: the holder checks the history again after each update and goes
on until the views end with the last entry, so it takes in what this one
recorded. (Only an entry recorded in the instant between the holder's last
check and its release waits for the next command, or ``job transcript``,
which catches up whatever is behind.)

Internal: may change in any release; use :mod:`logist.api` (``logist.open``, and
what its ``Jobs`` and ``Job`` return) and the names in ``logist.__all__``.
"""

from __future__ import annotations

import logging

from ..errors import JobBusyError
from ..store.atomic import leftover_temps
from . import transcript

#: Updates in a row while other processes keep recording (bounds the loop).
_MAX_ROUNDS = 10

log = logging.getLogger("logist")


def refresh(job) -> None:
    """Bring ``job``'s views up to date with its history. Never raises.

    Call after the job's lock is released. A failure is one warning on the
    "logist" logger; the command that recorded the entries has succeeded.
    """
    try:
        with job.views_lock():
            for tmp in leftover_temps(job.dir, (job.transcript_path.name,)):
                tmp.unlink(missing_ok=True)  # a write of it that was killed: only written under this lock
            for _ in range(_MAX_ROUNDS):
                # Once more only when another process recorded entries meanwhile: the
                # history's mark (a stat and its last bytes) tells, without reading an entry.
                mark = job.file_mark()
                if transcript.update(job) == "current" or (mark is not None and job.file_mark() == mark):
                    break
    except JobBusyError:
        return  # the holder is updating them and will find our entries
    except Exception as exc:  # noqa: BLE001 - anything at all: what they show is already recorded
        log.warning(
            "could not update %s (%s: %s); the job is fine, and 'logist job transcript --rebuild' rewrites it",
            job.transcript_path, type(exc).__name__, exc,
        )
