"""Read-only commands: they take no lock and never change a job."""

from __future__ import annotations

import json
from typing import Optional

import click

from ...api import held_because
from ...errors import CorruptFileError, UsageError
from ...secrets.redact import url_shown
from ...terminal import inert
from ...views.summary import actor_of, budgets, cost_known, one_line, step_row, summarise
from ..app import Application, echo, pass_app
from ..interrupt import unfinished
from ..common import (base_url_option, complete_job_ids, entry_option, fit, job_argument, json_option, labelled,
                      table_width)


@click.command("list")
@json_option
@pass_app
def list_jobs(app: Application, as_json: bool) -> None:
    """List the jobs (* marks the current one).

    \b
    Example:
      logist job list
    """
    index = app.reader.index()
    rows = []
    for job_id in index.jobs:
        try:
            manifest = app.reader.get(job_id, index).manifest()
            rows.append({"job_id": job_id, "status": str(manifest.status), "role": manifest.turn.role,
                         "steps": manifest.calls, "model_calls": manifest.totals.llm_calls,
                         "calls": manifest.calls,  # deprecated: the old name of "steps"
                         "objective": manifest.objective})
        except Exception as exc:  # a damaged job must not hide the others
            rows.append({"job_id": job_id, "status": "UNREADABLE", "role": None, "steps": None, "model_calls": None,
                         "calls": None,
                         "objective": str(exc)})
    if as_json:
        app.print_json({"current_job_id": index.current_job_id, "queue": index.queue, "jobs": rows})
        return
    if not rows:
        app.info(f"No jobs in {app.reader.path}. Create one: logist job create JOB --objective TEXT")
        return
    width = table_width()
    for row in rows:
        mark = "*" if row["job_id"] == index.current_job_id else " "
        objective = " ".join(inert(row["objective"] or "").split())
        echo(fit(f"{mark} {row['job_id']:<24} {row['status']:<22} {objective}", width))


@click.command()
@click.argument("job_id", metavar="JOB", shell_complete=complete_job_ids)
@json_option
@pass_app
def select(app: Application, job_id: str, as_json: bool) -> None:
    """Make JOB the current job.

    Commands that name no job use the current one.

    \b
    Example:
      logist job select hello
    """
    job = app.jobs.select(job_id)
    app.display(as_json, {"current_job_id": job.id, "path": str(job.dir)}, lambda: app.info(f"Current job: {job.id}"))


def _unrecorded_call(job) -> Optional[dict]:
    """A call the step journal holds and the history does not record yet."""
    found = job.unrecorded_call()
    if found is None:
        return None
    return {"step": found.sequence, "answered": found.answer is not None, "idempotency_key": found.key}


def _status_data(job, m) -> dict:
    data = {
        "job_id": m.job_id,
        "status": str(m.status),
        "role": m.turn.role,
        "steps": m.calls,
        "model_calls": m.totals.llm_calls,  # what the text's Calls says
        "calls": m.calls,  # deprecated: the old name of "steps" (not the call count), kept for a release
        "max_steps": m.settings.max_steps,
        "last_sequence": m.last_sequence,
        "workspace": str(job.workspace),
        "workspace_commit": m.workspace_commit,
        "reason": m.reason,
        "question": m.question.model_dump() if m.question else None,
        "pending_command": m.pending_command,
        "held_because": held_because(m),
        "pending_changes": m.pending_changes,
        "last_exit": m.last_exit.model_dump() if m.last_exit else None,
        "totals": {**m.totals.model_dump(), "tokens": m.totals.tokens},
        "budgets": {b.name: {"used": b.used, "limit": b.limit} for b in budgets(m)},
        "unrecorded_call": _unrecorded_call(job),
        "checks": m.settings.checks,
        "last_check": _last_check(job, m),
    }
    return data


def _last_check(job, m) -> Optional[dict]:
    last = job.check_status(m)
    return last.as_dict() if last is not None else None


def _checks_line(job, m) -> Optional[str]:
    """The job's last run of its checks, for job status and job show (None: the job has no checks and none ran)."""
    last = job.check_status(m)
    if last is None:
        return f"not run yet (logist job check {m.job_id})" if m.settings.checks else None
    due = "; due now (logist job step or logist job check runs them)" if m.checks_due else ""
    return f"{inert(last.line(), one_line=True)}{due}"


def _steps_line(m) -> str:
    """The steps the job has taken as it stands (``calls``), of ``max_steps``."""
    return (f"Steps:   {m.calls} of {m.settings.max_steps} used (answers in the history as it stands, replayed and "
            f"posted ones too; --max-steps limits them)")


