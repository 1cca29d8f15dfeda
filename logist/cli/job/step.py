"""Commands that advance a job: step, run, poststep, replay."""

from __future__ import annotations

from typing import Optional

import click

from ..app import EXIT_ERROR, EXIT_NEEDS_PERSON, Application, pass_app
from ..common import base_url_option, job_argument, json_option, wait_option

model_option = click.option("--model", help="Use this model for this command's calls.")


@click.command()
@job_argument
@click.option("--oneshot", is_flag=True, help="Exactly one LLM call, then stop.")
@base_url_option
@model_option
@wait_option
@json_option
@pass_app
def step(app: Application, job_id: Optional[str], oneshot: bool, base_url: Optional[str], model: Optional[str],
         lock_timeout: float, as_json: bool) -> None:
    """Run one role turn (--oneshot: exactly one LLM call).

    Exits 3 when the job ends needing intervention.

    \b
    Example:
      logist job step hello --oneshot
    """
    from ...engine.loop import step_turn
    from ...engine.step import step_once

    job = app.job(job_id)
    kwargs = dict(base_url=base_url, model=model, lock_timeout=lock_timeout)
    if oneshot:
        results = [step_once(job, **kwargs)]
        app.step_line(results[0])
    else:
        results = step_turn(job, on_step=app.step_line, **kwargs)
    app.finish_steps(results, as_json, base_url)


@click.command()
@job_argument
@click.option("--all", "run_all", is_flag=True, help="Run every queued job in queue order.")
@base_url_option
@model_option
@wait_option
@json_option
@pass_app
def run(app: Application, job_id: Optional[str], run_all: bool, base_url: Optional[str], model: Optional[str],
        lock_timeout: float, as_json: bool) -> None:
    """Step the job until it needs a person or is done.

    Exits 3 when the job (with --all: any job) ends needing intervention or
    an answer, and 1 when a job could not be run at all.

    \b
    Example:
      logist job run hello --base-url http://localhost:11434/v1
      logist job run --all
    """
    from ...engine.loop import run_job

    if run_all:
        if job_id:
            raise click.UsageError("--all runs every queued job; do not name one")
        _run_queue(app, as_json, base_url=base_url, model=model, lock_timeout=lock_timeout)
        return
    job = app.job(job_id)
    results = run_job(job, on_step=app.step_line, base_url=base_url, model=model, lock_timeout=lock_timeout)
    if not as_json and results and results[-1].status.value != "INTERVENTION_REQUIRED":
        app.info(f"Job '{job.id}' is {results[-1].status}.")
    app.finish_steps(results, as_json, base_url)


@click.command()
@job_argument
@click.option("--response-file", type=click.Path(exists=True, dir_okay=False), help="Read the answer from this file.")
@click.option("--response-string", help="The answer itself.")
@click.option("--from-history", type=click.Path(exists=True, dir_okay=False), help="A jobHistory.json to take the answer from.")
@click.option("--index", type=int, help="With --from-history: the entry's sequence number.")
@wait_option
@json_option
@pass_app
def poststep(app: Application, job_id: Optional[str], response_file: Optional[str], response_string: Optional[str],
             from_history: Optional[str], index: Optional[int], lock_timeout: float, as_json: bool) -> None:
    """Apply an answer without calling the LLM.

    The answer goes through exactly the code a live step uses after its call.

    \b
    Example:
      logist job poststep hello --response-string '{"action": "MESSAGE", "message": "hi"}'
    """
    from pathlib import Path

    from ...replay.apply import entry_by_sequence, post_recorded, read_history_file
    from ...engine.step import post_answer

    given = [x is not None for x in (response_file, response_string, from_history)]
    if sum(given) != 1:
        raise click.UsageError("give exactly one of --response-file, --response-string, --from-history")
    if (from_history is None) != (index is None):
        raise click.UsageError("--from-history and --index go together")
    job = app.job(job_id)
    if from_history:
        result = post_recorded(job, entry_by_sequence(read_history_file(Path(from_history)), index), lock_timeout)
    else:
        raw = Path(response_file).read_text(encoding="utf-8") if response_file else response_string
        result = post_answer(job, raw, lock_timeout=lock_timeout)
    app.step_line(result)
    app.finish_steps([result], as_json)


@click.command()
@job_argument
@click.option("--history", "history_file", required=True, type=click.Path(exists=True, dir_okay=False), help="The jobHistory.json to replay.")
@wait_option
@json_option
@pass_app
def replay(app: Application, job_id: Optional[str], history_file: str, lock_timeout: float, as_json: bool) -> None:
    """Replay a recorded history's answers (no LLM).

    Every recorded answer and decision is re-applied in order.

    \b
    Example:
      logist job replay hello --history fixtures/wordcount/jobHistory.json
    """
    from pathlib import Path

    from ...errors import LogistError
    from ...replay.apply import read_history_file, replay_history
    from ...engine.step import StepResult

    job = app.job(job_id)
    recorded = read_history_file(Path(history_file))
    results = []

    def on_entry(entry, result):
        if isinstance(result, StepResult):
            app.step_line(result)
            results.append(result.as_dict())
        else:
            app.info(f"entry {entry.sequence}: {entry.user_input.action} -> {result.status}")
            results.append({"sequence": entry.sequence, "user_action": entry.user_input.action, "status": str(result.status)})

    try:
        count = replay_history(job, recorded, on_entry=on_entry, lock_timeout=lock_timeout)
    except LogistError as exc:
        raise LogistError(f"replay stopped after {len(results)} entries: {exc}") from None
    if as_json:
        app.print_json(results)
    else:
        app.info(f"Replayed {count} entries; job '{job.id}' is {job.manifest().status}.")


def _run_queue(app: Application, as_json: bool, **kwargs) -> None:
    from ...engine.loop import run_queue

    outcomes = run_queue(app.jobs, on_step=lambda r: app.step_line(r, with_job=True), **kwargs)
    if as_json:
        app.print_json([{"job_id": o.job_id, "status": str(o.status) if o.status else None, "steps": o.steps, "error": o.error}
                    for o in outcomes])
    else:
        for o in outcomes:
            what = f"error: {o.error}" if o.error else f"{o.status}" + (f" after {o.steps} step{'s' if o.steps != 1 else ''}" if o.steps else " (not run)")
            app.info(f"{o.job_id:<24} {what}")
    if any(o.error for o in outcomes):
        app.exit(EXIT_ERROR)
    if any(o.status is not None and app.needs_person(o.status, with_input=True) for o in outcomes):
        app.exit(EXIT_NEEDS_PERSON)
