"""Reading a job without tools: ``job report`` (HTML) and ``job transcript`` (Markdown)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional

import click

from ..common import JobsDirParam, info, job_argument, pass_jobs, wait_option


def shown_path(path: Path) -> str:
    """``path`` relative to the current directory when it is below it."""
    try:
        return os.path.relpath(path) if Path(path).resolve().is_relative_to(Path.cwd().resolve()) else str(path)
    except ValueError:  # another drive
        return str(path)


@click.command()
@job_argument
@click.option("-o", "--output", type=click.Path(dir_okay=False), help="Write the report here (default: JOB/report.html in the jobs directory).")
@pass_jobs
def report(obj: JobsDirParam, job_id: Optional[str], output: Optional[str]) -> None:
    """Write a job's timeline as one self-contained HTML file.

    Each step is a row that opens to its prompt, answer and diff; open
    report.html#step-N to go straight to step N.

    \b
    Example:
      logist job report hello
      logist job report hello -o /tmp/hello.html
    """
    from ...views.report import write_job_report

    job = obj.job(job_id)
    path = write_job_report(job, Path(output) if output else None)
    info(f"Wrote {shown_path(path)} ({path.stat().st_size // 1024 + 1} KB); open it in a browser.")


@click.command()
@job_argument
@click.option("--rebuild", is_flag=True, help="Rewrite the transcript from jobHistory.json first.")
@wait_option
@pass_jobs
def transcript(obj: JobsDirParam, job_id: Optional[str], rebuild: bool, lock_timeout: float) -> None:
    """Print a job's readable transcript (JOB/transcript.md).

    Logist appends to it as each step is recorded; a missing or outdated
    one is rebuilt from jobHistory.json first.

    \b
    Example:
      logist job transcript hello | less
      logist job transcript hello --rebuild
    """
    from ...store import history as hist
    from ...views import transcript as tr

    job = obj.job(job_id)
    path = tr.transcript_path(job.dir)
    last = hist.last_entry(job.dir)
    if rebuild or not tr.is_current(job.dir, last.sequence if last else 0):
        with job.lock(lock_timeout):
            tr.rebuild(job.dir)
        info(f"Rebuilt {shown_path(path)} from {hist.HISTORY_NAME}.")
    click.echo(path.read_text(encoding="utf-8"), nl=False)
