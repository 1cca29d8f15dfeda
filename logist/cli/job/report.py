"""Reading a job without tools: ``job report`` (HTML) and ``job transcript`` (Markdown)."""

from __future__ import annotations

import json
import os
from pathlib import Path
import sys
from typing import Optional

import click

from ...secrets.redact import redact
from ...terminal import inert_json, shown
from ...views import transcript as tr
from ...views.report import write_job_report
from ..app import Application, pass_app
from ..common import job_argument, json_option, wait_option

def shown_path(path: Path) -> str:
    """``path`` relative to the current directory when it is below it."""
    try:
        return os.path.relpath(path) if Path(path).resolve().is_relative_to(Path.cwd().resolve()) else str(path)
    except ValueError:  # another drive
        return str(path)


@click.command()
@job_argument
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the report here (default: JOB/report.html in the jobs directory).")
@json_option
@pass_app
def report(app: Application, job_id: Optional[str], output: Optional[str], as_json: bool) -> None:
    """Write a job's timeline as one self-contained HTML file.

    Each step is a row that opens to its prompt, answer and diff; open
    report.html#step-N to go straight to step N.

    \b
    Example:
      logist job report hello
      logist job report hello -o /tmp/hello.html
    """
    job = app.job(job_id)
    path = write_job_report(job.stored, Path(output) if output else None)
    size = path.stat().st_size
    app.display(as_json, {"job_id": job.id, "path": str(path.resolve()), "bytes": size},
                lambda: app.info(f"Wrote {shown_path(path)} ({size // 1024 + 1} KB); open it in a browser."))


@click.command()
@job_argument
@click.option("--rebuild", is_flag=True, help="Rewrite the transcript from jobHistory.json first.")
@wait_option
@json_option
@pass_app
def transcript(app: Application, job_id: Optional[str], rebuild: bool, lock_timeout: float, as_json: bool) -> None:
    """Print a job's readable transcript (JOB/transcript.md).

    Logist brings it up to date after every command that changes the job;
    a missing, damaged or outdated one is caught up from jobHistory.json first.

    \b
    Example:
      logist job transcript hello | less
      logist job transcript hello --rebuild
    """
    job = app.job(job_id)
    path = job.transcript_path
    with job.views_lock(lock_timeout):
        if rebuild:
            tr.rebuild(job.stored)
            done = "rebuilt"
        else:
            done = tr.update(job.stored)
        if done != "current":
            app.info(f"{'Rebuilt' if done == 'rebuilt' else 'Brought'} {shown_path(path)} "
                     f"{'from' if done == 'rebuilt' else 'up to date with'} {job.history_path.name}.")
        # Copied as it is read (a long job's transcript need not fit in
        # memory), with the lock held so no append lands halfway; made inert
        # for a terminal and redacted, as all text printed for people is (logist.terminal.shown).
        if as_json:
            _json_copy(job.id, path)
        else:
            out = _stdout_bytes()
            with open(path, encoding="utf-8", errors="replace", newline="") as handle:
                while lines := handle.readlines(1 << 20):
                    out.write(shown("".join(lines)).encode("utf-8"))
            out.flush()


def _stdout_bytes():
    """stdout for bytes (click's get_binary_stream is deprecated)."""
    sys.stdout.flush()
    return sys.stdout.buffer


def _json_copy(job_id: str, path: Path) -> None:
    """``{"job_id", "path", "transcript"}`` on stdout, the transcript
    escaped as it is read, so that it need not fit in memory either."""

    out = _stdout_bytes()
    out.write(f'{{"job_id": {json.dumps(job_id)}, "path": {json.dumps(str(path))}, "transcript": "'.encode())
    with open(path, encoding="utf-8", errors="replace", newline="") as handle:
        while chunk := "".join(handle.readlines(1 << 20)):
            out.write(inert_json(json.dumps(redact(chunk), ensure_ascii=False)[1:-1]).encode("utf-8"))
    out.write(b'"}\n')
    out.flush()
