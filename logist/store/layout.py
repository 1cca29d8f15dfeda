"""What a job directory holds: every file Logist may put there, said once.

A person opens a job's folder in a file browser before they read any
documentation, so the folder explains itself: ``README.md``, written when
the job is created, names each file and what it is for. It is made from
:data:`JOB_FILES`, the one list of those files; a test runs a real job
through a command, a question, a crash and its repair, a report and a
transcript, and fails on any file in the folder this list does not name.

Two files are always there and look odd: ``.lock`` and ``.views.lock``.
They are empty lock files (filelock). A command locks the file, not the
folder, and the file stays after the lock is released on purpose: deleting
a lock file while another process waits on it would let two processes hold
"the same" lock on two different files. So they are named and explained
rather than removed.

Nothing here is read by the model: the workspace is ``workspace/``, and the
README sits beside it, not in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Optional

from .atomic import atomic_write

README_NAME = "README.md"


@dataclass(frozen=True)
class JobFile:
    #: A name, ``name/`` for a folder, or a pattern with ``*``.
    name: str
    #: What it is and what it is for, in one line.
    what: str
    #: True: in every job; False: only at times (``what`` says when).
    always: bool = True


JOB_FILES: tuple[JobFile, ...] = (
    JobFile(README_NAME, "this file, written when the job was created"),
    JobFile("job_manifest.json", "the job's state now: status, whose turn it is, budgets spent, the open question"),
    JobFile("jobHistory.json", "every step in order, the source of truth: each request, answer, command, commit, cost"),
    JobFile("transcript.md", "the history written to be read, brought up to date after every command"),
    JobFile("workspace/", "the job's files: a git repository with one commit per step that changed it"),
    JobFile(".lock", "the job's lock, held while a command changes the job; an empty file that stays "
                     "(deleting a lock file could let two commands in at once), harmless"),
    JobFile(".views.lock", "the same for transcript.md and report.html"),
    JobFile("lease.json", "only while a runner (`logist job run --all`) runs the job: which host, process and "
                          "engine task own it and until when; another runner skips the job meanwhile", always=False),
    JobFile(".lease.lock", "the lease's lock, held while a runner takes, renews or ends a lease; an empty file "
                           "that stays, harmless", always=False),
    JobFile("context.md", "the context every system prompt of this job gives (copied from the workspace's "
                          ".logist/context.md when the job was made; edit it here), only when there is one",
            always=False),
    JobFile("response_formats/", "the response_format values the calls sent (decoding schemas), each kept once "
                                 "by its SHA-256 and named by the history's entries that sent it", always=False),
    JobFile("report.html", "the job's timeline as one HTML page, written by `logist job report`", always=False),
    JobFile("step_journal.json", "only while a step is applied: what to undo if it is interrupted", always=False),
    JobFile("jobHistory.json.append", "only while an entry is appended to the history: where the append started",
            always=False),
    JobFile("*.corrupt-*", "a damaged file Logist moved aside and replaced (kept for you to look at; "
                           "delete it when you like)", always=False),
    JobFile("*.v1", "the job's files as an older Logist wrote them (format 1), kept after the upgrade",
            always=False),
    JobFile(".*.tmp", "a file being written; one a crash left is removed by the next command on the job "
                      "(report.html's can be deleted)", always=False),
)


#: The files of a job directory written only with the job's lock held (the
#: views, transcript.md and report.html, are written under ``.views.lock``):
#: a temp file of one of them found with the lock held is a killed write's.
WRITTEN_UNDER_THE_LOCK = ("job_manifest.json", "jobHistory.json", "jobHistory.json.append", "step_journal.json",
                          README_NAME, "context.md")


def describe(name: str) -> Optional[JobFile]:
    """The entry of :data:`JOB_FILES` for a file or folder of a job directory."""
    for item in JOB_FILES:
        pattern = item.name.rstrip("/")
        if fnmatchcase(name, pattern):
            return item
    return None


def readme_text(job_id: str, objective: str) -> str:
    """The job directory's README: what the folder is, how to look at it, each file."""
    first = " ".join(objective.split())
    if len(first) > 200:
        first = first[:199] + "…"
    commands = [
        ("status", "where it stands, in a few lines"),
        ("show", "everything about it: objective, state, totals, the last steps"),
        ("history", "every step as a table"),
        ("transcript", "the whole job to read (transcript.md)"),
        ("report", "an HTML timeline with each step's prompt, answer and diff (report.html)"),
    ]
    lines = [
        f"# Logist job `{job_id}`\n",
        "\n",
        f"> {first}\n",
        "\n",
        "This folder is one job of Logist, which runs LLM agents on a task as a sequence of steps and "
        "records each one. Everything here is plain files: read any of them, but change the job only "
        "with `logist` commands, which check and repair these files as they go.\n",
        "\n",
        "To look at the job from this folder:\n",
        "\n",
        *(f"- `logist --jobs-dir .. job {name} {job_id}`: {what}\n" for name, what in commands),
        "- `git -C workspace log --stat`: what each step changed\n",
        "\n",
        "## Files\n",
        "\n",
        "| file | what it is |\n",
        "|---|---|\n",
        *(f"| `{f.name}` | {f.what} |\n" for f in JOB_FILES if f.always),
        "\n",
        "Only at times:\n",
        "\n",
        "| file | what it is |\n",
        "|---|---|\n",
        *(f"| `{f.name}` | {f.what} |\n" for f in JOB_FILES if not f.always),
    ]
    return "".join(lines)


def write_readme(job_dir: Path, job_id: str, objective: str) -> None:
    atomic_write(Path(job_dir) / README_NAME, readme_text(job_id, objective))
