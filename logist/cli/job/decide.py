"""A person's decisions: approve, reject, resubmit, answer, suspend, resume, cancel, set."""

from __future__ import annotations

import os
from typing import Callable, Optional

import click

from ...api import BUDGETS, SETTABLE, Job, JobManifest, is_job_id
from ...errors import NotFoundError, TransitionError
from ...terminal import escaped, inert
from ..app import Application, pass_app
from ..common import job_argument, json_option, wait_option
from ..progress import command_lines, progress_for
from .create import SpecCommand


def _simple(name: str, verb: Callable[[Job], JobManifest], doc: str):
    """The command ``name``: ``verb`` (a method of :class:`logist.api.Job`) on the job."""
    @click.command(name=name, help=doc)
    @job_argument
    @wait_option
    @json_option
    @pass_app
    def command(app: Application, job_id: Optional[str], lock_timeout: float, as_json: bool) -> None:
        job = app.open(lock_timeout=lock_timeout).job(job_id)
        manifest = verb(job)
        asked = job.stop_request() if name in ("suspend", "cancel") else None
        if asked is not None:
            app.job_changed(as_json, job.id, manifest, extra={"requested": asked["action"]}, message=(
                f"Job '{job.id}' is running a step: {asked['action']} asked for; the runner applies it once the "
                "step ends (logist job status shows it)."))
        else:
            app.job_changed(as_json, job.id, manifest)

    return command


@click.command()
@job_argument
@click.option("--despite-checks", is_flag=True,
              help="Approve although a check failed or the checks have not run on the workspace's commit (recorded "
                   "in the entry).")
@wait_option
@json_option
@pass_app
def approve(app: Application, job_id: Optional[str], despite_checks: bool, lock_timeout: float, as_json: bool) -> None:
    """Approve the work: the job becomes SUCCESS.

    A job with checks is approved only when they passed on the workspace's
    commit (logist job check runs them), unless --despite-checks.

    \b
    Example:
      logist job approve hello
    """
    job = app.open(lock_timeout=lock_timeout).job(job_id)
    last = job.check_status()
    if last is not None and not as_json:
        app.info(f"Checks: {inert(last.line(), one_line=True)}")
    app.job_changed(as_json, job.id, job.approve(despite_checks=despite_checks),
                    extra={"last_check": last.as_dict() if last is not None else None})


@click.command()
@job_argument
@wait_option
@json_option
@pass_app
def check(app: Application, job_id: Optional[str], lock_timeout: float, as_json: bool) -> None:
    """Run the job's checks now, in its workspace (after your edits, say).

    Due checks (after a COMPLETED) decide what happens next, as in job
    step; otherwise the run is recorded and the job's state stays, so job
    approve sees the work verified. Exits 1 when a check fails.

    \b
    Example:
      logist job check hello
    """
    job = app.open(lock_timeout=lock_timeout).job(job_id)
    app.at_work([job.id], f"logist job check {job.id}")
    result = job.check(watch=progress_for(as_json))
    run = job.last_check()
    if not as_json:
        for ran in run.results:
            for line in command_lines(ran.command, ran.output, ran.exit_code, ran.duration_ms):
                app.info(line)
        app.step_line(result)
    results = [{**r.model_dump(mode="json"), "passed": r.passed} for r in run.results]
    app.display(as_json, {"job_id": job.id, "sequence": result.sequence, "status": str(result.status),
                          "passed": run.passed, "commit": run.commit, "results": results}, lambda: None)
    if not run.passed:
        app.exit(1)
suspend = _simple("suspend", Job.suspend, "Suspend a job until it is resumed.\n\n\b\nExample:\n  logist job suspend hello")
resume = _simple("resume", Job.resume, "Resume a suspended job where it was.\n\n\b\nExample:\n  logist job resume hello")
cancel = _simple(
    "cancel", Job.cancel,
    "Cancel a job for good: it cannot be resumed, rerun or restepped.\n\n"
    "To stop it for now, suspend it instead.\n\n\b\nExample:\n  logist job cancel hello",
)


@click.command("approve-command")
@job_argument
@click.option("--raw", is_flag=True,
              help="Only show the held command with every character outside printable ASCII escaped as in a Python "
                   "string literal (\\x1b, \\r, \\n, \\u202e; a backslash doubled); nothing is run.")
