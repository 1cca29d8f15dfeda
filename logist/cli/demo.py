from __future__ import annotations

import click

from .common import JobsDirParam, pass_jobs


@click.command()
@click.option("--job-id", default="demo", show_default=True, help="Name of the job the demo creates.")
@pass_jobs
def demo(obj: JobsDirParam, job_id: str) -> None:
    """Run a recorded job offline (no network, no key).

    The job is left in the jobs directory for you to inspect and approve.

    \b
    Example:
      logist demo && logist job approve demo
    """
    from ..replay.demo import run_demo

    run_demo(obj.jobs, job_id, echo=lambda line: click.echo(line, err=True))
