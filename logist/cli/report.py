"""``logist report``: an HTML index of every job in the jobs directory."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click

from ..views.report import write_index
from .app import Application, pass_app
from .common import json_option
from .job.report import shown_path


@click.command()
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the index here (default: index.html in the jobs directory).")
@json_option
@pass_app
def report(app: Application, output: Optional[str], as_json: bool) -> None:
    """Write an HTML index of all jobs, refreshing each job's report.

    \b
    Example:
      logist report && xdg-open jobs/index.html
    """
    path, rows = write_index(app.jobs.directory, Path(output) if output else None)
    unreadable = [row.job_id for row in rows if row.report is None]
    if as_json:
        app.print_json({"path": str(Path(path).resolve()), "jobs": [
            {"job_id": row.job_id, "report": str(row.report) if row.report is not None else None} for row in rows]})
        return
    app.info(f"Wrote {shown_path(path)}: {len(rows)} job{'s' if len(rows) != 1 else ''}, each with its report.html.")
    if unreadable:
        app.info(f"No report for: {', '.join(unreadable)} (see the index for why).")