@wait_option
@json_option
@pass_app
def approve_command(app: Application, job_id: Optional[str], raw: bool, lock_timeout: float, as_json: bool) -> None:
    """Run the held command; the model sees its output.

    What it printed is shown as job step shows a command's output (with
    --json: under "command"). The command is printed first exactly as it runs, on one line, each
    control character made visible: ESC as ␛, a carriage return as ␍, a
    newline as ␊, other C0 controls as their U+2400 pictures, and C1
    controls, bidirectional overrides and invisible characters by their code
    point (<U+202E>). job status and job show print it the same way; --raw
    shows it without running it, with nothing left to interpretation.

    \b
    Example:
      logist job approve-command hello --raw
      logist job approve-command hello
    """
    job = app.open(lock_timeout=lock_timeout).job(job_id)
    command = job.manifest().pending_command
    if raw:
        if command is None:
            raise TransitionError(f"job '{job.id}' holds no command (logist job status {job.id} says what it waits for)")
        app.display(as_json, {"job_id": job.id, "pending_command": command}, lambda: app.echo(escaped(command)))
        return
    app.at_work([job.id], f"logist job run {job.id}")
    if command is not None and not as_json:
        app.info(f"Running: {inert(command, one_line=True)}")
    manifest = job.approve_command(watch=progress_for(as_json))
    ran = job.entry(manifest.last_sequence).command if command is not None else None
    if ran is not None and not as_json:
        for line in command_lines(ran.command, ran.output, ran.exit_code, ran.duration_ms):
            app.info(line)
    extra = {"command": {"command": ran.command, "exit_code": ran.exit_code, "timed_out": ran.timed_out,
                         "duration_ms": ran.duration_ms, "output": ran.output}} if ran is not None else None
    app.job_changed(as_json, job.id, manifest, extra=extra)

