"""``logist demo``: a real job, run offline from a bundled recording.

The demo creates a job from the bundled ``wordcount`` fixture and runs it
live — prompts built, the real ``openai`` client, a real HTTP server on
127.0.0.1 — except that the server is a strict
:class:`~logist.replay.server.ReplayLLMServer`: it answers with the recorded
answers, and only to the requests that were recorded. The job left behind is
an ordinary one: a workspace with its commits, the history, the manifest,
and an approval waiting for the user.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Callable, Optional

from ..errors import LogistError
from ..store.jobsdir import JobsDir
from ..store.session import JobFiles
from .fixtures import create_from_fixture, load_fixture
from .server import CALL_KINDS, ReplayLLMServer
from ..engine.loop import run_job
from ..engine.apply import StepResult

DEMO_FIXTURE = "wordcount"


def _free_id(jobs: JobsDir, wanted: str) -> str:
    taken = set(jobs.job_ids()) | {p.name for p in jobs.path.iterdir()} if jobs.path.exists() else set()
    if wanted not in taken:
        return wanted
    n = 2
    while f"{wanted}-{n}" in taken:
        n += 1
    return f"{wanted}-{n}"


def run_demo(
    jobs: JobsDir, job_id: str = "demo", echo: Callable[[str], None] = print,
    summary: Optional[Callable[[str], None]] = None,
) -> StepResult:
    """Create and run the demo job; ``echo`` gets the progress lines and
    ``summary`` (default ``echo``) the closing lines: where the job is and
    what to open (:func:`demo_summary`)."""
    fixture = load_fixture(DEMO_FIXTURE)
    history = fixture.history()
    # The recording's model, so that a config.json choosing another one
    # does not make the requests differ from the recorded ones.
    models = {e.request.metadata.model for e in history.interactions if e.kind in CALL_KINDS and e.request}

    jobs.init()
    job_id = _free_id(jobs, job_id)
    job = create_from_fixture(jobs, fixture, job_id)
    echo(f"Created job '{job_id}' in {job.dir}")
    echo(f"Objective: {job.manifest().objective}")
    echo("Running it against a local replay of a recorded model (no network, no API key):")

    def report(result: StepResult) -> None:
        files = f"  wrote {', '.join(result.files_changed)}" if result.files_changed else ""
        echo(f"  #{result.sequence} {result.role:<10} {result.action:<9} -> {result.status}{files}")

    with ReplayLLMServer(history, strict=True) as server:
        results = run_job(job, base_url=server.base_url, model=models.pop() if len(models) == 1 else None, on_step=report)
    last = results[-1]
    if last.status.value != "APPROVAL_REQUIRED":
        raise LogistError(
            f"the demo job '{job_id}' ended {last.status} instead of waiting for approval: "
            f"{last.error or 'see logist job status ' + job_id}"
        )
    for line in summary_lines(demo_summary(jobs, job, str(last.status))):
        (summary or echo)(line)
    return last


def demo_summary(jobs: JobsDir, job: JobFiles, status: str) -> dict:
    """Where the demo job is, what to open and what to try next (paths
    relative to the current directory when they are below it)."""
    here = Path.cwd()
    job_id = job.id
    shown = JobFiles(os.path.relpath(job.dir, here)) if job.dir.is_relative_to(here) else job
    jd = "" if jobs.path == JobsDir().path else f" --jobs-dir {jobs.path}"
    return {
        "job_id": job_id,
        "status": status,
        "directory": str(shown.dir),
        "open": {
            str(shown.manifest_path): "its state",
            str(shown.history_path): "every prompt and answer",
            str(shown.workspace) + "/": "the files, one git commit per step",
        },
        "next": [f"logist{jd} job history {job_id}", f"git -C {shown.workspace} log --stat",
                 f"logist{jd} job approve {job_id}"],
    }


def summary_lines(data: dict) -> list[str]:
    width = max(len(path) for path in data["open"])
    lines = ["", f"Job '{data['job_id']}' is {data['status']}. Everything it did is in {data['directory']}:"]
    lines += [f"  {path:<{width}}  {what}" for path, what in data["open"].items()]
    return lines + ["Try next:"] + [f"  {command}" for command in data["next"]]
