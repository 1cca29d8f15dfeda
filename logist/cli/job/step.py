"""Commands that advance a job: step, run, poststep, replay."""

from __future__ import annotations

from pathlib import Path
import time
from typing import Optional

import click

from ...api import (DEFAULT_CONCURRENCY, DEFAULT_ENGINE, CallWatch, Jobs, StepResult, check_engine, engine_names,
                   read_history)
from ...errors import ConfigError, LogistError, TransitionError, install_hint
from ..app import EXIT_BUDGET, EXIT_ERROR, EXIT_NEEDS_PERSON, Application, exit_codes_help, pass_app
from ..common import base_url_option, job_argument, json_option, wait_option
from ..progress import call_line, progress_for, step_command_lines
from .create import SpecCommand

model_option = click.option("--model", help="Use this model for this command's calls.")
quiet_option = click.option(
    "-q", "--quiet", is_flag=True,
    help="No progress line while a call is in flight, no line per call, no command output; only a line per step.",
)
timeout_option = click.option(
    "--request-timeout", type=click.FloatRange(min=0, min_open=True), envvar="LOGIST_REQUEST_TIMEOUT",
    help="Seconds to wait for the model to answer (env LOGIST_REQUEST_TIMEOUT; default: request_timeout in config.json, 30).",
)


def _reporter(app: Application, quiet: bool, with_job: bool = False):
    """What is printed after each step: its line, then (unless ``quiet``)
    the call's tokens, cost and time, and a command's output."""
    def report(result) -> None:
        app.step_line(result, with_job=with_job)
        if quiet:
            return
        for line in [call_line(result)] + step_command_lines(result):
            if line:
                app.info(line)

    return report


class EngineChoice(click.Choice):
    """``--engine``: the engines registered (:func:`logist.api.engine_names`), looked
    up when the option is checked or shown, not at every command's start."""

    def __init__(self) -> None:
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        return engine_names()

    @choices.setter
    def choices(self, value) -> None:  # click.Choice sets it; the registry holds them
        pass


def call_options(command):
    """The options of a command that calls the model (step, run): endpoint,
    model, timeouts, output."""
    for option in reversed((base_url_option, model_option, timeout_option, wait_option, quiet_option, json_option,
                            pass_app)):
        command = option(command)
    return command


@click.command(epilog=exit_codes_help())
@job_argument
@click.option("--oneshot", is_flag=True, help="Exactly one LLM call, then stop.")
@call_options
def step(app: Application, job_id: Optional[str], oneshot: bool, base_url: Optional[str], model: Optional[str],
         request_timeout: Optional[float], lock_timeout: float, quiet: bool, as_json: bool) -> None:
    """Run one role turn (--oneshot: exactly one LLM call).

    \b
    Example:
      logist job step hello --oneshot
    """
    job = app.open(base_url=base_url, request_timeout=request_timeout, lock_timeout=lock_timeout).job(job_id)
    app.at_work([job.id], f"logist job step {job.id}" + (" --oneshot" if oneshot else ""))
    report = _reporter(app, quiet)
    try:
        if oneshot:
            results = [job.call(model=model, watch=progress_for(quiet))]
            report(results[0])
        else:
            results = job.turn(model=model, on_step=report, watch=progress_for(quiet))
    except TransitionError as exc:
        app.exit_for_job(job, as_json, refused=exc)
        return
    app.finish_steps(results, as_json, base_url)


@click.command(epilog=exit_codes_help(), cls=SpecCommand, spec_fields=("max_steps",))
@job_argument
@click.option("--all", "run_all", is_flag=True, help="Run every queued job (see --engine).")
@click.option("--engine", type=EngineChoice(), envvar="LOGIST_ENGINE",
              help="With --all: one job after another (serial), several at once on threads of this process "
              f"(threads, the default), or on the nodes of a Ray cluster, one runner each (ray: {install_hint('ray')}). "
              "Env LOGIST_ENGINE.")
@click.option("--concurrency", type=click.IntRange(min=1), envvar="LOGIST_CONCURRENCY",
              help=f"With --all: at most this many jobs at once (threads, ray; default {DEFAULT_CONCURRENCY}). "
              "Env LOGIST_CONCURRENCY.")
@click.option("--address", help="With --engine ray: the cluster: auto (the default: RAY_ADDRESS, else the one "
              "`ray start --head` runs here), HOST:PORT (its head), or local (a cluster for this batch).")
