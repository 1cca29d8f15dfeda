from __future__ import annotations

import click

from ..replay.demo import demo_summary, run_demo
from .app import Application, pass_app
from .common import json_option


@click.command()
@click.option("--job-id", default="demo", show_default=True, help="Name of the job the demo creates.")
@json_option
@pass_app
def demo(app: Application, job_id: str, as_json: bool) -> None:
    """Run a recorded job offline (no network, no key).

    The job is left in the jobs directory for you to inspect and approve.
    Progress goes to stderr; where the job is and what to open, to stdout.

    \b
    Example:
      logist demo && logist job approve demo
    """
    last = run_demo(app.jobs, job_id, echo=app.info, summary=(lambda line: None) if as_json else app.echo)
    if as_json:
        job = app.jobs.job(last.job_id)
        app.print_json(demo_summary(app.jobs, job, str(last.status)))