def _calls_line(m) -> str:
    """Calls made to a model, tokens, cost and time so far, from the
    manifest's totals: every call made, rewound ones too (they were paid
    for); a replayed or posted answer is no call."""
    t = m.totals
    if not cost_known(t):
        cost = "cost unknown (no price for the model in config.json)"
    else:
        cost = f"${t.cost_usd:.4f}" + (f" (+{t.unpriced_calls} calls with no price)" if t.unpriced_calls else "")
    apart = [f"{n} {what} answer{'s' if n != 1 else ''}" for n, what in ((t.replayed, "replayed"), (t.posted, "posted")) if n]
    calls = f"{t.llm_calls} made to a model" + (f" ({t.unknown_calls} of unknown outcome)" if t.unknown_calls else "")
    calls += f" (and {', '.join(apart)}: no call made)" if apart else ""
    return f"Calls:   {calls}, {t.tokens} tokens ({t.prompt_tokens} in, {t.completion_tokens} out), {cost}, {t.wall_ms / 1000:.1f} s"


def _budget_line(budgets, *, with_steps: bool) -> Optional[str]:
    """The budgets that have a limit, with how much of each is used."""
    used = []
    for budget in budgets:
        if budget.limit is None or (budget.name == "steps" and not with_steps):
            continue
        if budget.name == "cost_usd":
            amount = f"${budget.used:.4f} of ${budget.limit:.4f}"
        else:
            amount = f"{budget.used:g} of {budget.limit:g}"
        used.append(f"{budget.name} {amount} ({(budget.fraction or 0) * 100:.0f}%)")
    return "Budgets: " + ", ".join(used) if used else None


@click.command()
@job_argument
@json_option
@pass_app
def status(app: Application, job_id: Optional[str], as_json: bool) -> None:
    """Show a job's state in a few lines.

    \b
    Example:
      logist job status hello
    """
    job = app.read_job(job_id)
    m = job.manifest()
    data = _status_data(job, m)
    data["stop_request"] = job.stop_request()
    if as_json:
        app.print_json(data)
        return
    echo(f"Job:     {data['job_id']}")
    echo(f"Status:  {data['status']}")
    if data["stop_request"]:
        asked = data["stop_request"]
        echo(f"Asked:   {asked['action']} (at {inert(asked['requested_at'], one_line=True)}): the runner applies it "
             "once the step in progress ends")
    echo(f"Role:    {data['role']}")
    echo(f"Entry:   {data['last_sequence']} (the history's last)")
    echo(_steps_line(m))
    echo(_calls_line(m))
    budget_line = _budget_line(budgets(m), with_steps=False)
    if budget_line:
        echo(budget_line)
    checks_line = _checks_line(job, m)
    if checks_line:
        echo(f"Checks:  {checks_line}")
    if data["reason"]:
        echo(labelled("Reason:  ", data["reason"]))
    if data["question"]:
        optional = "" if data["question"]["required"] else " (optional)"
        echo(labelled(f"Question{optional}: ", data["question"]["text"]))
    if data["pending_command"]:
        echo(f"Command: {inert(data['pending_command'], one_line=True)}  (approve-command or skip-command)")
        echo(f"Held:    because {inert(data['held_because'], one_line=True)}")
    if data["pending_changes"]:
        paths = ", ".join(inert(change["path"], one_line=True) for change in data["pending_changes"])
        echo(f"Changes: {paths}  (held for you: approve-command or skip-command)")
    if data["last_exit"]:
        le = data["last_exit"]
        # A finished job's last exit is its result (a solo job's: the Worker's [DONE] message).
        label = "Result:  " if data["status"] == "SUCCESS" else f"Last:    {le['role']} {le['action']}: "
        echo(labelled(label, le["summary"]))
    left = unfinished(job)
    if left:
        echo(f"Pending: {left}")


