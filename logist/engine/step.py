"""One step: lock, read, check, build the prompt, call once, apply, commit, record.

:func:`step_once` is a live step; :func:`post_answer` applies an answer that
did not come from a call (``job poststep``, ``job replay``). Both end in
:func:`_apply`, the one piece of code that turns an answer into file changes,
a commit, a history entry and a new manifest, so a recorded history replays
to the same states and the same workspace.
"""

from __future__ import annotations

import time
from pathlib import Path
from dataclasses import dataclass, field
from typing import Callable, Optional

from . import compaction
from ..store import recovery as journal
from ..store.config import LogistConfig, resolve_api_key, resolve_base_url
from ..errors import LLMCallError, LogistError, TransitionError
from ..failpoints import failpoint
from ..store.history import CommandRecord, Request, RequestMetadata, Response, Usage
from ..store.jobsdir import Job
from ..store.manifest import Handoff, JobManifest, Message, Question, Turn
from .prompt import Prompt, build_prompt
from ..protocol import Answer, InvalidAnswer, check_planner_answer, parse_answer
from ..resources import data_dir
from ..store.roles import RoleManifest, load_roles
from .workflow import (
    PLANNER,
    PLANNER_ROUTES,
    STEPPABLE,
    SUPERVISOR,
    USER,
    WORKER,
    Status,
    describe_state_hint,
    exit_transition,
)

CONTINUE_AFTER_MESSAGE = "[Continue after informational message]"
#: Step results after which ``job step`` makes another call in the same turn.
CONTINUES_TURN = ("MESSAGE", "INVALID", "CMD", "COMPACTED", "COMPACTION_FAILED")


@dataclass
class StepResult:
    """What one step did, for the CLI and for callers of the library."""

    job_id: str
    sequence: int
    role: str
    action: str
    status: Status
    summary: Optional[str] = None
    commit: Optional[str] = None
    files_changed: list[str] = field(default_factory=list)
    error: Optional[str] = None
    prompt_tokens: Optional[int] = None
    completion_tokens: Optional[int] = None

    def as_dict(self) -> dict:
        data = dict(self.__dict__)
        data["status"] = str(self.status)
        return data


@dataclass
class Prepared:
    prompt: Prompt
    role: RoleManifest
    model: str
    metadata: RequestMetadata
    response_format: Optional[dict] = None
    temperature: Optional[float] = None
    #: config.json as read once for this step.
    config: Optional[LogistConfig] = None


@dataclass
class Outcome:
    """The result of a call (or a posted answer), before it is applied."""

    raw: Optional[str] = None
    error: Optional[str] = None
    prompt_tokens: Optional[int] = None
    completion_tokens: Optional[int] = None
    duration: float = 0.0


def resolve_model(config: LogistConfig, manifest: JobManifest, role: RoleManifest, override: Optional[str]) -> str:
    """``--model`` > the job's model > config ``models[role]`` > a jobs-dir
    role's own model > config ``default_model`` > the built-in role's model."""
    if override:
        return override
    if manifest.model:
        return manifest.model
    if role.name in config.models:
        return config.models[role.name]
    # A jobs directory's own manifest names its model on purpose; only a
    # built-in role's model gives way to config.json's default_model.
    builtin = role.source is not None and Path(role.source).parent == data_dir("roles")
    if not builtin:
        return role.llm_model
    return config.default_model or role.llm_model


def prepare(job: Job, manifest: JobManifest, model_override: Optional[str] = None) -> Prepared:
    """Everything about the next call that does not need the network."""
    from ..errors import NotFoundError

    jobs_dir = job.jobs_dir.path
    roles = load_roles(jobs_dir)
    role_name = manifest.turn.role
    if role_name not in roles:
        raise NotFoundError(f"job '{job.id}' needs role '{role_name}', which is not defined")
    role = roles[role_name]
    config = job.jobs_dir.config()
    model = resolve_model(config, manifest, role, model_override)
    prompt = build_prompt(manifest, role, job.workspace, jobs_dir, roles)
    metadata = RequestMetadata(
        role=role.name, phase=str(manifest.status), model=model, temperature=role.temperature, max_tokens=role.max_tokens
    )
    return Prepared(prompt=prompt, role=role, model=model, metadata=metadata,
                    response_format=role.response_format, temperature=role.temperature, config=config)


