from __future__ import annotations

import click

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
    last = app.jobs.run_demo(job_id, echo=app.info, summary=(lambda line: None) if as_json else app.echo)
    if as_json:
        app.print_json(app.jobs.demo_summary(last.job_id, str(last.status)))
