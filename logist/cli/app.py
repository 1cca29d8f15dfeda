"""The application object every command receives: jobs directory, output, exit codes.

Commands stay thin: they parse options, call one core function and hand
the result to the :class:`Application`, which decides where it goes
(``--json``: data only, on stdout; otherwise lines for people, with progress
and chatter on stderr) and which exit code it means. So the rules for
output and exit codes live here once, not in each command (the shape of
pypa/hatch's ``Application``).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Callable, Iterable, Optional

import click

if TYPE_CHECKING:
    from ..engine.step import StepResult
    from ..store.jobsdir import Job, JobsDir
    from ..store.manifest import JobManifest, Status


#: Exit codes, the same for every command.
EXIT_OK = 0
EXIT_ERROR = 1
EXIT_USAGE = 2
#: A job a command ran ended needing a person to step in.
EXIT_NEEDS_PERSON = 3


class Application:
    """Carried on the click context (``ctx.obj``); built once per process."""

    def __init__(self, jobs_dir: Optional[str] = None):
        self.jobs_dir_option = jobs_dir
        self._jobs: Optional["JobsDir"] = None

    # -- the jobs directory -------------------------------------------------------------------

    @property
    def jobs(self) -> "JobsDir":
        """The jobs directory, opened on first use (``--help`` never opens it)."""
        if self._jobs is None:
            from ..store.jobsdir import JobsDir

            self._jobs = JobsDir(self.jobs_dir_option)
        return self._jobs

    def job(self, job_id: Optional[str]) -> "Job":
        """The job named, else ``LOGIST_JOB_ID``, else the current one."""
        return self.jobs.resolve(job_id)

    # -- output -------------------------------------------------------------------------------

    @staticmethod
    def info(message: str) -> None:
        """Progress and chatter: stderr, so data on stdout stays clean."""
        click.echo(message, err=True)

    @staticmethod
    def echo(text: str = "", nl: bool = True) -> None:
        click.echo(text, nl=nl)

    @staticmethod
    def print_json(data: Any) -> None:
        import json

        click.echo(json.dumps(data, indent=2, ensure_ascii=False))

    def display(self, as_json: bool, data: Any, text: Optional[Callable[[], None]] = None) -> None:
        """``data`` as JSON on stdout with ``--json``; otherwise ``text()``
        prints it for people (or the JSON when a command has no text form)."""
        if as_json or text is None:
            self.print_json(data)
        else:
            text()

    def job_changed(self, as_json: bool, job_id: str, manifest: "JobManifest", message: Optional[str] = None) -> None:
        """What a command that changed a job prints: its new state."""
        self.display(
            as_json,
            {"job_id": job_id, "status": str(manifest.status), "role": manifest.turn.role,
             "workspace_commit": manifest.workspace_commit},
            lambda: self.info(message or f"Job '{job_id}' is now {manifest.status}."),
        )

    def step_line(self, result: "StepResult", with_job: bool = False) -> None:
        """One line per step on stderr: entry, role, action, new state, files, summary."""
        summary = (result.summary or result.error or "").strip().replace("\n", " ")
        if len(summary) > 100:
            summary = summary[:97] + "..."
        files = f" [{', '.join(result.files_changed)}]" if result.files_changed else ""
        who = f"[{result.job_id}] " if with_job else ""
        self.info(f"{who}#{result.sequence} {result.role} {result.action} -> {result.status}{files}"
                  + (f"  {summary}" if summary else ""))

    # -- exit codes ---------------------------------------------------------------------------

    @staticmethod
    def exit(code: int) -> None:
        if code != EXIT_OK:
            click.get_current_context().exit(code)

    @staticmethod
    def needs_person(status: "Status", *, with_input: bool = False) -> bool:
        """Whether ``status`` means a command that ran the job exits 3."""
        waiting = {"INTERVENTION_REQUIRED"} | ({"INPUT_REQUIRED"} if with_input else set())
        return str(status) in waiting

    def finish_steps(self, results: Iterable["StepResult"], as_json: bool, base_url: Optional[str] = None) -> None:
        """Print a run of steps; exit 3 when the job ends needing intervention.

        A failed call's recorded reason does not name the endpoint (the model
        may be shown it), so the person is told here which one it was."""
        results = list(results)
        if as_json:
            self.print_json([r.as_dict() for r in results])
        if results and self.needs_person(results[-1].status):
            last = results[-1]
            if not as_json:
                reason = last.error or "see logist job status"
                if last.action == "ERROR" and last.error:
                    from ..store.config import resolve_base_url

                    reason += f" (endpoint {resolve_base_url(base_url, self.jobs.config())})"
                self.info(f"Job '{last.job_id}' needs intervention: {reason}")
            self.exit(EXIT_NEEDS_PERSON)


pass_app = click.make_pass_decorator(Application)


def debug() -> bool:
    """``LOGIST_DEBUG=1``: show tracebacks instead of one-line errors."""
    return os.environ.get("LOGIST_DEBUG") == "1"