def _check_steppable(job: Job, manifest: JobManifest) -> None:
    if manifest.status not in STEPPABLE:
        raise TransitionError(
            f"job '{job.id}' is {manifest.status}; it cannot be stepped: {describe_state_hint(manifest.status)}"
        )


def _cost(config: LogistConfig, model: str, outcome: Outcome) -> Optional[float]:
    price = config.prices.get(model)
    if price is None or outcome.prompt_tokens is None or outcome.completion_tokens is None:
        return None
    return round(
        (outcome.prompt_tokens * price.input_per_million + outcome.completion_tokens * price.output_per_million)
        / 1_000_000,
        8,
    )


def _add_to_totals(
    after: JobManifest, outcome: Outcome, cost: Optional[float], command: Optional[CommandRecord], priced: bool
) -> None:
    totals = after.totals
    totals.llm_calls += 1
    totals.prompt_tokens += outcome.prompt_tokens or 0
    totals.completion_tokens += outcome.completion_tokens or 0
    if not priced:
        totals.unpriced_calls += 1
    elif cost is not None:
        totals.cost_usd = round(totals.cost_usd + cost, 8)
    totals.wall_seconds = round(totals.wall_seconds + outcome.duration + (command.duration_seconds if command else 0), 3)


def _commit_message(job_id: str, seq: int, role: str, action: str, summary: Optional[str]) -> str:
    first = (summary or "").strip().splitlines()[0] if (summary or "").strip() else ""
    if len(first) > 100:
        first = first[:97] + "..."
    subject = f"logist: {job_id} step {seq} {role} {action}" + (f": {first}" if first else "")
    body = (summary or "").strip()
    return subject + ("\n\n" + body if body and body != first else "")


def _intervention(after: JobManifest, reason: str) -> None:
    after.status = Status.INTERVENTION_REQUIRED
    after.reason = reason


def _next_turn(after: JobManifest, slot: str, feedback: Optional[str]) -> None:
    after.turn = Turn(slot=slot, role=after.roles[slot], feedback=feedback)


def _transition(
    after: JobManifest, before: JobManifest, answer: Answer, sent: str, raw: str, command: Optional[CommandRecord]
) -> None:
    """Move ``after`` to the state the answer leads to (the workflow table)."""
    turn = after.turn
    action = answer.action
    conversation = turn.messages + [Message(role="user", content=sent), Message(role="assistant", content=raw)]
    planner = after.workflow == "planned" and turn.slot == PLANNER
    if before.status == Status.PENDING:
        after.status = Status.RUNNING if turn.slot in (WORKER, PLANNER) or after.workflow == "planned" else before.status
    if planner and answer.plan is not None:
        after.plan, after.current_plan_step = list(answer.plan), answer.current_plan_step
    if action == "MESSAGE" and not planner:
        turn.messages, turn.pending = conversation, CONTINUE_AFTER_MESSAGE
        return
    if action == "ASK":
        turn.messages, turn.pending = conversation, None
        after.question = Question(text=answer.question or answer.message or "", required=answer.required)
        after.resume_status = after.status
        after.status = Status.INPUT_REQUIRED
        return
    if action == "CMD":
        turn.messages = conversation
        if command is None or command.decision == "ask":
            turn.pending = None
            after.pending_command = answer.command
            after.resume_status = after.status
            after.status = Status.INPUT_REQUIRED
        elif command.decision == "deny":
            turn.pending = (
                f"The command was refused: this job's command policy does not allow running commands.\n$ {answer.command}\n"
                "Continue without it, or finish your turn."
            )
        else:
            turn.pending = command.output
        return
    if after.workflow == "planned":
        _route_planned(after, answer, conversation)
        return
    # An exit command.
    after.last_exit = Handoff(
        role=turn.role, action=action, summary=answer.summary_for_supervisor or "", evidence_files=answer.evidence_files
    )
    nxt = exit_transition(before.status, turn.slot, action)
    if nxt is None:
        turn.messages, turn.pending = conversation, None
        _intervention(after, f"the workflow has no transition for {action} from {turn.role} in {before.status}")
        return
    if action == "RETRY":
        after.retries_in_a_row += 1
        limit = after.settings.max_retries_in_a_row
        if after.retries_in_a_row > limit:
            turn.messages, turn.pending = conversation, None
            _intervention(after, f"{after.retries_in_a_row} RETRYs in a row (limit {limit}); last: {answer.summary_for_supervisor}")
            return
    elif action == "COMPLETED" and turn.slot == SUPERVISOR:
        # A RETRY sends work round the Worker-Supervisor loop; only an
        # accepted review ends the run of RETRYs.
        after.retries_in_a_row = 0
    summary = (answer.summary_for_supervisor or "").strip()
    if nxt.turn == "stop":
        turn.messages, turn.pending = conversation, None
        after.status = nxt.status
        if nxt.status == Status.INTERVENTION_REQUIRED:
            after.reason = f"{turn.role} is STUCK: {summary}"
        return
    after.status = nxt.status
    if nxt.turn == "handoff":
        _next_turn(after, nxt.slot, None)
    elif turn.slot == SUPERVISOR:
        _next_turn(after, nxt.slot, f"The {turn.role} reviewed your work and sent it back:\n{summary}")
    else:
        _next_turn(after, nxt.slot, f"Your previous attempt ended with RETRY:\n{summary}\nStart afresh with a different approach.")


