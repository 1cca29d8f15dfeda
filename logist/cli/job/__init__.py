"""``logist job ...``: wiring only; each command lives in its own module,
imported when it runs (:class:`~logist.cli.lazy.LazyGroup`)."""

import click

from ..lazy import LazyGroup

#: The commands of ``logist job``: name -> ``module:attribute``.
COMMANDS = {
    "create": "logist.cli.job.create:create",
    "list": "logist.cli.job.inspect:list_jobs",
    "select": "logist.cli.job.inspect:select",
    "status": "logist.cli.job.inspect:status",
    "show": "logist.cli.job.inspect:show",
    "history": "logist.cli.job.inspect:history",
    "preview": "logist.cli.job.inspect:preview",
    "transcript": "logist.cli.job.report:transcript",
    "report": "logist.cli.job.report:report",
    "step": "logist.cli.job.step:step",
    "run": "logist.cli.job.step:run",
    "poststep": "logist.cli.job.step:poststep",
    "replay": "logist.cli.job.step:replay",
    "restep": "logist.cli.job.timetravel:restep",
    "rerun": "logist.cli.job.timetravel:rerun",
    "diff": "logist.cli.job.timetravel:diff",
    "export": "logist.cli.job.timetravel:export",
    "check": "logist.cli.job.decide:check",
    "approve": "logist.cli.job.decide:approve",
    "reject": "logist.cli.job.decide:reject",
    "resubmit": "logist.cli.job.decide:resubmit",
    "answer": "logist.cli.job.decide:answer",
    "approve-command": "logist.cli.job.decide:approve_command",
    "skip-command": "logist.cli.job.decide:skip_command",
    "suspend": "logist.cli.job.decide:suspend",
    "resume": "logist.cli.job.decide:resume",
    "cancel": "logist.cli.job.decide:cancel",
    "set": "logist.cli.job.decide:set_budgets",
    "upgrade": "logist.cli.job.upgrade:upgrade",
    "fsck": "logist.cli.job.fsck:fsck",
}


@click.group(cls=LazyGroup, lazy=COMMANDS, listing="job")
def job() -> None:
    """Create, step, inspect and decide on jobs."""
