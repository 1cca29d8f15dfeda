from __future__ import annotations

from typing import Optional

import click

from ...create import create_job
from ..common import JobsDirParam, info, json_option, pass_jobs, print_json


@click.command()
@click.argument("job_id", metavar="JOB")
@click.option("--objective", "-o", required=True, help="What the job must achieve.")
@click.option("--details", "-d", default="", help="Background, constraints, hints.")
@click.option("--acceptance", "-a", multiple=True, help="An acceptance criterion (repeatable).")
@click.option("--file", "files", multiple=True, help="A file to give the Worker: copied into the workspace, or with --from-repo a path in it (repeatable).")
@click.option("--from-repo", type=click.Path(exists=True, file_okay=False), help="Start the workspace as a clone of this git repository (never modified).")
@click.option("--ref", help="With --from-repo: the branch, tag or commit to start from.")
@click.option("--model", help="Use this model for every role of the job.")
@click.option("--worker", help="The role in the Worker's place (default Worker).")
@click.option("--supervisor", help="The role in the Supervisor's place (default Supervisor).")
@click.option("--max-steps", type=click.IntRange(min=1), help="LLM calls allowed (default 100, or config.json).")
@click.option("--format-retries", type=click.IntRange(min=0), help="Re-ask this many times after an invalid answer.")
@click.option("--rank", type=click.IntRange(min=0), help="Position in the queue (0 = first); default last.")
@json_option
@pass_jobs
def create(obj: JobsDirParam, job_id: str, objective: str, details: str, acceptance: tuple, files: tuple,
           from_repo: Optional[str], ref: Optional[str], model: Optional[str], worker: Optional[str],
           supervisor: Optional[str], max_steps: Optional[int], format_retries: Optional[int],
           rank: Optional[int], as_json: bool) -> None:
    """Create a job and make it the current one.

    \b
    Example:
      logist job create wordcount -o "Write wc.py that counts words" -a "tests pass"
    """
    job = create_job(
        obj.jobs, job_id, objective, details=details, acceptance=list(acceptance), files=list(files),
        from_repo=from_repo, ref=ref, model=model, worker=worker, supervisor=supervisor,
        max_steps=max_steps, format_retries=format_retries, rank=rank,
    )
    if as_json:
        print_json({"job_id": job.id, "path": str(job.dir), "status": "PENDING"})
    else:
        info(f"Created job '{job.id}' in {job.dir} (PENDING). Next: logist job step {job.id}")