def _route_planned(after: JobManifest, answer: Answer, conversation: list[Message]) -> None:
    """The planned workflow (SPEC section 7; table in ``workflow.PLANNER_ROUTES``)."""
    turn = after.turn
    action = answer.action
    summary = (answer.summary_for_supervisor or answer.message or "").strip()
    if turn.slot != PLANNER:
        # The addressed role's exit command goes back to the Planner.
        after.last_exit = Handoff(role=turn.role, action=action, summary=summary, evidence_files=answer.evidence_files)
        report = f"The {turn.role} finished its turn with {action}:\n{summary}"
        if answer.evidence_files:
            report += "\nEvidence files: " + ", ".join(answer.evidence_files)
        planner_turn = after.planner_turn or Turn(slot=PLANNER, role=after.roles[PLANNER])
        planner_turn.pending = report
        after.turn, after.planner_turn = planner_turn, None
        after.status = Status.RUNNING
        return
    addressee = USER if answer.send_to == USER else "role"
    status, how = PLANNER_ROUTES[(action, addressee)]
    turn.messages, turn.pending = conversation, None
    after.status = status
    if how == "delegate":
        slot = next(s for s, name in after.roles.items() if name == answer.send_to and s != PLANNER)
        after.planner_turn = turn
        after.turn = Turn(slot=slot, role=answer.send_to, task=answer.message)
    elif how == "continue":
        turn.pending = CONTINUE_AFTER_MESSAGE
    elif how == "done":
        after.last_exit = Handoff(role=turn.role, action=action, summary=summary)
    elif how == "fresh":
        _next_turn(after, PLANNER, f"Your previous attempt ended with RETRY:\n{summary}\nMake a fresh plan.")
    else:
        after.reason = f"{turn.role} is STUCK: {summary}"


def _invalid(after: JobManifest, sent: str, raw: Optional[str], reason: str) -> None:
    turn = after.turn
    if turn.format_retries_used < after.settings.format_retries:
        turn.format_retries_used += 1
        turn.messages = turn.messages + [Message(role="user", content=sent), Message(role="assistant", content=raw or "")]
        turn.pending = (
            f"Your last answer was refused: {reason}\n"
            "Nothing from it was applied. Answer again with exactly one JSON object as the protocol describes."
        )
        if after.status == Status.PENDING and (turn.slot in (WORKER, PLANNER) or after.workflow == "planned"):
            after.status = Status.RUNNING
    else:
        _intervention(after, f"invalid answer from {turn.role}: {reason}")


