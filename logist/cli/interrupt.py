"""What a person is told when they stop a command with Ctrl-C (SIGINT).

A command that changes jobs (``job step``, ``job run``, ``job run --all``,
``job approve-command``) tells the :class:`~logist.cli.app.Application` which
jobs it works on and the command that goes on (:meth:`Application.at_work`);
when Ctrl-C stops it, :func:`interrupted_lines` says, read from the job's
files as the interrupted command left them, what was kept: the job's state,
its last recorded step, and what its step journal holds that the history
does not record yet (:func:`unfinished`, which ``job status`` shows too).
Nothing is repaired here: the next command that opens the job does that
under its lock (:mod:`logist.store.recovery`), and a saved answer is not
applied by a person's Ctrl-C.

The exit code is 130 (:data:`logist.cli.app.EXIT_INTERRUPTED`): 128 plus
SIGINT's number, what a shell reports for a program SIGINT ended, so a
script tells a person's Ctrl-C from an error (1) or a job waiting for a
person (3).
"""

from __future__ import annotations

from typing import Optional, Sequence

from ..api import STEPPABLE
from ..api.reading import JobReader, JobsReader
from ..errors import LogistError
from ..views.summary import action_of, actor_of


def unfinished(job: JobReader) -> Optional[str]:
    """What the step journal holds that the history does not record, and
    what the next command on the job makes of it; None when nothing."""
    journal = job.unrecorded_step()
    if journal is None:
        return None
    step = f"step {journal.sequence}"
    if journal.request is not None and journal.answer is None:
        return (f"{step}'s call was in flight and is not recorded: whether the endpoint answered it (and charged "
                "for it) is unknown; the next command on this job records it as a call of unknown outcome, and the "
                "next step makes it again (with the same Idempotency-Key)")
    if journal.request is not None and journal.phase == "answered":
        return (f"{step}'s answer had arrived and is saved, not yet recorded: the next command on this job applies it, "
                "without calling again")
    if journal.request is not None and journal.command_pgid is not None:
        return (f"{step}'s answer is saved and its command was stopped: the next command on this job records the step "
                "and holds the command for you (approve-command runs it again, skip-command skips it)")
    if journal.request is not None:
        return (f"{step}'s answer is saved and was being applied: the next command on this job puts the workspace "
                "back and applies it, without calling again")
    return (f"{step} was stopped before it was recorded: the next command on this job puts the workspace back, "
            "and the job is as it was before it")


def interrupted_lines(jobs: JobsReader, job_ids: Sequence[str], again: str, *, batch: bool = False) -> list[str]:
    """What Ctrl-C kept of the jobs ``job_ids`` a command worked on, and how
    to go on: ``again`` (the command, for a job that can be stepped), else
    what its state waits for. ``batch``: many jobs (``job run --all``): only
    those a step was left unfinished in get a line of their own."""
    lines = ["Interrupted (Ctrl-C)."]
    whole, steppable = 0, True
    for job_id in job_ids:
        try:
            job = jobs.get(job_id)
            manifest = job.manifest()
        except (LogistError, OSError):
            continue
        left = unfinished(job)
        if batch and left is None:
            whole += 1
            continue
        last = manifest.last_sequence
        kept = "no step is recorded"
        if last >= 1:
            try:
                entry = job.entry(last)
                kept = f"its last recorded step is #{last} ({actor_of(entry)} {action_of(entry)})"
            except (LogistError, OSError, ValueError):
                kept = f"its last recorded step is #{last}"
        lines.append(f"Job '{job_id}' is {manifest.status}; {kept}; "
                     + (left or "nothing was in flight: every step it made is recorded") + ".")
        if not batch and manifest.status not in STEPPABLE:
            steppable = False
            lines.append(f"Go on: {job.hint(manifest)}.")
    if batch:
        lines.append(f"{whole} other job{'s' if whole != 1 else ''}: nothing was in flight, every step made is "
                     "recorded; a job that was running stopped after the step in hand.")
    if steppable:
        lines.append(f"Go on: {again}")
    return lines