@click.command()
@job_argument
@json_option
@pass_app
def show(app: Application, job_id: Optional[str], as_json: bool) -> None:
    """Show a job in full: objective, state, totals, paths.

    \b
    Example:
      logist job show hello
    """
    job = app.read_job(job_id)
    m = job.manifest()
    if as_json:
        app.print_json(m.dump())
        return
    echo(f"Job {m.job_id}: {m.status}  (role {m.turn.role}; entry {m.last_sequence}; {m.calls} of "
         f"{m.settings.max_steps} steps used)")
    echo(labelled("Objective: ", m.objective))
    if m.details:
        echo(labelled("Details: ", m.details))
    if m.acceptance_criteria:
        echo("Acceptance criteria:")
        for criterion in m.acceptance_criteria:
            echo(f"  - {inert(criterion, one_line=True)}")
    if m.skill:
        params = ", ".join(f"{k}={v}" for k, v in m.skill.params.items())
        echo(f"Skill: {m.skill.name}" + (f" ({params})" if params else ""))
    if m.files:
        echo(f"Files: {', '.join(inert(path, one_line=True) for path in m.files)}")
    echo("Roles: " + ", ".join(f"{slot}={name}" for slot, name in m.roles.items()))
    if m.plan:
        echo("Plan:")
        for i, step in enumerate(m.plan):
            echo(f"  {'>' if i == m.current_plan_step else ' '} {i}. {inert(step, one_line=True)}")
    if m.plan_reasoning:
        echo(labelled("Plan reasoning: ", m.plan_reasoning))
    if m.planner_thought:
        echo(labelled("Planner's thought: ", m.planner_thought))
    if m.reason:
        echo(labelled("Reason: ", m.reason))
    if m.question:
        echo(labelled("Question: ", m.question.text))
    if m.pending_command:
        echo(f"Held command: {inert(m.pending_command, one_line=True)}")
        echo(f"Held because: {inert(held_because(m), one_line=True)}")
    if m.pending_changes:
        echo("Held file changes: " + ", ".join(inert(change["path"], one_line=True) for change in m.pending_changes))
    policy = m.settings.command_policy
    if policy == "allow":
        policy += " " + (", ".join(m.settings.allowed_commands) or "(no patterns)")
    echo(f"Command policy: {policy}")
    if m.settings.checks:
        echo("Checks: " + "; ".join(f"`{inert(c, one_line=True)}`" for c in m.settings.checks))
    checks_line = _checks_line(job, m)
    if checks_line:
        echo(f"Last run of the checks: {checks_line}")
    if m.last_exit:
        echo(labelled(f"Last exit: {m.last_exit.role} {m.last_exit.action}: ", m.last_exit.summary))
        if m.last_exit.evidence_files:
            echo(f"Evidence: {', '.join(inert(path, one_line=True) for path in m.last_exit.evidence_files)}")
    echo(_calls_line(m))
    try:
        summary = summarise(job.stored, manifest=m)
    except CorruptFileError as exc:
        echo(f"History: {exc} (the next command that changes the job repairs it)")
    else:
        for line in _summary_lines(summary):
            echo(line)
    echo(f"Directory: {job.dir}")
    echo(f"Workspace: {job.workspace} @ {(m.workspace_commit or '')[:12]}")
    if m.source.repo:
        echo(f"From: {m.source.repo} {m.source.ref or 'HEAD'} ({(m.source.commit or '')[:12]})")
    echo(f"Transcript: {job.transcript_path}")
    echo(f"Report: logist job report {m.job_id}  (an HTML timeline of every step)")


#: How many of the last history entries ``job show`` lists.
LAST_STEPS = 8


def _states_line(summary) -> str:
    names = [visit.status for visit in summary.states]
    if len(names) > 12:
        names = names[:2] + [f"... ({len(names) - 10} more) ..."] + names[-8:]
    return "States:  " + " -> ".join(names)


def _summary_lines(summary) -> list[str]:
    """What ``job show`` adds to the manifest: the same summary as the report."""
    lines = [_budget_line(summary.budgets, with_steps=True) or "Budgets: none", _states_line(summary)]
    rows = summary.rows[-LAST_STEPS:]
    lines.append(f"Last entries ({len(rows)} of {len(summary.rows)}):")
    width = table_width()
    lines += ["  " + line for line in _table(rows, "who", None if width is None else width - 2)]
    return lines


#: The least room a table leaves its summary column before it drops the time column.
SUMMARY_ROOM = 30


