from __future__ import annotations

import click

from .app import Application, pass_app
from .common import json_option


@click.command()
@json_option
@pass_app
def init(app: Application, as_json: bool) -> None:
    """Create a jobs directory (index, roles/, skills/).

    \b
    Example:
      logist --jobs-dir ./jobs init
    """
    created = app.jobs.init()
    app.display(as_json, {"jobs_dir": str(app.jobs.path), "created": created},
                lambda: app.info(f"{'Created' if created else 'Already set up:'} jobs directory {app.jobs.path}"))