skip_command = _simple(
    "skip-command", Job.skip_command,
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
    job = app.open(lock_timeout=lock_timeout).job(job_id)
    app.job_changed(as_json, job.id, job.reject(feedback))


def _budgets_data(manifest) -> dict:
    return {"budgets": {name: getattr(manifest.settings, name) for name in BUDGETS}}


@click.command(cls=SpecCommand, spec_fields="budgets")
@job_argument
@click.option("--feedback", "-f", default="", help="What to do differently; sent to the role that stopped.")
@wait_option
@json_option
@pass_app
def resubmit(app: Application, job_id: Optional[str], feedback: str, lock_timeout: float, as_json: bool,
             **budgets) -> None:
    """Send a stopped job back to work with your feedback (and new budgets).

    \b
    Example:
      logist job resubmit hello --feedback "Use Python 3.11; pytest is installed"
      logist job resubmit hello --max-steps 50 --feedback "Go on"
    """
    job = app.open(lock_timeout=lock_timeout).job(job_id)
    manifest = job.resubmit(feedback or None, **budgets)
    app.job_changed(as_json, job.id, manifest, extra=_budgets_data(manifest))
    spent = job.raise_hint(manifest)
    if spent and not as_json:
        app.info(f"Its next step will stop again: {spent}")


@click.command("set", cls=SpecCommand, spec_fields="budgets")
@job_argument
@click.option("--check", "checks", multiple=True, metavar="CMD",
              help="The job's checks from now on, replacing its own (repeatable); see job create --check.")
@click.option("--no-checks", is_flag=True, help="Remove every check of the job.")
@wait_option
@json_option
@pass_app
def set_budgets(app: Application, job_id: Optional[str], checks: tuple, no_checks: bool, lock_timeout: float,
                as_json: bool, **budgets) -> None:
    """Change a job's budgets or checks; a job a spent budget stopped then goes on.

    Each budget counts from the job's start: --max-steps 50 allows 50 steps
    in all. A job a budget stopped continues its turn where it stopped.

    \b
    Example:
      logist job set hello --max-steps 50 --max-cost 2.50
      logist job run hello
      logist job set hello --check "python -m pytest -q"
    """
    if checks and no_checks:
        raise click.UsageError("give --check CMD or --no-checks, not both")
    if all(value is None for value in budgets.values()) and not checks and not no_checks:
        raise click.UsageError("give at least one budget (" + ", ".join(f"{option} N" for option in SETTABLE.values())
                               + "), --check CMD or --no-checks")
    job = app.open(lock_timeout=lock_timeout).job(job_id)
    before = str(job.manifest().status)
    if checks or no_checks:
        manifest = job.set_checks(list(checks))
        if all(value is None for value in budgets.values()):
            listed = "; ".join(manifest.settings.checks) or "none"
            app.job_changed(as_json, job.id, manifest, f"Job '{job.id}' checks: {inert(listed, one_line=True)}.",
                            extra={"checks": manifest.settings.checks})
            return
    manifest = job.set_budgets(**budgets)
    spent = job.raise_hint(manifest)
    if spent and str(manifest.status) == "INTERVENTION_REQUIRED":
        message = f"Job '{job.id}' is still stopped: {spent}"
    elif before != str(manifest.status):
        message = f"Job '{job.id}' is {manifest.status} again: logist job run {job.id} goes on where it stopped."
    else:
        message = f"Job '{job.id}' budgets changed; it is {manifest.status}."
    app.job_changed(as_json, job.id, manifest, message, extra=_budgets_data(manifest))


@click.command()
@click.argument("args", nargs=-1, metavar="[JOB] TEXT")
@click.option("--job", "job_option", metavar="JOB", help="The job to answer (instead of naming it first).")
@click.option("--text", help="The answer (instead of TEXT).")
@click.option("--skip", is_flag=True, help="Skip an optional question instead of answering it.")
@wait_option
@json_option
@pass_app
def answer(app: Application, args: tuple, job_option: Optional[str], text: Optional[str], skip: bool,
           lock_timeout: float, as_json: bool) -> None:
    """Answer the job's question (or --skip an optional one).

    The answer is one argument: quote it. A single word that could be a job
    id but names no job is refused as ambiguous; give it with --text.

    \b
    Example:
      logist job answer hello "Use the MIT license"
      logist job answer --text yes          # the current job
    """
    job_id, text = _answer_arguments(app, list(args), job_option, text, skip)
    job = app.open(lock_timeout=lock_timeout).job(job_id)
    app.job_changed(as_json, job.id, job.skip_question() if skip else job.answer(text))


def _answer_arguments(app: Application, args: list[str], job_option: Optional[str], text: Optional[str],
                      skip: bool) -> tuple[Optional[str], Optional[str]]:
    """(job, answer) from ``job answer``'s arguments, refusing any reading
    of them that could answer the wrong job or with the wrong words."""
    if skip or text is not None:
        if skip and text is not None:
            raise click.UsageError("--skip answers nothing; leave out --text")
        if len(args) > 1 or (args and job_option):
            raise click.UsageError(f"with {'--skip' if skip else '--text'} give at most the job")
        return job_option or (args[0] if args else None), text
    if job_option is not None:
        if len(args) != 1:
            raise click.UsageError("give the answer as one argument (quote it) or with --text")
        return job_option, args[0]
    if len(args) == 2:
        return args[0], args[1]
    if not args:
        raise click.UsageError("give the answer TEXT (or --text TEXT, or --skip)")
    if len(args) > 2:
        raise click.UsageError(f"the answer is one argument: quote it (logist job answer {args[0]} \"...\") or give --text")
    return _single_argument(app, args[0])


def _single_argument(app: Application, word: str) -> tuple[Optional[str], Optional[str]]:
    """``job answer WORD``: the answer for the current job only when WORD
    cannot be a job id (it has spaces, say); otherwise refused."""

    if not is_job_id(word):
        return None, word
    try:
        app.jobs.get(word)
    except NotFoundError:
        current = os.environ.get("LOGIST_JOB_ID") or app.jobs.index().current_job_id or "JOB"
        raise click.UsageError(
            f"'{word}' is not a job; to answer job '{current}' with it, say: "
            f"logist job answer {current} \"{word}\"  (or: logist job answer --text \"{word}\")"
        ) from None
    raise click.UsageError(f"give the answer: logist job answer {word} \"TEXT\" (or --text TEXT)")
