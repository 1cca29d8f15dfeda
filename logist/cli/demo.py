from __future__ import annotations

import click

from .app import Application, pass_app


@click.command()
@click.option("--job-id", default="demo", show_default=True, help="Name of the job the demo creates.")
@pass_app
def demo(app: Application, job_id: str) -> None:
    """Run a recorded job offline (no network, no key).

    The job is left in the jobs directory for you to inspect and approve.

    \b
    Example:
      logist demo && logist job approve demo
    """
    from ..replay.demo import run_demo

    run_demo(app.jobs, job_id, echo=app.info)
