"""Applying an answer: the one piece of code that turns a call's outcome (or
an answer that did not come from a call) into file changes, a commit, a
history entry and a new manifest, so a recorded history replays to the same
states and the same workspace.

:func:`apply_outcome` applies an answer; :func:`apply_compaction` a summary
call's; :func:`record_failure` records a call that failed. :mod:`.step`
runs them after a live call or for a posted answer, :mod:`.call` when it
finishes a step from an answer saved before a crash.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from typing import Optional

from pydantic import BaseModel

from ..errors import NotSteppableError
from ..failpoints import failpoint
from ..protocol.answer import Answer, InvalidAnswer, action_of, check_planner_answer, parse_answer
from ..secrets.redact import known_secrets, redact
from ..store.config import LogistConfig
from ..store.entries import FAILED, CommandRecord, Request, Response, Usage
from ..store.session import JobFiles
from ..store.manifest import PLANNER, SUPERVISOR, JobManifest, Status
from ..store.roles import send_to_names
from ..terminal import shown
from ..workspace.repository import UnreadableFiles
from .outcome import Outcome
from .budget import count_call, stopped_by_budget
from .commands import CommandWatch, held_because, run_or_hold
from .prepare import Prepared
from .transition import Call, apply_answer, apply_event, hold_changes, holds_file_changes, refuse_answer
from .workflow import CALL_FAILED, CALL_INTERRUPTED, COMPACTION, LIMIT, STEPPABLE, UNREADABLE, Rule, describe_job_hint

log = logging.getLogger("logist")

#: What an entry finished from a saved answer says when its command had been started.
INTERRUPTED_COMMAND = ("its command was interrupted when the process ended; it is not run again on its own: "
                       "held for a person (logist job approve-command runs it, skip-command skips it)")


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
    #: Whether the step made a call (not a posted or replayed answer, not a limit).
    called: bool = False
    model: Optional[str] = None
    #: The call's cost; None when the model has no price (see ``priced``) or no tokens are known.
    cost_usd: Optional[float] = None
    priced: bool = True
    #: The tokens were estimated from the text: the endpoint reported no usage.
    tokens_estimated: bool = False
    duration_ms: int = 0
    #: A command the answer ran: the command, its cleaned output (as the model is shown it) and exit code.
    command: Optional[str] = None
    command_output: Optional[str] = None
    command_exit_code: Optional[int] = None
    #: How long the command ran (None: none ran).
    command_duration_ms: Optional[int] = None
    #: Why the command the answer asked for is held for a person (the rule of the
    #: job's command policy that held it: :func:`logist.engine.commands.judge`); None: none is held.
    held_because: Optional[str] = None
    #: What the workflow table's row the step applied does to the turn (a key of
    #: :data:`~logist.engine.workflow.TURN_EFFECTS`): whether ``job step`` calls again.
    turn: Optional[str] = None

    @property
    def interrupted(self) -> bool:
        """The endpoint failed for now and the turn is kept: a loop of steps
        stops here (the next command goes on with the same conversation)."""
        return self.action == "ERROR" and self.status in STEPPABLE

    def as_dict(self) -> dict:
        data = dict(self.__dict__)
        data["status"] = str(self.status)
        return data


def check_steppable(job: JobFiles, manifest: JobManifest) -> None:
    if manifest.status not in STEPPABLE:
        hint = describe_job_hint(manifest, stopped_by_budget(job, manifest))
        raise NotSteppableError(
            f"job '{job.id}' is {manifest.status}; it cannot be stepped: {hint}",
            manifest.status,
        )


def _commit_message(job_id: str, seq: int, role: str, action: str, summary: Optional[str]) -> str:
    """The step's commit message; the summary in it is inert and redacted
    (:func:`logist.terminal.shown`): ``git log`` prints it as it is."""
    summary = shown(summary) if summary else summary
    first = (summary or "").strip().splitlines()[0] if (summary or "").strip() else ""
    if len(first) > 100:
        first = first[:97] + "..."
    subject = f"logist: {job_id} entry {seq} {role} {action}" + (f": {first}" if first else "")
    body = (summary or "").strip()
    # No process argument can carry a NUL byte: one in a summary is shown as U+2400.
    return (subject + ("\n\n" + body if body and body != first else "")).replace("\x00", "\u2400")


def cut_answer(outcome: Outcome, prepared: Prepared) -> str:
    """Why an answer the endpoint cut at ``max_tokens`` is refused: not the
    model's malformed JSON but an answer too long for its budget, which the
    re-ask says."""
    size = f"{outcome.completion_tokens:,} tokens" if outcome.completion_tokens is not None else "its token limit"
    budget = prepared.body.get("max_tokens")
    limit = f" (max_tokens {budget:,})" if budget else ""
    return (f"the answer was cut at {size}{limit} before it was complete: answer again, shorter "
            "(write fewer or smaller files at a time, keep thoughts and summaries brief)")


def _summary_of(answer: Optional[Answer], held: bool) -> Optional[str]:
    if answer is None:
        return None
    if held:
        paths = ", ".join(change.path for change in answer.file_changes)
        return f"file changes held until a person approves or skips them (approve-command / skip-command): {paths}"
    return answer.summary_for_supervisor or answer.message or answer.question or answer.command


def check_evidence(workspace, answer: Answer, planned: list) -> None:
    """The work's evidence names files the workspace has once the answer's
    file changes are applied; else :class:`InvalidAnswer`, re-asked with the reason."""
    after_changes = {rel: data is not None for _target, data, rel in planned}
    missing = [path for path in answer.evidence_files
               if not after_changes.get(path, os.path.lexists(os.path.join(workspace, path)))]
    if missing:
        names = ", ".join(missing)
        raise InvalidAnswer(f"evidence_files: {names} {'is' if len(missing) == 1 else 'are'} not in the workspace; "
                            "name only files that are there (or that this answer's file_changes write)")


def _redacted(answer: Answer) -> Answer:
    """``answer`` with every known secret in its texts redacted. The raw
    answer is redacted as it arrives (engine/call.py), but parsing is a
    transformation too: a secret written there only in an escaped spelling
    (``"sk-\\u0061bc..."`` in JSON) shows once parsed, and would otherwise be
    written into the workspace, its commits, the history and the terminal."""
    secrets = known_secrets()
    if not secrets:
        return answer

    def texts(value):
        if isinstance(value, str):
            return redact(value, secrets)
        if isinstance(value, list):
            changed = [texts(item) for item in value]
            return value if all(a is b for a, b in zip(changed, value)) else changed
        if isinstance(value, BaseModel):
            updates = {name: texts(getattr(value, name)) for name in value.model_fields_set}
            updates = {name: new for name, new in updates.items() if new is not getattr(value, name)}
            return value.model_copy(update=updates) if updates else value
        return value

    return texts(answer)


def apply_outcome(job: JobFiles, before: JobManifest, prepared: Prepared, outcome: Outcome, kind: str,
                  watch: Optional[CommandWatch] = None) -> StepResult:
    """Everything after the call; shared by live steps and posted answers.

    ``kind``: llm_call (a live call), poststep or replay (an answer that
    did not come from a call here); ``watch`` is told while a command the
    answer asks for runs. Nothing an answer holds raises past
    here: an exception no check foresaw is recorded by :func:`record_failure`."""
    if outcome.agent is not None and kind == "llm_call":
        kind = "agent_run"
    try:
        return _apply_answer(job, before, prepared, outcome, kind, watch)
    except Exception as exc:
        return record_failure(job, before, prepared, outcome, kind, exc)


#: The longest exception message a failed step's reason quotes.
_REASON_CHARS = 300


def _failed_request(before: JobManifest, prepared: Optional[Prepared],
                    outcome: Outcome) -> tuple[Optional[Request], str, str]:
    """A failed step's request (as sent when there was a call: the journal's;
    else the prepared one), its role and its model."""
    request = outcome.saved.request if outcome.saved is not None else None
    request = request if request is not None or prepared is None else outcome.request(prepared)
    role = (request.metadata.role if request else None) or (prepared.role.name if prepared else before.turn.role)
    model = (request.metadata.model if request else None) or (prepared.model if prepared else "")
    return request, role, model


def _failed_config(job: JobFiles, prepared: Optional[Prepared]) -> LogistConfig:
    try:
        return prepared.config if prepared is not None else job.jobs_dir.config()
    except Exception:  # a config.json that cannot be read: the call is counted at the shipped prices
        return LogistConfig()


def record_failure(job: JobFiles, before: JobManifest, prepared: Optional[Prepared], outcome: Outcome, kind: str,
                   exc: Exception) -> StepResult:
    """Record an answer whose applying raised: the backstop.

    The call and its answer are kept in an entry of status ERROR, counted
    like any call; the workspace is put back where the step's journal says
    it was, the journal is closed (by :meth:`JobSession.record`) and the job
    waits for a person at INTERVENTION_REQUIRED with the reason. Without
    this, the journal would keep the answer and recovery would apply it
    again, and fail again, on every command (cancel included). ``prepared``
    is None when the step could not even be prepared (recovery: the job's
    roles or config changed); the request is then the journal's. Raises
    ``exc`` again when the step was recorded after all (what failed came
    later: the manifest, the journal's removal; recovery finishes those).
    """
    sequence = before.last_sequence + 1
    last = job.last_entry()
    if last is not None and last.sequence >= sequence:
        raise exc
    log.debug("job %s: the answer of step %d could not be applied", job.id, sequence, exc_info=exc)
    text = " ".join(str(exc).split())
    text = text if len(text) <= _REASON_CHARS else text[: _REASON_CHARS - 3] + "..."
    reason = redact(f"the answer could not be applied ({type(exc).__name__}: {text}); "
                    "it is kept in this step's history entry")
    opened = job.session.journal.pending_applying(sequence)
    usable = job.repo.exists()  # a .git removed or replaced cannot be reset: the answer is recorded all the same
    if opened is not None and opened.head_before and usable:
        job.repo.reset_to(opened.head_before)  # undo what was applied of it
    commit = (opened.head_before if opened is not None and opened.head_before else
              job.repo.head() if usable else before.workspace_commit)
    after = before.model_copy(deep=True)
    after.calls = before.calls + 1
    rule = apply_event(after, CALL_FAILED, reason)
    after.workspace_commit = commit
    request, role, model = _failed_request(before, prepared, outcome)
    cost, priced = count_call(after, _failed_config(job, prepared), model, outcome, kind)
    return record_step(
        job, before, after, rule, kind=kind, role=role, action="ERROR", workspace_commit=commit, outcome=outcome,
        cost=cost, priced=priced, model=model, request=request,
        response=Response(status=FAILED, raw_response=outcome.raw, error=reason), note=outcome.note,
        commit=commit, error=reason,
    )


@dataclass
class _Reading:
    """An outcome read as an answer: the answer (None: the call failed or the
    answer was refused), whether its file changes are held, their plan, and
    the row already applied for one that is not applied."""

    answer: Optional[Answer] = None
    held: bool = False
    planned: list = field(default_factory=list)
    status: str = "SUCCESS"
    error: Optional[str] = None
    rule: Optional[Rule] = None


def _read_answer(job: JobFiles, before: JobManifest, after: JobManifest, prepared: Prepared, outcome: Outcome,
                 call: Call) -> _Reading:
    """The outcome's answer, checked; a failed call or a refused answer has its row applied here."""
    if outcome.error is not None:
        event = CALL_INTERRUPTED if outcome.fault == "transient" else CALL_FAILED
        return _Reading(status="ERROR", error=outcome.error, rule=apply_event(after, event, outcome.error))
    planner = before.workflow == "planned" and before.turn.slot == PLANNER
    try:
        answer = _redacted(parse_answer(outcome.raw or "", prepared.protocol, planner=planner,
                                        plan=before.plan if planner else None))
        if planner:
            addressed = [n for slot, n in before.roles.items() if slot != PLANNER]
            check_planner_answer(answer, send_to_names(prepared.prompts.roles, addressed), before.plan)
        held = holds_file_changes(answer, prepared.role)
        planned = job.repo.plan_changes(answer.file_changes)
        if before.turn.slot != SUPERVISOR:
            check_evidence(job.workspace, answer, planned)
        return _Reading(answer, held, planned)
    except InvalidAnswer as exc:
        error = cut_answer(outcome, prepared) if outcome.finish_reason == "length" else str(exc)
        return _Reading(status="INVALID", error=error, rule=refuse_answer(after, call, error, prepared.prompts,
                                                                          prepared.protocol))


def commit_hand_edits(job: JobFiles, sequence: int, head_before: Optional[str]) -> tuple[Optional[str], Optional[UnreadableFiles]]:
    """A person edited the workspace by hand since the last step: that is
    committed on its own, so it is neither mixed into the model's commit nor
    lost if this step has to be undone. The commit to start from, and the
    files git could not read (everything else is committed; the job stops for a person)."""
    if not job.repo.is_dirty():
        return head_before, None
    try:
        return job.repo.commit_all(f"logist: {job.id} changes made by hand before entry {sequence}") or head_before, None
    except UnreadableFiles as exc:
        return exc.commit or head_before, exc


@dataclass
class _Applied:
    """What applying an answer did to the workspace."""

    commit: Optional[str]
    files_changed: list[str] = field(default_factory=list)
    command: Optional[CommandRecord] = None
    unreadable: Optional[UnreadableFiles] = None


def _apply_to_workspace(job: JobFiles, before: JobManifest, after: JobManifest, prepared: Prepared, outcome: Outcome,
                        reading: _Reading, call: Call, done: _Applied, watch: Optional[CommandWatch]) -> Rule:
    """The answer's file changes, what its action does (its ``run`` hook:
    a command), its row, and the step's commit; the row."""
    answer, sequence = reading.answer, call.sequence
    action = action_of(answer.action)
    # Files that are there now are tracked (the workspace is clean or its
    # hand edits were just committed), so git can commit them by name.
    by_name = not action.touches_workspace and all(os.path.lexists(target) for target, _data, _rel in reading.planned)
    done.files_changed = job.repo.apply_changes(answer.file_changes, reading.planned)
    failpoint("after_apply")
    started = outcome.saved is not None and outcome.saved.command_pgid is not None

    def run_command(command: str) -> CommandRecord:
        if started:
            outcome.note = "; ".join(n for n in (outcome.note, INTERRUPTED_COMMAND) if n)
        return run_or_hold(job, before, command, interrupted=started, protocol=prepared.protocol, watch=watch)

    done.command = action.run(answer, run_command)
    rule = apply_answer(after, before, answer, call, done.command, prepared.prompts)
    if after.status != Status.INTERVENTION_REQUIRED:
        after.reason = None
    if after.status != Status.INPUT_REQUIRED:
        after.question = None
    if done.files_changed or (done.command is not None and done.command.decision == "run"):
        message = _commit_message(job.id, sequence, prepared.role.name, answer.action,
                                  answer.summary_for_supervisor or answer.message)
        try:
            commit = job.repo.commit_paths(message, done.files_changed) if by_name else job.repo.commit_all(message)
            done.commit = commit or done.commit
        except UnreadableFiles as exc:
            done.commit, done.unreadable = exc.commit or done.commit, exc
    failpoint("after_commit")
    return rule


def _response(reading: _Reading, outcome: Outcome, files_changed: list[str]) -> Response:
    """The entry's response: the answer as read, or why there is none."""
    answer, error = reading.answer, reading.error
    read = dict(actions=[answer.action], evidence_files=answer.evidence_files,
                summary_for_supervisor=answer.summary_for_supervisor, notes=answer.notes,
                extra_fields=answer.extra) if answer is not None else {}
    return Response(
        status=FAILED if reading.status == "ERROR" else reading.status,  # the step's label; the entry's status
        raw_response=outcome.raw,
        error=error,
        finish_reason=outcome.finish_reason if outcome.finish_reason not in (None, "stop") else None,
        fault=outcome.fault if error is not None and outcome.fault == "transient" else None,
        files_changed=files_changed,
        **read,
    )


def _command_facts(command: Optional[CommandRecord]) -> dict:
    if command is None:
        return {}
    return dict(command=command.command, command_output=command.output, command_exit_code=command.exit_code,
                command_duration_ms=command.duration_ms)


def _agent_work(job: JobFiles, before: JobManifest, outcome: Outcome,
                sequence: int) -> tuple[Optional[str], Optional[UnreadableFiles]]:
    """Put a coding agent's work in the workspace, the journal saying where
    it started: the commit its run started from, and files git could not read.

    A live run's work is there already (its journal's ``head_before`` is the
    commit it started from, a person's edits committed before it ran). A
    replayed or posted one's, or one whose applying a crash undid, is its
    recorded patch, applied to a clean workspace (a person's edits committed
    first)."""
    saved = outcome.saved
    if saved is not None and saved.head_before:
        head_before, unreadable = saved.head_before, None
    else:
        head_before, unreadable = commit_hand_edits(job, sequence, before.workspace_commit)
    # From here on a crash is repaired from the journal: the workspace goes back to head_before.
    job.session.journal.begin_applying(sequence, head_before, outcome.raw, saved)
    head = job.repo.head()
    if head_before and head != head_before:
        # The agent committed its work itself: its commits are folded into the step's (and kept under a ref).
        job.repo.keep_ref(f"refs/logist/agent/{sequence}", head)
        job.repo.fold_to(head_before)
    elif outcome.agent.patch and not job.repo.is_dirty():
        job.repo.apply_patch(outcome.agent.patch)
    return head_before, unreadable


def _apply_answer(job: JobFiles, before: JobManifest, prepared: Prepared, outcome: Outcome, kind: str,
                  watch: Optional[CommandWatch] = None) -> StepResult:
    """:func:`apply_outcome` up to an exception: one path for every action,
    which asks the answer's action (:class:`logist.protocol.actions.Action`)
    what it does."""
    after = before.model_copy(deep=True)
    after.calls = before.calls + (1 if outcome.answered else 0)  # a call that brought no answer is no step
    call = Call(before.last_sequence + 1, full=prepared.prompt.continues is None)
    work = outcome.agent
    if work is not None:  # a coding agent's run: its work is in the workspace (or its patch, replayed)
        head_before, unreadable = _agent_work(job, before, outcome, call.sequence)
    if work is not None and work.budget_stop is not None:
        # The gateway refused its calls at a budget: the run was cut short, whatever it ended with.
        error = f"the agent's run was stopped at the gateway: {work.budget_stop}"
        reading = _Reading(status="ERROR", error=error, rule=apply_event(after, LIMIT, work.budget_stop))
    else:
        reading = _read_answer(job, before, after, prepared, outcome, call)
    answer, rule = reading.answer, reading.rule
    applies = answer is not None and not reading.held
    if work is None:
        # Only an answer with file changes or a command can change the workspace;
        # the others need no git process at all.
        touches = applies and bool(answer.file_changes or action_of(answer.action).touches_workspace)
        head_before, unreadable = (commit_hand_edits(job, call.sequence, before.workspace_commit) if touches
                                   else (before.workspace_commit, None))
        # From here on a crash is repaired from the journal, which also keeps the
        # answer: one that was paid for is never lost from the record. A call's
        # answer that leaves the workspace alone is kept already (its journal's
        # ``answered``, which recovery applies as it would this): no write.
        if touches or outcome.saved is None:
            job.session.journal.begin_applying(call.sequence, head_before, outcome.raw, outcome.saved)
    done = _Applied(commit=head_before)
    failpoint("after_call")
    if applies:
        rule = _apply_to_workspace(job, before, after, prepared, outcome, reading, call, done, watch)
        unreadable = unreadable or done.unreadable
    elif answer is not None:
        rule = hold_changes(after, before, answer, call)
        after.reason, after.question = None, None
    action = "LIMIT" if work is not None and work.budget_stop is not None else \
        answer.action if answer else reading.status
    if work is not None:
        # The agent's work is the step's commit, whatever became of its answer.
        done.files_changed = list(work.changed_files)
        message = _commit_message(job.id, call.sequence, prepared.role.name, action,
                                  (answer.summary_for_supervisor if answer else None) or reading.error)
        try:
            done.commit = job.repo.commit_all(message) or done.commit
        except UnreadableFiles as exc:
            done.commit, unreadable = exc.commit or done.commit, unreadable or exc
    if unreadable is not None and after.status in STEPPABLE:
        rule = apply_event(after, UNREADABLE, str(unreadable))
    elif unreadable is not None:  # the job waits for a person already (a question, an approval)
        log.warning("job %s: %s", job.id, unreadable)
    after.workspace_commit = done.commit
    cost, priced = count_call(after, prepared.config, prepared.model, outcome, kind)
    return record_step(
        job, before, after, rule, kind=kind, role=prepared.role.name,
        action=action, workspace_commit=done.commit, outcome=outcome,
        request=outcome.request(prepared), response=_response(reading, outcome, done.files_changed),
        cost=cost, priced=priced, model=prepared.model, command_record=done.command, note=outcome.note, commit=done.commit,
        summary=_summary_of(answer, reading.held), files_changed=done.files_changed, error=reading.error,
        held_because=held_because(after), **_command_facts(done.command),
    )


def record_step(job: JobFiles, before: JobManifest, after: JobManifest, rule: Rule, *, kind: str, role: str, action: str,
                workspace_commit: Optional[str], outcome: Optional[Outcome] = None, cost: Optional[float] = None,
                priced: bool = True, model: Optional[str] = None, request: Optional[Request] = None,
                response: Optional[Response] = None, command_record: Optional[CommandRecord] = None,
                note: Optional[str] = None, **facts) -> StepResult:
    """The one place a step's history entry is built and recorded (with
    ``after``, the manifest it leaves), and its :class:`StepResult`.

    Callers pass what differs: what the entry records besides the state
    (``workspace_commit``; ``request``, ``response``, ``command_record``
    and ``note`` when there are), and the result's other ``facts``; an
    ``outcome`` (a call's, or an answer's that did not come from one) gives
    the entry's usage and duration and the result's call facts (``cost``,
    ``priced``: :func:`~logist.engine.budget.count_call`'s; ``model``)."""
    given = dict(request=request, response=response, command=command_record, note=note,
                 agent=outcome.agent if outcome is not None else None)
    fields = {name: value for name, value in given.items() if value is not None}
    if outcome is not None:
        duration_ms = round(outcome.duration * 1000)
        fields["usage"] = Usage(prompt_tokens=outcome.prompt_tokens, completion_tokens=outcome.completion_tokens,
                                cost_usd=cost, estimated=outcome.estimated)
        fields["duration_ms"] = duration_ms
        facts.update(prompt_tokens=outcome.prompt_tokens, completion_tokens=outcome.completion_tokens,
                     called=outcome.called, model=model, cost_usd=cost, priced=priced,
                     tokens_estimated=outcome.estimated, duration_ms=duration_ms)
    entry = job.session.new_entry(before, after, kind=kind, role=role,
                                  workspace_commit=workspace_commit, **fields)
    job.session.record(entry, after)
    return StepResult(job.id, entry.sequence, role, action, after.status, turn=rule.turn, **facts)


def apply_compaction(job: JobFiles, before: JobManifest, prepared: Prepared, outcome: Outcome, replayed: bool) -> StepResult:
    """Record a summary call; on success the turn's summary covers the
    prepared call's target rounds, and the next call sends its prompt in
    full (the summary in place of those rounds)."""
    config = prepared.config
    target = prepared.compaction_target
    after = before.model_copy(deep=True)
    turn = after.turn
    if outcome.error is None and (outcome.raw or "").strip():
        turn.summary, turn.summarised_rounds, turn.compaction_failed_at = outcome.raw.strip(), target, None
        turn.prompt_call = None
        status, action, error = "SUCCESS", "COMPACTED", None
    else:
        turn.compaction_failed_at = turn.rounds
        error = outcome.error or "the summary call returned an empty summary"
        status, action = FAILED, "COMPACTION_FAILED"
    # The compaction row: the state stays, the turn goes on (summarised, or whole when the summary call failed).
    rule = apply_event(after, COMPACTION)
    cost, priced = count_call(after, config, prepared.model, outcome, "replay" if replayed else "llm_call")
    note = (f"summarised rounds 1 to {target}" if error is None else
            f"summary call failed; the prompt keeps the full conversation: {error}")
    note += "; the summary was applied from a recorded history, no call was made" if replayed else ""
    return record_step(
        job, before, after, rule, kind="compaction", role=prepared.role.name, action=action,
        workspace_commit=before.workspace_commit, outcome=outcome, cost=cost, priced=priced, model=prepared.model,
        request=outcome.request(prepared), response=Response(status=status, raw_response=outcome.raw, error=error),
        note=note, summary=note, error=error,
    )
