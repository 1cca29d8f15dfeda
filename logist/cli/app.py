"""The application object every command receives: jobs directory, output, exit codes.

Commands stay thin: they parse options, call one core function and hand
the result to the :class:`Application`, which decides where it goes
(``--json``: data only, on stdout; otherwise lines for people, with progress
and chatter on stderr) and which exit code it means. So the rules for
output and exit codes live here once, not in each command (the shape of
pypa/hatch's ``Application``).
"""

from __future__ import annotations

import functools
import json
import os
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

import click

from .. import api
from ..api import WAITING_FOR_PERSON, JobManifest, Status, held_because
from ..api.reading import JobReader, JobsReader, open_reader
from ..secrets.redact import redact_data, url_shown
from ..terminal import inert, inert_json, shown
from .interrupt import interrupted_lines
from .progress import wipe

if TYPE_CHECKING:  # what a command that changes jobs is given: logist.api loads them with the engine, when one runs
    from ..api import Job, Jobs, StepResult


#: Exit codes, the same for every command.
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
#: A job a command ran ended needing a person to step in.
EXIT_NEEDS_PERSON = 3
#: A job a command ran stopped at a spent budget (``logist job set`` raises it).
EXIT_BUDGET = 4
#: Ctrl-C (SIGINT) stopped the command: 128 + SIGINT's number, as a shell
#: reports a program SIGINT ended (:mod:`logist.cli.interrupt` says why this code).
EXIT_INTERRUPTED = 130

#: What each exit code means: the one table, from which ``logist --help``,
#: the help of every command that runs steps and the README's table are made.
EXIT_CODES: tuple[tuple[int, str], ...] = (
    (EXIT_OK, "success: done; a job it ran can go on, or is finished"),
    (EXIT_ERROR, "error: one line on stderr says why"),
    (EXIT_USAGE, "usage: a wrong, missing or ambiguous option or argument (an empty objective, an invalid job id, "
                 "a job, entry, role or skill that does not exist)"),
    (EXIT_NEEDS_PERSON, "a job it ran, or would have run, waits for a person: " + ", ".join(WAITING_FOR_PERSON)),
    (EXIT_BUDGET, "a job it ran stopped at a spent budget: logist job set raises it"),
    (EXIT_INTERRUPTED, "interrupted (Ctrl-C): stderr says what was kept and the command that goes on"),
)

#: Commands that run steps, the ones that exit 3 and 4 (``logist demo``
#: exits 0 once its job waits for approval, as the demo means it to).
#: Characters of a failed step's reason its line shows (a summary: 100).
ERROR_WIDTH = 300
RUNS_STEPS = ("job step", "job run", "job poststep", "job replay")


def exit_codes_help() -> str:
    """The exit codes as a ``--help`` epilog (``\\b`` keeps click from rewrapping it)."""
    lines = [f"  {code}  {meaning}" for code, meaning in EXIT_CODES]
    return "\b\nExit codes (3 and 4 from " + ", ".join(RUNS_STEPS) + "):\n" + "\n".join(lines)


def exit_codes_markdown() -> str:
    """The exit codes as the README's table."""
    lines = ["| exit code | meaning |", "|---|---|"] + [f"| {code} | {meaning} |" for code, meaning in EXIT_CODES]
    return "\n".join(lines) + "\n"


def echo(text: str = "", nl: bool = True, err: bool = False) -> None:
    """The one way the command line prints text for people: made inert, then
    redacted (:func:`logist.terminal.shown`)."""
    click.echo(shown(text), nl=nl, err=err)


def json_text(data: Any) -> str:
    """``data`` as the JSON the command line prints: every known secret
    redacted in its strings, then encoded with nothing a terminal acts on
    (:func:`logist.terminal.inert_json`); the same value as ``data`` otherwise."""
    return inert_json(json.dumps(redact_data(data), indent=2, ensure_ascii=False))


