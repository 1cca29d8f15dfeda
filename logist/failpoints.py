"""Named points where a test can make Logist kill itself with SIGKILL.

Crash safety is only believable if it is exercised: the crash tests start a
real ``logist job step`` process with ``LOGIST_FAILPOINT=<name>`` and the
process kills itself (no cleanup, no ``finally``) exactly there. Unset, a
failpoint costs one dictionary lookup.

Points, in the order a step reaches them:
``after_calling`` (the step's journal says a call is being made, the request
not yet sent), ``after_call`` (answer received and journalled, nothing applied), ``after_apply`` (files
changed, not committed), ``after_commit`` (committed, nothing recorded),
``before_history_append`` (the history's append journal written, the entry
not yet: the entry is then written with one ``write`` call), ``after_history``
(entry appended, manifest not written), ``after_manifest`` (all written,
journal not yet removed), then, once the step is recorded and the job's lock
released, ``mid_transcript`` (half of the new entries' Markdown appended to
``transcript.md``, the views' lock held). A half-written entry (a power
loss) is tested by writing one, not by a failpoint. A step that runs a
command also passes ``command_started`` (:data:`COMMAND_POINTS`: its process
group recorded in the step's journal, the command not yet begun).

With ``LOGIST_FAILPOINT_ONCE=<path>`` as well, only the first process to
reach the point dies (it creates ``<path>``; a later one finds it and goes
on): a test can arm every process of a node and see one runner die.
"""

from __future__ import annotations

import os
import signal

POINTS = ("after_calling", "after_call", "after_apply", "after_commit", "before_history_append", "after_history", "after_manifest",
          "mid_transcript")

COMMAND_POINTS = ("command_started",)


def armed(name: str) -> bool:
    return os.environ.get("LOGIST_FAILPOINT") == name


def failpoint(name: str) -> None:
    if os.environ.get("LOGIST_FAILPOINT") == name:
        once = os.environ.get("LOGIST_FAILPOINT_ONCE")
        if once:
            try:
                os.close(os.open(once, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
            except FileExistsError:
                return  # another process died here already
        os.kill(os.getpid(), signal.SIGKILL)
