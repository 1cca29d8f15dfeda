"""Commands that advance a job: step, run, poststep, replay."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Optional

import click

if TYPE_CHECKING:
    from ...engine.step import StepResult

from ..common import JobsDirParam, info, job_argument, json_option, pass_jobs, print_json, wait_option

base_url_option = click.option(
    "--base-url", envvar="LOGIST_BASE_URL", help="OpenAI-compatible endpoint (env LOGIST_BASE_URL, then OPENAI_BASE_URL, then config.json)."
)
model_option = click.option("--model", help="Use this model for this command's calls.")


def report(result: StepResult, with_job: bool = False) -> None:
    summary = (result.summary or result.error or "").strip().replace("\n", " ")
    if len(summary) > 100:
        summary = summary[:97] + "..."
    files = f" [{', '.join(result.files_changed)}]" if result.files_changed else ""
    who = f"[{result.job_id}] " if with_job else ""
    info(f"{who}#{result.sequence} {result.role} {result.action} -> {result.status}{files}" + (f"  {summary}" if summary else ""))


#: Exit status of step, run and poststep when the job ends needing intervention.
EXIT_INTERVENTION = 3


def _finish(results: list[StepResult], as_json: bool, obj: Optional[JobsDirParam] = None,
            base_url: Optional[str] = None) -> None:
    """Print the results; exit 3 when the job now needs intervention.

    A failed call's recorded reason does not name the endpoint (the model
    may be shown it); with ``obj``, the person is told which one it was."""
    if as_json:
        print_json([r.as_dict() for r in results])
    if results and results[-1].status.value == "INTERVENTION_REQUIRED":
        last = results[-1]
        if not as_json:
            reason = last.error or "see logist job status"
            if obj is not None and last.action == "ERROR" and last.error:
                from ...store.config import resolve_base_url

                reason += f" (endpoint {resolve_base_url(base_url, obj.jobs.config())})"
            info(f"Job '{last.job_id}' needs intervention: {reason}")
        click.get_current_context().exit(EXIT_INTERVENTION)


@click.command()
@job_argument
@click.option("--oneshot", is_flag=True, help="Exactly one LLM call, then stop.")
@base_url_option
@model_option
@wait_option
@json_option
@pass_jobs
def step(obj: JobsDirParam, job_id: Optional[str], oneshot: bool, base_url: Optional[str], model: Optional[str],
         lock_timeout: float, as_json: bool) -> None:
    """Run one role turn (--oneshot: exactly one LLM call).

    Exits 3 when the job ends needing intervention.

    \b
    Example:
      logist job step hello --oneshot
    """
    from ...engine.loop import step_turn
    from ...engine.step import step_once

    job = obj.job(job_id)
    kwargs = dict(base_url=base_url, model=model, lock_timeout=lock_timeout)
    if oneshot:
        results = [step_once(job, **kwargs)]
        report(results[0])
    else:
        results = step_turn(job, on_step=report, **kwargs)
    _finish(results, as_json, obj, base_url)


@click.command()
@job_argument
@click.option("--all", "run_all", is_flag=True, help="Run every queued job in queue order.")
@base_url_option
@model_option
@wait_option
@json_option
@pass_jobs
def run(obj: JobsDirParam, job_id: Optional[str], run_all: bool, base_url: Optional[str], model: Optional[str],
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
        _run_queue(obj, as_json, base_url=base_url, model=model, lock_timeout=lock_timeout)
        return
    job = obj.job(job_id)
    results = run_job(job, on_step=report, base_url=base_url, model=model, lock_timeout=lock_timeout)
    if not as_json and results and results[-1].status.value != "INTERVENTION_REQUIRED":
        info(f"Job '{job.id}' is {results[-1].status}.")
    _finish(results, as_json, obj, base_url)


@click.command()
@job_argument
@click.option("--response-file", type=click.Path(exists=True, dir_okay=False), help="Read the answer from this file.")
@click.option("--response-string", help="The answer itself.")
@click.option("--from-history", type=click.Path(exists=True, dir_okay=False), help="A jobHistory.json to take the answer from.")
@click.option("--index", type=int, help="With --from-history: the entry's sequence number.")
@wait_option
@json_option
@pass_jobs
def poststep(obj: JobsDirParam, job_id: Optional[str], response_file: Optional[str], response_string: Optional[str],
             from_history: Optional[str], index: Optional[int], lock_timeout: float, as_json: bool) -> None:
    """Apply an answer without calling the LLM.

    The answer goes through exactly the code a live step uses after its call.

    \b
    Example:
      logist job poststep hello --response-string '{"action": "MESSAGE", "message": "hi"}'
    """
    from ...replay.apply import entry_by_sequence, post_recorded, read_history_file
    from ...engine.step import post_answer

    given = [x is not None for x in (response_file, response_string, from_history)]
    if sum(given) != 1:
        raise click.UsageError("give exactly one of --response-file, --response-string, --from-history")
    if (from_history is None) != (index is None):
        raise click.UsageError("--from-history and --index go together")
    job = obj.job(job_id)
    if from_history:
        result = post_recorded(job, entry_by_sequence(read_history_file(Path(from_history)), index), lock_timeout)
    else:
        raw = Path(response_file).read_text(encoding="utf-8") if response_file else response_string
        result = post_answer(job, raw, lock_timeout=lock_timeout)
    report(result)
    _finish([result], as_json)


@click.command()
@job_argument
@click.option("--history", "history_file", required=True, type=click.Path(exists=True, dir_okay=False), help="The jobHistory.json to replay.")
@wait_option
@json_option
@pass_jobs
def replay(obj: JobsDirParam, job_id: Optional[str], history_file: str, lock_timeout: float, as_json: bool) -> None:
    """Replay a recorded history's answers (no LLM).

    Every recorded answer and decision is re-applied in order.

    \b
    Example:
      logist job replay hello --history fixtures/wordcount/jobHistory.json
    """
    from ...errors import LogistError
    from ...replay.apply import read_history_file, replay_history
    from ...engine.step import StepResult

    job = obj.job(job_id)
    recorded = read_history_file(Path(history_file))
    results = []

    def on_entry(entry, result):
        if isinstance(result, StepResult):
            report(result)
            results.append(result.as_dict())
        else:
            info(f"entry {entry.sequence}: {entry.user_input.action} -> {result.status}")
            results.append({"sequence": entry.sequence, "user_action": entry.user_input.action, "status": str(result.status)})

    try:
        count = replay_history(job, recorded, on_entry=on_entry, lock_timeout=lock_timeout)
    except LogistError as exc:
        raise LogistError(f"replay stopped after {len(results)} entries: {exc}") from None
    if as_json:
        print_json(results)
    else:
        info(f"Replayed {count} entries; job '{job.id}' is {job.manifest().status}.")


def _run_queue(obj: JobsDirParam, as_json: bool, **kwargs) -> None:
    from ...engine.loop import run_queue
    from ...store.manifest import Status

    outcomes = run_queue(obj.jobs, on_step=lambda r: report(r, with_job=True), **kwargs)
    if as_json:
        print_json([{"job_id": o.job_id, "status": str(o.status) if o.status else None, "steps": o.steps, "error": o.error}
                    for o in outcomes])
    else:
        for o in outcomes:
            what = f"error: {o.error}" if o.error else f"{o.status}" + (f" after {o.steps} step{'s' if o.steps != 1 else ''}" if o.steps else " (not run)")
            info(f"{o.job_id:<24} {what}")
    if any(o.error for o in outcomes):
        click.get_current_context().exit(1)
    if any(o.status in (Status.INTERVENTION_REQUIRED, Status.INPUT_REQUIRED) for o in outcomes):
        click.get_current_context().exit(EXIT_INTERVENTION)