def _apply(job: Job, before: JobManifest, prepared: Prepared, outcome: Outcome) -> StepResult:
    """Everything after the call; shared by live steps and posted answers."""
    from .. import workspace as ws

    config = prepared.config or job.jobs_dir.config()
    sent = prepared.prompt.messages[-1]["content"]
    after = before.model_copy(deep=True)
    after.steps = before.steps + 1
    sequence = before.last_sequence + 1
    answer: Optional[Answer] = None
    command: Optional[CommandRecord] = None
    files_changed: list[str] = []
    status_label = "SUCCESS"
    error = outcome.error
    if error is not None:
        status_label = "ERROR"
        _intervention(after, error)
    else:
        try:
            answer = parse_answer(outcome.raw or "")
            if before.workflow == "planned" and before.turn.slot == PLANNER:
                check_planner_answer(answer, [n for slot, n in before.roles.items() if slot != PLANNER])
            ws.plan_changes(job.workspace, answer.file_changes)
        except InvalidAnswer as exc:
            status_label = "INVALID"
            error = str(exc)
            answer = None
            _invalid(after, sent, outcome.raw, error)
    head_before = before.workspace_commit
    action = answer.action if answer else status_label
    # Only an answer with file changes or a command can change the workspace;
    # the others need no git process at all.
    touches = answer is not None and bool(answer.file_changes or answer.action == "CMD")
    if touches and ws.is_dirty(job.workspace):
        # A person edited the workspace by hand since the last step. Commit
        # that on its own, so it is neither mixed into the model's commit nor
        # lost if this step has to be undone.
        head_before = ws.commit_all(
            job.workspace, f"logist: {job.id} changes made by hand before step {sequence}"
        ) or head_before
    commit = head_before
    # From here on a crash is repaired from the journal, which also keeps the
    # answer: one that was paid for is never lost from the record.
    journal.begin_applying(job.dir, sequence, head_before, outcome.raw)
    failpoint("after_call")
    if answer is not None:
        files_changed = ws.apply_changes(job.workspace, answer.file_changes)
        failpoint("after_apply")
        if answer.action == "CMD":
            command = run_or_hold(job, before, answer.command or "")
        _transition(after, before, answer, sent, outcome.raw or "", command)
        if after.status != Status.INTERVENTION_REQUIRED:
            after.reason = None
        if after.status != Status.INPUT_REQUIRED:
            after.question = None
        if files_changed or (command is not None and command.decision == "run"):
            message = _commit_message(
                job.id, sequence, prepared.role.name, action, answer.summary_for_supervisor or answer.message
            )
            commit = ws.commit_all(job.workspace, message) or head_before
        failpoint("after_commit")
    after.workspace_commit = commit
    cost = _cost(config, prepared.model, outcome)
    _add_to_totals(after, outcome, cost, command, priced=prepared.model in config.prices)
    response = Response(
        status=status_label,
        actions=[answer.action] if answer else [],
        evidence_files=answer.evidence_files if answer else [],
        summary_for_supervisor=answer.summary_for_supervisor if answer else None,
        raw_response=outcome.raw,
        error=error,
        files_changed=files_changed,
    )
    usage = Usage(
        prompt_tokens=outcome.prompt_tokens,
        completion_tokens=outcome.completion_tokens,
        cost_usd=cost,
    )
    entry = journal.new_entry(
        job.dir,
        job.workspace,
        before,
        after,
        kind="llm_call",
        role=prepared.role.name,
        request=Request(
            prompt=[Message(**m) for m in prepared.prompt.messages],
            files_context=prepared.prompt.files_context,
            metadata=prepared.metadata,
        ),
        response=response,
        usage=usage,
        duration_seconds=round(outcome.duration, 3),
        workspace_commit=commit,
        command=command,
    )
    journal.record(job.dir, entry, after)
    return StepResult(
        job_id=job.id,
        sequence=sequence,
        role=prepared.role.name,
        action=action,
        status=after.status,
        summary=(answer.summary_for_supervisor or answer.message or answer.question or answer.command) if answer else None,
        commit=commit,
        files_changed=files_changed,
        error=error,
        prompt_tokens=outcome.prompt_tokens,
        completion_tokens=outcome.completion_tokens,
    )


def execute(job: Job, manifest: JobManifest, command: str) -> CommandRecord:
    """Run a command in the job's workspace with the job's limits."""
    from .commands import run_command

    settings = manifest.settings
    result = run_command(command, job.workspace, settings.command_timeout, settings.command_output_limit)
    return CommandRecord(
        command=command,
        decision="run",
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        duration_seconds=round(result.duration, 3),
        output=result.report(settings.command_timeout),
    )


def run_or_hold(job: Job, manifest: JobManifest, command: str) -> CommandRecord:
    """Apply the job's command policy: run now, hold for a person, or refuse."""
    from .commands import decide

    decision = decide(manifest.settings.command_policy, manifest.settings.allowed_commands, command)
    if decision == "run":
        return execute(job, manifest, command)
    return CommandRecord(command=command, decision=decision)


