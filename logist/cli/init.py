from __future__ import annotations

import click

from .app import Application, pass_app


@click.command()
@pass_app
def init(app: Application) -> None:
    """Create a jobs directory (index, roles/, skills/).

    \b
    Example:
      logist --jobs-dir ./jobs init
    """
    created = app.jobs.init()
    click.echo(f"{'Created' if created else 'Already set up:'} jobs directory {app.jobs.path}")
