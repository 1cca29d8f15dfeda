"""``logist job ...``: wiring only; each command lives in its own module."""

import click

from .create import create
from .decide import (
    answer, approve, approve_command, cancel, check, reject, resubmit, resume, set_budgets, skip_command, suspend,
)
from .fsck import fsck
from .inspect import history, list_jobs, preview, select, show, status
from .report import report, transcript
from .step import poststep, replay, run, step
from .timetravel import diff, export, rerun, restep
from .upgrade import upgrade


@click.group()
def job() -> None:
    """Create, step, inspect and decide on jobs."""


for command in (
    create, list_jobs, select, status, show, history, preview, transcript, report,
    step, run, poststep, replay, restep, rerun, diff, export, check,
    approve, reject, resubmit, answer, approve_command, skip_command, suspend, resume, cancel, set_budgets, upgrade,
    fsck,
):
    job.add_command(command)