def _limit_reason(manifest: JobManifest) -> Optional[str]:
    """Why the next call must not be sent, or None (budgets, SPEC section 5)."""
    settings, totals = manifest.settings, manifest.totals
    if manifest.steps >= settings.max_steps:
        return f"max steps reached ({manifest.steps} of {settings.max_steps})"
    if settings.max_cost_usd is not None and totals.cost_usd >= settings.max_cost_usd:
        return f"cost budget spent (${totals.cost_usd:.4f} of ${settings.max_cost_usd:.4f})"
    if settings.max_tokens is not None and totals.tokens >= settings.max_tokens:
        return f"token budget spent ({totals.tokens} of {settings.max_tokens} tokens)"
    if settings.max_wall_seconds is not None and totals.wall_seconds >= settings.max_wall_seconds:
        return f"time budget spent ({totals.wall_seconds:.1f} s of {settings.max_wall_seconds:g} s)"
    return None


def _stop_for_limit(job: Job, manifest: JobManifest, reason: str) -> StepResult:
    after = manifest.model_copy(deep=True)
    _intervention(after, reason)
    entry = journal.new_entry(
        job.dir, job.workspace, manifest, after, kind="limit", role=manifest.turn.role,
        note=f"no call was made: {reason}", workspace_commit=manifest.workspace_commit,
    )
    journal.record(job.dir, entry, after)
    return StepResult(job.id, entry.sequence, manifest.turn.role, "LIMIT", after.status, error=reason)


def _call(job: Job, prepared: Prepared, base_url: Optional[str]) -> Outcome:
    from ..llm import LLMSettings, chat

    config = prepared.config or job.jobs_dir.config()
    settings = LLMSettings(
        base_url=resolve_base_url(base_url, config),
        api_key=resolve_api_key(),
        timeout=config.request_timeout,
        max_retries=config.max_retries,
    )
    started = time.monotonic()
    try:
        reply = chat(
            settings,
            model=prepared.model,
            messages=prepared.prompt.messages,
            temperature=prepared.temperature,
            max_tokens=prepared.metadata.max_tokens,
            response_format=prepared.response_format,
        )
    except LLMCallError as exc:
        return Outcome(error=str(exc), duration=time.monotonic() - started)
    return Outcome(
        raw=reply.content,
        prompt_tokens=reply.prompt_tokens,
        completion_tokens=reply.completion_tokens,
        duration=time.monotonic() - started,
    )


def _locked_step(
    job: Job, lock_timeout: float, produce: Callable[[Prepared], Outcome], model: Optional[str], mode: str
) -> StepResult:
    """``mode``: "live" makes the summary call when compaction is due, else
    the role's call; "answer" always applies the role's answer (poststep);
    "summary" applies a recorded summary (replay)."""
    with job.lock(lock_timeout):
        manifest, _notes = journal.open_job(job.dir, job.workspace)
        _check_steppable(job, manifest)
        reason = _limit_reason(manifest)
        if reason:
            return _stop_for_limit(job, manifest, reason)
        prepared = prepare(job, manifest, model)
        target = compaction.due(manifest.turn, prepared.role) if mode != "answer" else None
        if mode == "summary" and target is None:
            raise LogistError(f"job '{job.id}' has no compaction due; the recorded summary does not fit here")
        if target is not None:
            summary_call = _prepare_compaction(job, manifest, prepared, target)
            return _apply_compaction(job, manifest, summary_call, target, produce(summary_call))
        return _apply(job, manifest, prepared, produce(prepared))


def _prepare_compaction(job: Job, manifest: JobManifest, prepared: Prepared, target: int) -> Prepared:
    messages = compaction.request(manifest.turn, prepared.role, job.id, target)
    metadata = RequestMetadata(
        role=prepared.role.name, phase="compaction", model=prepared.model, temperature=0.2, max_tokens=None
    )
    return Prepared(prompt=Prompt(messages=messages), role=prepared.role, model=prepared.model, metadata=metadata,
                    response_format=None, temperature=0.2, config=prepared.config)


