"""The views brought up to date after a command: :func:`refresh` (the
package's docstring says why without the job's lock, and how the views'
own lock is taken)."""

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
                # The update reads the mark with the last entry it brings the transcript to.
                marks: list = []
                if transcript.update(job, marks) == "current" or (marks[0] is not None and job.file_mark() == marks[0]):
                    break
    except JobBusyError:
        return  # the holder is updating them and will find our entries
    except Exception as exc:  # noqa: BLE001 - anything at all: what they show is already recorded
        log.warning(
            "could not update %s (%s: %s); the job is fine, and 'logist job transcript --rebuild' rewrites it",
            job.transcript_path, type(exc).__name__, exc,
        )
