from __future__ import annotations

from typing import Optional

import click

from ..common import JobsDirParam, info, json_option, pass_jobs, print_json


@click.command()
@click.argument("job_id", metavar="JOB")
@click.option("--objective", "-o", help="What the job must achieve (with --skill: defaults to the skill's description).")
@click.option("--details", "-d", default="", help="Background, constraints, hints.")
@click.option("--acceptance", "-a", multiple=True, help="An acceptance criterion (repeatable).")
@click.option("--file", "files", multiple=True, help="A file to give the Worker: copied into the workspace, or with --from-repo a path in it (repeatable).")
@click.option("--from-repo", type=click.Path(exists=True, file_okay=False), help="Start the workspace as a clone of this git repository (never modified).")
@click.option("--ref", help="With --from-repo: the branch, tag or commit to start from.")
@click.option("--model", help="Use this model for every role of the job.")
@click.option("--workflow", type=click.Choice(["default", "planned"]), default="default", show_default=True,
              help="default: Worker then Supervisor; planned: a Planner routes work to the roles.")
@click.option("--planner", help="With --workflow planned: the role in the Planner's place (default Planner).")
@click.option("--role", "extra_roles", multiple=True, metavar="ROLE", help="With --workflow planned: another role the Planner can address (repeatable).")
@click.option("--worker", help="The role in the Worker's place (default Worker).")
@click.option("--supervisor", help="The role in the Supervisor's place (default Supervisor).")
@click.option("--max-steps", type=click.IntRange(min=1), help="LLM calls allowed (default 100, or config.json).")
@click.option("--format-retries", type=click.IntRange(min=0), help="Re-ask this many times after an invalid answer.")
@click.option("--rank", type=click.IntRange(min=0), help="Position in the queue (0 = first); default last.")
@click.option("--skill", help="Make the job from this skill (logist skill list).")
@click.option("--param", "params", multiple=True, metavar="NAME=VALUE", help="A skill parameter (repeatable).")
@click.option("--command-policy", type=click.Choice(["deny", "ask", "allow"]), help="Whether the model's commands run without you (default ask).")
@click.option("--allow", "allowed", multiple=True, metavar="PATTERN", help="A command pattern that runs without asking, e.g. 'python -m pytest*' (repeatable; implies --command-policy allow).")
@click.option("--command-timeout", type=click.FloatRange(min=0, min_open=True), help="Seconds a command may run (default 120).")
@click.option("--max-cost", "max_cost_usd", type=click.FloatRange(min=0), help="Stop before a call once this many USD are spent (needs prices in config.json).")
@click.option("--max-tokens", type=click.IntRange(min=0), help="Stop before a call once this many tokens are used.")
@click.option("--max-wall-seconds", type=click.FloatRange(min=0), help="Stop before a call once calls and commands took this long.")
@click.option("--max-retries-in-a-row", type=click.IntRange(min=1), help="RETRYs in a row before a person is needed (default 3).")
@json_option
@pass_jobs
def create(obj: JobsDirParam, job_id: str, objective: str, details: str, acceptance: tuple, files: tuple,
           from_repo: Optional[str], ref: Optional[str], model: Optional[str], worker: Optional[str],
           supervisor: Optional[str], max_steps: Optional[int], format_retries: Optional[int],
           rank: Optional[int], skill: Optional[str], params: tuple, command_policy: Optional[str],
           allowed: tuple, command_timeout: Optional[float], max_cost_usd: Optional[float],
           max_tokens: Optional[int], max_wall_seconds: Optional[float], max_retries_in_a_row: Optional[int],
           workflow: str, planner: Optional[str], extra_roles: tuple, as_json: bool) -> None:
    """Create a job and make it the current one.

    \b
    Example:
      logist job create wordcount -o "Write wc.py that counts words" -a "tests pass"
      logist job create fix --skill fix-tests --allow "python -m pytest*" --from-repo ../app
    """
    from ...engine.create import create_job

    values = {}
    for item in params:
        name, sep, value = item.partition("=")
        if not sep or not name.strip():
            raise click.UsageError(f"--param {item!r}: use NAME=VALUE")
        values[name.strip()] = value
    job = create_job(
        obj.jobs, job_id, objective, details=details, acceptance=list(acceptance), files=list(files),
        from_repo=from_repo, ref=ref, model=model, worker=worker, supervisor=supervisor,
        max_steps=max_steps, format_retries=format_retries, rank=rank, skill=skill, params=values,
        command_policy=command_policy, allowed_commands=list(allowed), command_timeout=command_timeout,
        max_cost_usd=max_cost_usd, max_tokens=max_tokens, max_wall_seconds=max_wall_seconds,
        max_retries_in_a_row=max_retries_in_a_row, workflow=workflow, planner=planner, extra_roles=list(extra_roles),
    )
    if as_json:
        print_json({"job_id": job.id, "path": str(job.dir), "status": "PENDING"})
    else:
        info(f"Created job '{job.id}' in {job.dir} (PENDING). Next: logist job step {job.id}")