def _table(rows, who: str, width: Optional[int]) -> list[str]:
    """The summary's rows as a table; ``who`` names the third column, who
    acted (:func:`logist.views.summary.actor_of`: the role of a call,
    ``person``, ``Logist``): "who" in the status's table, "role" in the
    history's. That column and the action are as wide as their longest
    value, at least 10; the summary takes what is left of ``width`` (None:
    all of it). When that would be less than :data:`SUMMARY_ROOM`, the time
    column is left out."""
    names = [row.actor for row in rows]
    wn = max([10] + [len(name) for name in names])
    wa = max([10] + [len(row.action) for row in rows])
    head = f"{'seq':>4}  {'time (UTC)':<20}  {who:<{wn}} {'action':<{wa}} {'state after':<21} {'tokens':>6} {'cost':>8}  {'commit':<8}  "
    with_time = width is None or width - len(head) >= SUMMARY_ROOM

    def line(seq: str, time: str, cells: str) -> str:
        return f"{seq:>4}  " + (f"{time:<20}  " if with_time else "") + cells

    lines = [fit(line("seq", "time (UTC)", f"{who:<{wn}} {'action':<{wa}} {'state after':<21} {'tokens':>6} "
                                           f"{'cost':>8}  {'commit':<8}  summary"), width)]
    for row, name in zip(rows, names):
        tokens = "" if row.tokens is None else str(row.tokens)
        cost = "" if row.cost_usd is None else f"${row.cost_usd:.4f}"
        lines.append(fit(line(
            str(row.sequence), row.timestamp[:19] + "Z",
            f"{name:<{wn}} {row.action:<{wa}} {row.state_after:<21} {tokens:>6} {cost:>8}  "
            f"{(row.commit or '')[:8]:<8}  {one_line(inert(row.summary), 10_000)}",
        ), width))
    return lines


@click.command()
@job_argument
@entry_option("Show history entry N in full: for a call, every message of its request exactly as it was sent.")
@json_option
@pass_app
def history(app: Application, job_id: Optional[str], entry: Optional[int], as_json: bool) -> None:
    """List a job's recorded interactions as a table, or show one in full.

    With --entry N --json: the entry as recorded, plus "request_body", the
    exact Chat Completions body the call sent (rebuilt from the entries it
    continues).

    \b
    Example:
      logist job history hello
      logist job history hello --entry 3 --json
    """
    job = app.read_job(job_id)
    if entry is not None:
        _show_entry(app, job, entry, as_json)
        return
    try:
        rows = [e.dump() for e in job.entries()] if as_json else [step_row(e) for e in job.entries()]
    except CorruptFileError as exc:
        raise CorruptFileError(f"{exc} (the next command that changes the job repairs it)") from None
    if as_json:
        app.print_json(rows)
        return
    for line in _table(rows, "role", table_width()):
        echo(line)


def _show_entry(app: Application, job, number: int, as_json: bool) -> None:
    last = job.manifest().last_sequence
    if not 1 <= number <= last:
        raise UsageError(f"job '{job.id}' has no history entry {number} (it has 1 to {last})")
    full = job.entry_in_full(number)
    entry, data, body = full.entry, full.data, full.request_body
    if as_json:
        app.print_json(data | ({"request_body": body} if body is not None else {}))
        return
    echo(f"Entry {entry.sequence}: {entry.kind}, {entry.state_before} -> {entry.state_after}, {actor_of(entry)}, "
         f"{entry.timestamp}")
    if body is not None:
        for key, value in body.items():
            if key != "messages":
                echo(f"{key}: {value}")
        for message in body["messages"]:
            echo(f"\n===== {message['role']} =====")
            echo(message["content"])
    if entry.response is not None:
        echo(f"\n===== answer ({entry.response.status}) =====")
        echo(entry.response.raw_response if entry.response.raw_response is not None else entry.response.error or "")
    if entry.user_input is not None:
        echo(f"{entry.user_input.action}: {entry.user_input.text or ''}")
    if entry.note:
        echo(entry.note)


@click.command()
@job_argument
@click.option("--model", help="Preview with this model instead of the role's.")
@base_url_option
@json_option
@pass_app
def preview(app: Application, job_id: Optional[str], model: Optional[str], base_url: Optional[str], as_json: bool) -> None:
    """Show the exact next request (no call).

    --json prints the request body as the next step sends it, key for key.

    \b
    Example:
      logist job preview hello
      logist job preview hello --json
    """
    # Sized as a step sizes it: the endpoint is asked for the model's window (never called).
    preview = app.open(base_url=base_url).job(job_id).preview(model=model)
    if preview.older_format:
        app.info(f"note: {preview.older_format}")
    if as_json:
        app.print_json(preview.body)
        return
    if preview.unconfigured is not None:
        app.info(f"note: a step would stop before any call: {preview.unconfigured}")
    echo(f"POST {url_shown(preview.endpoint)}/chat/completions")
    if preview.compaction_rounds is not None:
        echo(f"(a summary call: rounds 1 to {preview.compaction_rounds} of the {preview.role}'s conversation)")
    for key, value in preview.body.items():
        if key != "messages":
            echo(f"{key}: {value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)}")
    for message in preview.body["messages"]:
        echo(f"\n===== {message['role']} =====")
        echo(message["content"])
