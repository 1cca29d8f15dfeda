"""Pieces shared by the command groups."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, Optional

import click

if TYPE_CHECKING:
    from ..store.jobsdir import Job, JobsDir



class JobsDirParam:
    """Carried on the click context: the jobs directory, opened lazily."""

    def __init__(self, path: str):
        self.path = path
        self._jobs: Optional["JobsDir"] = None

    @property
    def jobs(self) -> "JobsDir":
        if self._jobs is None:
            from ..store.jobsdir import JobsDir

            self._jobs = JobsDir(self.path)
        return self._jobs

    def job(self, job_id: Optional[str]) -> "Job":
        return self.jobs.resolve(job_id)


pass_jobs = click.make_pass_decorator(JobsDirParam)

job_argument = click.argument("job_id", metavar="[JOB]", required=False)

json_option = click.option("--json", "as_json", is_flag=True, help="Print data only, as JSON, to stdout.")

wait_option = click.option(
    "--wait",
    "lock_timeout",
    type=float,
    default=0,
    envvar="LOGIST_LOCK_WAIT",
    show_default=True,
    help="Seconds to wait for the job's lock when another command holds it (env LOGIST_LOCK_WAIT; -1 waits forever).",
)


def print_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, ensure_ascii=False))


def info(message: str) -> None:
    """Progress and chatter: stderr, so --json output stays clean."""
    click.echo(message, err=True)