class Application:
    """Carried on the click context (``ctx.obj``); built once per run of a command."""

    def __init__(self, jobs_dir: Optional[str] = None):
        self.jobs_dir_option = jobs_dir
        #: The jobs directory as the library opens it (:func:`logist.api.open`):
        #: its endpoints' clients are closed when the command ends (:meth:`close`).
        self._jobs: Optional[Jobs] = None
        #: The jobs directory opened to read (:attr:`reader`), by a command that only reads.
        self._reader: Optional[JobsReader] = None
        #: The jobs a command that changes them works on, the command that goes
        #: on, and whether it is a batch: what Ctrl-C reports (:meth:`at_work`).
        self.work: Optional[tuple[list[str], str, bool]] = None

    # -- the jobs directory -------------------------------------------------------------------

    @property
    def jobs(self) -> Jobs:
        """The jobs directory (:class:`logist.api.Jobs`), opened on first use
        (``--help`` never opens it)."""
        if self._jobs is None:
            self._jobs = api.open(self.jobs_dir_option)
        return self._jobs

    def close(self) -> None:
        """Close what the command opened (its endpoints' clients): :func:`logist.cli.cli` calls it at the end."""
        if self._jobs is not None:
            self._jobs.close()

    def job(self, job_id: Optional[str]) -> Job:
        """The job named, else ``LOGIST_JOB_ID``, else the current one."""
        return self.jobs.job(job_id)

    @property
    def reader(self) -> JobsReader:
        """The jobs directory opened to read (:func:`logist.api.reading.open_reader`):
        what a command that only reads uses, so that it loads nothing of the
        engine; the command's :attr:`jobs` when it has opened them already."""
        if self._reader is None:
            self._reader = self._jobs if self._jobs is not None else open_reader(self.jobs_dir_option)
        return self._reader

    def read_job(self, job_id: Optional[str]) -> JobReader:
        """The job named, else ``LOGIST_JOB_ID``, else the current one, opened to read."""
        return self.reader.job(job_id)

    def open(self, *, base_url: Optional[str] = None, request_timeout: Optional[float] = None,
             lock_timeout: float = 0) -> Jobs:
        """The jobs directory with this command's options, sharing its
        endpoints (closed with the command): what commands call."""
        return self.jobs.using(base_url=base_url, request_timeout=request_timeout, lock_timeout=lock_timeout)

    def at_work(self, job_ids: Iterable[str], again: str, *, batch: bool = False) -> None:
        """The command works on ``job_ids`` now; ``again`` goes on after a
        Ctrl-C (:meth:`interrupted`)."""
        self.work = (list(job_ids), again, batch)

    def interrupted(self) -> bool:
        """After Ctrl-C: say what was kept of the jobs at work and how to go
        on (:func:`logist.cli.interrupt.interrupted_lines`); False when the
        command was at work on none."""
        if self.work is None:
            return False
        job_ids, again, batch = self.work
        wipe()  # the line of a call or a command in flight, and the terminal's ^C
        for line in interrupted_lines(self.jobs, job_ids, again, batch=batch):
            self.info(line)
        return True

    # -- output -------------------------------------------------------------------------------

    @staticmethod
    def info(message: str) -> None:
        """Progress and chatter: stderr, so data on stdout stays clean."""
        echo(message, err=True)

    @staticmethod
    def echo(text: str = "", nl: bool = True) -> None:
        echo(text, nl=nl)

    @staticmethod
    def print_json(data: Any) -> None:
        click.echo(json_text(data))

    def display(self, as_json: bool, data: Any, text: Optional[Callable[[], None]] = None) -> None:
        """``data`` as JSON on stdout with ``--json``; otherwise ``text()``
        prints it for people (or the JSON when a command has no text form)."""
        if as_json or text is None:
            self.print_json(data)
        else:
            text()

    def job_changed(self, as_json: bool, job_id: str, manifest: JobManifest, message: Optional[str] = None,
                    extra: Optional[dict] = None) -> None:
        """What a command that changed a job prints: its new state."""
        self.display(
            as_json,
            {"job_id": job_id, "status": str(manifest.status), "role": manifest.turn.role,
             "workspace_commit": manifest.workspace_commit, **(extra or {})},
            lambda: self.info(message or f"Job '{job_id}' is now {manifest.status}."),
        )

    def step_line(self, result: StepResult, with_job: bool = False) -> None:
        """One line per step on stderr: entry, role, action, new state, files, summary."""
        summary = inert((result.summary or result.error or "").strip().replace("\n", " "), one_line=True)
        # An error is shown further: the endpoint's own words come after what failed.
        limit = 100 if result.summary or not result.error else ERROR_WIDTH
        if len(summary) > limit:
            summary = summary[:limit - 3] + "..."
        files = f" [{', '.join(inert(path, one_line=True) for path in result.files_changed)}]" if result.files_changed else ""
        who = f"[{result.job_id}] " if with_job else ""
        self.info(f"{who}#{result.sequence} {result.role} {result.action} -> {result.status}{files}"
                  + (f"  {summary}" if summary else ""))

    # -- exit codes ---------------------------------------------------------------------------

    @staticmethod
    def exit(code: int) -> None:
        if code != EXIT_OK:
            click.get_current_context().exit(code)

    @staticmethod
    def needs_person(status: Status) -> bool:
        """Whether ``status`` means a job waits for a person (exit 3)."""
        return str(status) in WAITING_FOR_PERSON

    def finish_steps(self, results: Iterable[StepResult], as_json: bool, base_url: Optional[str] = None,
                     *, say_status: bool = False) -> None:
        """Print a run of steps; exit 3 when the job ends needing a person, 4
        when a spent budget stopped it (``say_status``: also say where it is
        when it can go on).

        A failed call's recorded reason does not name the endpoint (the model
        may be shown it), so the person is told here which one it was."""
        results = list(results)
        if as_json:
            self.print_json([r.as_dict() for r in results])
        if not results:
            return
        last = results[-1]
        if last.action == "LIMIT" or self.needs_person(last.status):
            if not as_json:
                endpoint = None
                if last.action == "ERROR" and last.error:
                    endpoint = url_shown(self.jobs.endpoint_url(base_url))
                self.info(self.waiting_line(self.jobs.get(last.job_id), endpoint))
            self.exit(EXIT_BUDGET if last.action == "LIMIT" else EXIT_NEEDS_PERSON)
        elif last.interrupted:
            if not as_json:
                self.info(f"Job '{last.job_id}': the endpoint failed ({last.error}; endpoint "
                          f"{url_shown(self.jobs.endpoint_url(base_url))}). The turn is kept: logist job step "
                          f"{last.job_id} (or job run) goes on with the same conversation; logist job suspend "
                          f"{last.job_id} sets it aside instead.")
            self.exit(EXIT_ERROR)
        elif say_status and not as_json:
            self.info(f"Job '{last.job_id}' is {last.status}.")

    @staticmethod
    def waiting_line(job: Job, endpoint: Optional[str] = None) -> str:
        """The line that says why a job waits for a person and what to do:
        a spent budget (which, its figures, how to raise it); else its real
        cause (INTERVENTION_REQUIRED's recorded reason: STUCK, invalid
        answers, a failed call, ``endpoint`` the one it failed at), the rule
        that held its command, and the hints of its state, which suggest
        raising a budget only when a budget stopped it."""
        manifest = job.manifest()
        budget = job.stopped_by_budget(manifest)
        if budget:
            return f"Job '{job.id}' stopped at a budget: {job.raise_hint(manifest) or manifest.reason}"
        status = str(manifest.status)
        parts = []
        if status == "INTERVENTION_REQUIRED":
            cause = manifest.reason or "no reason was recorded"
            parts.append(cause + (f" (endpoint {endpoint})" if endpoint else ""))
        held = held_because(manifest)
        if held:
            parts.append(f"its command is held because {held}")
        parts.append(job.hint(manifest))
        what = "needs intervention" if status == "INTERVENTION_REQUIRED" else f"is {status}"
        return f"Job '{job.id}' {what}: " + "; ".join(parts) + "."

    def exit_for_job(self, job: Job, as_json: bool, *, refused: Optional[Exception] = None,
                     finished_is_done: bool = True) -> None:
        """Exit as the job's state says: after a run of steps that printed
        its own lines, or when the job could not be stepped (``refused``):
        then a job waiting for a person exits 3 (4: a spent budget), a
        finished one 0 (with ``finished_is_done``: there was nothing to
        run; else, as for any other refusal, the error it is: 1)."""
        manifest = job.manifest()
        status = str(manifest.status)
        if job.stopped_by_budget(manifest):
            code, line = EXIT_BUDGET, self.waiting_line(job)
        elif status in WAITING_FOR_PERSON:
            code, line = EXIT_NEEDS_PERSON, self.waiting_line(job)
        elif refused is not None and (status != "SUCCESS" or not finished_is_done):
            raise refused
        else:
            code = EXIT_OK
            line = f"Job '{job.id}' is {status}" + (": nothing to run." if refused is not None else ".")
        if refused is not None and as_json:
            self.print_json([])
        if refused is not None or not as_json:
            self.info(line)
        self.exit(code)


def application(ctx: click.Context) -> Application:
    """The run's :class:`Application`, on the program's context: made the
    first time a command asks (``--help`` never does), from ``--jobs-dir``
    (before the command or after it), and closed with that context."""
    root = ctx.find_root()
    app = root.find_object(Application)
    if app is None:
        app = root.obj = Application(root.params.get("jobs_dir"))
        root.call_on_close(app.close)  # the command's clients end with it
    return app


def pass_app(command: Callable) -> Callable:
    """Decorate a command to receive the run's :class:`Application` first (:func:`application`)."""

    @functools.wraps(command)
    def with_app(*args, **kwargs):
        ctx = click.get_current_context()
        return ctx.invoke(command, application(ctx), *args, **kwargs)

    return with_app


def debug() -> bool:
    """``LOGIST_DEBUG=1``: show tracebacks instead of one-line errors."""
    return os.environ.get("LOGIST_DEBUG") == "1"
