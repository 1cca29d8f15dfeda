"""``logist job upgrade``: rewrite a job's files in the current format."""

from typing import Optional

import click

from ...api import HISTORY_FORMAT
from ..app import Application, pass_app
from ..common import job_argument, json_option, wait_option


@click.command()
@job_argument
@wait_option
@json_option
@pass_app
def upgrade(app: Application, job_id: Optional[str], lock_timeout: float, as_json: bool) -> None:
    """Rewrite a job's files in the current format.

    A job written by an earlier Logist is read as it is and upgraded by the
    first command that changes it; this does it now. Nothing is lost: every
    request can still be rebuilt exactly, and the old files are kept beside
    the new ones (job_manifest.json.v1, jobHistory.json.v1).

    \b
    Example:
      logist job upgrade hello
    """
    job = app.open(lock_timeout=lock_timeout).job(job_id)
    done = job.upgrade()
    if as_json:
        app.print_json({"job_id": job.id, "upgraded": done is not None, "format": HISTORY_FORMAT, "note": done})
        return
    app.info(f"Job '{job.id}': {done}" if done else f"Job '{job.id}' is already in format {HISTORY_FORMAT}.")