def _apply_compaction(job: Job, before: JobManifest, prepared: Prepared, target: int, outcome: Outcome) -> StepResult:
    """Record a summary call; on success the turn's summary covers ``target`` rounds."""
    config = prepared.config or job.jobs_dir.config()
    after = before.model_copy(deep=True)
    turn = after.turn
    if outcome.error is None and (outcome.raw or "").strip():
        turn.summary, turn.summarised_rounds, turn.compaction_failed_at = outcome.raw.strip(), target, None
        status, action, error = "SUCCESS", "COMPACTED", None
    else:
        turn.compaction_failed_at = turn.rounds
        error = outcome.error or "the summary call returned an empty summary"
        status, action = "ERROR", "COMPACTION_FAILED"
    cost = _cost(config, prepared.model, outcome)
    _add_to_totals(after, outcome, cost, None, priced=prepared.model in config.prices)
    entry = journal.new_entry(
        job.dir, job.workspace, before, after, kind="compaction", role=prepared.role.name,
        request=Request(prompt=[Message(**m) for m in prepared.prompt.messages], metadata=prepared.metadata),
        response=Response(status=status, raw_response=outcome.raw, error=error),
        usage=Usage(prompt_tokens=outcome.prompt_tokens, completion_tokens=outcome.completion_tokens, cost_usd=cost),
        duration_seconds=round(outcome.duration, 3),
        workspace_commit=before.workspace_commit,
        note=(f"summarised rounds 1 to {target}" if error is None else
              f"summary call failed; the prompt keeps the full conversation: {error}"),
    )
    journal.record(job.dir, entry, after)
    return StepResult(job.id, entry.sequence, prepared.role.name, action, after.status, summary=entry.note, error=error,
                      prompt_tokens=outcome.prompt_tokens, completion_tokens=outcome.completion_tokens)


def step_once(job: Job, *, base_url: Optional[str] = None, model: Optional[str] = None, lock_timeout: float = 0) -> StepResult:
    """Exactly one LLM call (``job step --oneshot``): the role's, or a summary
    call when the role's conversation is due for compaction."""
    return _locked_step(job, lock_timeout, lambda prepared: _call(job, prepared, base_url), model, "live")


def post_answer(
    job: Job,
    raw: Optional[str],
    *,
    error: Optional[str] = None,
    prompt_tokens: Optional[int] = None,
    completion_tokens: Optional[int] = None,
    model: Optional[str] = None,
    lock_timeout: float = 0,
    summary: bool = False,
) -> StepResult:
    """Apply an answer without calling the model (``job poststep``); with
    ``summary``, ``raw`` is a recorded compaction summary (``job replay``)."""
    outcome = Outcome(raw=raw, error=error, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens)
    return _locked_step(job, lock_timeout, lambda _prepared: outcome, model, "summary" if summary else "answer")


def _step_while(job: Job, go_on: Callable[[StepResult], bool], on_step, kwargs) -> list[StepResult]:
    results = []
    while True:
        result = step_once(job, **kwargs)
        results.append(result)
        if on_step:
            on_step(result)
        if not go_on(result):
            return results


def step_turn(job: Job, *, on_step: Optional[Callable[[StepResult], None]] = None, **kwargs) -> list[StepResult]:
    """One role turn: calls until an exit command or until a person is needed."""
    return _step_while(job, lambda r: r.status in STEPPABLE and r.action in CONTINUES_TURN, on_step, kwargs)


def run_job(job: Job, *, on_step: Optional[Callable[[StepResult], None]] = None, **kwargs) -> list[StepResult]:
    """Turns until the job needs a person or is done."""
    return _step_while(job, lambda r: r.status in STEPPABLE, on_step, kwargs)


@dataclass
class QueueOutcome:
    job_id: str
    status: Optional[Status]
    steps: int = 0
    error: Optional[str] = None


def run_queue(jobs_dir, *, on_step: Optional[Callable[[StepResult], None]] = None, **kwargs) -> list[QueueOutcome]:
    """``job run --all``: every queued job in queue order, each to its resting
    state. A job that fails (busy, damaged, misconfigured) is reported and
    the others still run. Jobs that have finished leave the queue."""
    from ..errors import LogistError

    outcomes: list[QueueOutcome] = []
    finished: list[str] = []
    for job_id in jobs_dir.read_index().queue:
        try:
            job = jobs_dir.job(job_id)
            with job.lock(kwargs.get("lock_timeout", 0)):
                status = journal.open_job(job.dir, job.workspace)[0].status  # repairs what it can
            if status not in STEPPABLE:
                if status in (Status.SUCCESS, Status.CANCELED):
                    finished.append(job_id)
                outcomes.append(QueueOutcome(job_id, status))
                continue
            results = run_job(job, on_step=on_step, **kwargs)
            outcomes.append(QueueOutcome(job_id, results[-1].status, steps=len(results)))
        except (LogistError, OSError) as exc:
            outcomes.append(QueueOutcome(job_id, None, error=str(exc)))
    if finished:
        with jobs_dir.index_lock():
            index = jobs_dir.read_index()
            index.queue = [j for j in index.queue if j not in finished]
            jobs_dir.write_index(index)
    return outcomes
