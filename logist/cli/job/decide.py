"""A person's decisions: approve, reject, resubmit, answer, suspend, resume, cancel."""

from __future__ import annotations

from typing import Optional

import click

from ..app import Application, pass_app
from ..common import job_argument, json_option, wait_option


def _simple(name: str, doc: str):
    @click.command(name=name, help=doc)
    @job_argument
    @wait_option
    @json_option
    @pass_app
    def command(app: Application, job_id: Optional[str], lock_timeout: float, as_json: bool) -> None:
        from ...engine.decide import user_action

        job = app.job(job_id)
        app.job_changed(as_json, job.id, user_action(job, name, lock_timeout=lock_timeout))

    return command


approve = _simple("approve", "Approve the work: the job becomes SUCCESS.\n\n\b\nExample:\n  logist job approve hello")
suspend = _simple("suspend", "Suspend a job until it is resumed.\n\n\b\nExample:\n  logist job suspend hello")
resume = _simple("resume", "Resume a suspended job where it was.\n\n\b\nExample:\n  logist job resume hello")
cancel = _simple("cancel", "Cancel a job for good.\n\n\b\nExample:\n  logist job cancel hello")
approve_command = _simple(
    "approve-command",
    "Run the held command; the model sees its output.\n\n\b\nExample:\n  logist job approve-command hello",
)
skip_command = _simple(
    "skip-command",
    "Skip the held command; the model is told so.\n\n\b\nExample:\n  logist job skip-command hello",
)


@click.command()
@job_argument
@click.option("--feedback", "-f", required=True, help="What is wrong; sent to the Worker.")
@wait_option
@json_option
@pass_app
def reject(app: Application, job_id: Optional[str], feedback: str, lock_timeout: float, as_json: bool) -> None:
    """Reject the work; the Worker redoes it with your feedback.

    \b
    Example:
      logist job reject hello --feedback "Print the greeting in French too"
    """
    from ...engine.decide import user_action

    job = app.job(job_id)
    app.job_changed(as_json, job.id, user_action(job, "reject", feedback, lock_timeout=lock_timeout))


@click.command()
@job_argument
@click.option("--feedback", "-f", default="", help="What to do differently; sent to the role that stopped.")
@wait_option
@json_option
@pass_app
def resubmit(app: Application, job_id: Optional[str], feedback: str, lock_timeout: float, as_json: bool) -> None:
    """Send a stopped job back to work with your feedback.

    \b
    Example:
      logist job resubmit hello --feedback "Use Python 3.11; pytest is installed"
    """
    from ...engine.decide import user_action

    job = app.job(job_id)
    app.job_changed(as_json, job.id, user_action(job, "resubmit", feedback or None, lock_timeout=lock_timeout))


@click.command()
@click.argument("args", nargs=-1, metavar="[JOB] TEXT")
@click.option("--skip", is_flag=True, help="Skip an optional question instead of answering it.")
@wait_option
@json_option
@pass_app
def answer(app: Application, args: tuple, skip: bool, lock_timeout: float, as_json: bool) -> None:
    """Answer the job's question (or --skip an optional one).

    \b
    Example:
      logist job answer hello "Use the MIT license"
    """
    from ...engine.decide import user_action

    if skip:
        if len(args) > 1:
            raise click.UsageError("with --skip give at most the job")
        job_id, text = (args[0] if args else None), None
    else:
        if not args:
            raise click.UsageError("give the answer TEXT (or --skip)")
        job_id, text = (args[0], " ".join(args[1:])) if len(args) > 1 else (None, args[0])
    job = app.job(job_id)
    app.job_changed(as_json, job.id, user_action(job, "answer", text, skip=skip, lock_timeout=lock_timeout))