@call_options
def run(app: Application, job_id: Optional[str], run_all: bool, engine: Optional[str], concurrency: Optional[int],
        address: Optional[str], base_url: Optional[str], model: Optional[str],
        request_timeout: Optional[float], lock_timeout: float, quiet: bool, as_json: bool,
        max_steps: Optional[int] = None) -> None:
    """Step the job until it needs a person or is done.

    With --all, every queued job, each under a lease (lease.json in its
    folder) so that another runner skips it meanwhile; a line as each job
    finishes. The code is the worst of the jobs': 1 when a job could not be
    run at all, else 4 when one stopped at a budget, else 3 when one needs a
    person (a job skipped because another runner holds it is not an error).
    --max-steps N sets the job's limit first, as job set --max-steps N does
    (counted from the job's start).

    \b
    Example:
      logist job run hello --base-url http://localhost:11434/v1
      logist job run hello --max-steps 20
      logist job run --all --concurrency 8
      logist job run --all --engine ray --address auto
    """
    if run_all:
        if job_id:
            raise click.UsageError("--all runs every queued job; do not name one")
        if max_steps is not None:
            raise click.UsageError("--max-steps sets one job's limit; set each job's with logist job set JOB --max-steps N")
        app.jobs.require_endpoint(base_url)  # said once, not once per job
        engine = engine or DEFAULT_ENGINE
        try:
            check_engine(engine, concurrency, address)  # an engine refuses what it cannot take (--address)
        except ConfigError as exc:
            raise click.UsageError(str(exc)) from None
        jobs = app.open(base_url=base_url, request_timeout=request_timeout, lock_timeout=lock_timeout)
        app.at_work(app.jobs.index().queue, "logist job run --all", batch=True)
        _run_queue(app, jobs, as_json, None if engine == "ray" else _reporter(app, quiet, with_job=True), engine=engine,
                   concurrency=concurrency, address=address, model=model,
                   watch=progress_for(quiet or engine != "serial"))
        return
    if engine or concurrency or address:
        raise click.UsageError("--engine, --concurrency and --address go with --all")
    job = app.open(base_url=base_url, request_timeout=request_timeout, lock_timeout=lock_timeout).job(job_id)
    if max_steps is not None and max_steps != job.manifest().settings.max_steps:
        job.set_budgets(max_steps=max_steps)  # recorded as job set records it
    app.at_work([job.id], f"logist job run {job.id}")
    try:
        results = job.run(model=model, on_step=_reporter(app, quiet), watch=progress_for(quiet))
    except TransitionError as exc:
        app.exit_for_job(job, as_json, refused=exc)
        return
    app.finish_steps(results, as_json, base_url, say_status=True)


@click.command(epilog=exit_codes_help())
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
    given = [x is not None for x in (response_file, response_string, from_history)]
    if sum(given) != 1:
        raise click.UsageError("give exactly one of --response-file, --response-string, --from-history")
    if (from_history is None) != (index is None):
        raise click.UsageError("--from-history and --index go together")
    job = app.open(lock_timeout=lock_timeout).job(job_id)
    try:
        if from_history:
            result = job.post_recorded(from_history, index)
        else:
            raw = Path(response_file).read_text(encoding="utf-8") if response_file else response_string
            result = job.post(raw)
    except TransitionError as exc:  # the answer was not applied: a finished job is an error here
        app.exit_for_job(job, as_json, refused=exc, finished_is_done=False)
        return
    _reporter(app, quiet=False)(result)
    app.finish_steps([result], as_json)


@click.command(epilog=exit_codes_help())
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
    job = app.open(lock_timeout=lock_timeout).job(job_id)
    recorded = read_history(history_file)
    results = []

    def on_entry(entry, result):
        if isinstance(result, StepResult):
            app.step_line(result)
            results.append(result.as_dict())
        else:
            app.info(f"entry {entry.sequence}: {entry.user_input.action} -> {result.status}")
            results.append({"sequence": entry.sequence, "user_action": entry.user_input.action, "status": str(result.status)})

    try:
        count = job.replay(recorded, on_entry=on_entry)
    except LogistError as exc:
        raise LogistError(f"replay stopped after {len(results)} entries: {exc}") from None
    if as_json:
        app.print_json(results)
    else:
        app.info(f"Replayed {count} entries.")
    app.exit_for_job(job, as_json)


def _run_queue(app: Application, jobs: Jobs, as_json: bool, report, *, engine: str, concurrency: Optional[int],
               address: Optional[str], model: Optional[str], watch: Optional[CallWatch]) -> None:
    started = time.monotonic()
    last: dict = {}

    def finished(o, counts) -> None:
        last["counts"] = counts
        budget = _budget_hint(app, o)
        if o.error:
            what = f"error: {o.error}"
        elif o.skipped:
            what = f"skipped: {o.skipped}"
        else:
            what = f"{o.status}" + (f" after {o.steps} step{'s' if o.steps != 1 else ''}" if o.steps else " (not run)")
        what += f": stopped at a budget: {budget}" if budget else ""
        what += f" ({o.note})" if o.note else ""
        app.info(f"{o.job_id:<24} {what}  [{counts.text()}]")

    outcomes = jobs.run_all(engine=engine, concurrency=concurrency, address=address, model=model, on_step=report,
                            on_outcome=finished, watch=watch)
    budget = {o.job_id: _budget_hint(app, o) for o in outcomes}
    if as_json:
        app.print_json([{"job_id": o.job_id, "status": str(o.status) if o.status else None, "steps": o.steps,
                         "error": o.error, "skipped": o.skipped} for o in outcomes])
    if len(outcomes) > 1 and "counts" in last:  # on stderr, with --json too
        app.info(f"Batch of {len(outcomes)} jobs ({engine}) in {time.monotonic() - started:.1f} s: "
                 f"{last['counts'].summary()}.")
    failed = [o.job_id for o in outcomes if o.error]
    if failed:
        # The jobs the batch left behind, named together: each line above says why.
        app.info(f"Left behind ({len(failed)}, each line above says why; 'logist job run --all' runs them again): "
                 + ", ".join(failed))
        app.exit(EXIT_ERROR)
    if any(budget.values()):
        app.exit(EXIT_BUDGET)
    if any(o.status is not None and not o.skipped and app.needs_person(o.status) for o in outcomes):
        app.exit(EXIT_NEEDS_PERSON)


def _budget_hint(app: Application, outcome) -> Optional[str]:
    """How to raise the budget that stopped the outcome's job, or None."""
    if outcome.status is None or str(outcome.status) != "INTERVENTION_REQUIRED":
        return None
    job = app.jobs.get(outcome.job_id)
    manifest = job.manifest()
    if not job.stopped_by_budget(manifest):
        return None
    return job.raise_hint(manifest) or manifest.reason or "see logist job status"
