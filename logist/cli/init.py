from __future__ import annotations

import click

from .common import JobsDirParam, pass_jobs


@click.command()
@pass_jobs
def init(obj: JobsDirParam) -> None:
    """Create a jobs directory (index, roles/, skills/).

    \b
    Example:
      logist --jobs-dir ./jobs init
    """
    created = obj.jobs.init()
    click.echo(f"{'Created' if created else 'Already set up:'} jobs directory {obj.jobs.path}")
