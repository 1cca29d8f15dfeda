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
from ..protocol.answer import Answer, InvalidAnswer, check_planner_answer, parse_answer
from ..secrets.redact import known_secrets, redact
from ..store.config import LogistConfig
from ..store.entries import FAILED, CommandRecord, Response, Usage
from ..store.session import JobFiles
from ..store.manifest import PLANNER, JobManifest, Status
from ..store.roles import send_to_names
from ..terminal import shown
from ..workspace.repository import UnreadableFiles
from .outcome import Outcome
from .budget import count_call, stopped_by_budget
from .commands import CommandWatch, held_because, run_or_hold
from .prepare import Prepared
from .transition import Call, apply_answer, apply_event, hold_changes, holds_file_changes, refuse_answer
from .workflow import CALL_FAILED, CALL_INTERRUPTED, COMPACTION, STEPPABLE, UNREADABLE, describe_job_hint

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
    try:
        return _apply_answer(job, before, prepared, outcome, kind, watch)
    except Exception as exc:
        return record_failure(job, before, prepared, outcome, kind, exc)


#: The longest exception message a failed step's reason quotes.
_REASON_CHARS = 300


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
    if opened is not None and opened.head_before:
        job.repo.reset_to(opened.head_before)  # undo what was applied of it
    commit = opened.head_before if opened is not None and opened.head_before else job.repo.head()
    after = before.model_copy(deep=True)
    after.calls = before.calls + 1
    rule = apply_event(after, CALL_FAILED, reason)
    after.workspace_commit = commit
    # The request as sent when there was a call (the journal's), else the prepared one.
    request = outcome.saved.request if outcome.saved is not None else None
    request = request if request is not None or prepared is None else outcome.request(prepared)
    role = (request.metadata.role if request else None) or (prepared.role.name if prepared else before.turn.role)
    model = (request.metadata.model if request else None) or (prepared.model if prepared else "")
    try:
        config = prepared.config if prepared is not None else job.jobs_dir.config()
    except Exception:  # a config.json that cannot be read: the call is counted at the shipped prices
        config = LogistConfig()
    cost, priced = count_call(after, config, model, outcome, kind)
    entry = job.session.new_entry(before, after, kind=kind, role=role, request=request,
        response=Response(status=FAILED, raw_response=outcome.raw, error=reason),
        usage=Usage(prompt_tokens=outcome.prompt_tokens, completion_tokens=outcome.completion_tokens, cost_usd=cost,
                    estimated=outcome.estimated),
        duration_ms=round(outcome.duration * 1000), workspace_commit=commit, note=outcome.note,
    )
    job.session.record(entry, after)
    return StepResult(
        job_id=job.id, sequence=sequence, role=role, action="ERROR", status=after.status, commit=commit,
        error=reason, prompt_tokens=outcome.prompt_tokens, completion_tokens=outcome.completion_tokens,
        called=outcome.called, model=model, cost_usd=cost, priced=priced, tokens_estimated=outcome.estimated,
        duration_ms=round(outcome.duration * 1000), turn=rule.turn,
    )


def _apply_answer(job: JobFiles, before: JobManifest, prepared: Prepared, outcome: Outcome, kind: str,
                  watch: Optional[CommandWatch] = None) -> StepResult:
    """:func:`apply_outcome` up to an exception."""
    config = prepared.config
    after = before.model_copy(deep=True)
    after.calls = before.calls + 1
    sequence = before.last_sequence + 1
    call = Call(sequence, full=prepared.prompt.continues is None)
    answer: Optional[Answer] = None
    command: Optional[CommandRecord] = None
    files_changed: list[str] = []
    status_label = "SUCCESS"
    error = outcome.error
    held = False
    planned: list = []
    if error is not None:
        status_label = "ERROR"
        rule = apply_event(after, CALL_INTERRUPTED if outcome.fault == "transient" else CALL_FAILED, error)
    else:
        planner = before.workflow == "planned" and before.turn.slot == PLANNER
        try:
            answer = _redacted(parse_answer(outcome.raw or "", prepared.protocol, planner=planner))
            if planner:
                addressed = [n for slot, n in before.roles.items() if slot != PLANNER]
                check_planner_answer(answer, send_to_names(prepared.prompts.roles, addressed), before.plan)
            held = holds_file_changes(answer, prepared.role)
            planned = job.repo.plan_changes(answer.file_changes)
        except InvalidAnswer as exc:
            status_label = "INVALID"
            error = cut_answer(outcome, prepared) if outcome.finish_reason == "length" else str(exc)
            answer = None
            rule = refuse_answer(after, call, error, prepared.prompts, prepared.protocol)
    head_before = before.workspace_commit
    action = answer.action if answer else status_label
    # Only an answer with file changes or a command can change the workspace;
    # the others need no git process at all.
    touches = answer is not None and not held and bool(answer.file_changes or answer.action == "CMD")
    # Workspace files git cannot read: everything else is committed, the job stops for a person.
    unreadable: Optional[UnreadableFiles] = None
    if touches and job.repo.is_dirty():
        # A person edited the workspace by hand since the last step. Commit
        # that on its own, so it is neither mixed into the model's commit nor
        # lost if this step has to be undone.
        try:
            head_before = job.repo.commit_all(
                f"logist: {job.id} changes made by hand before entry {sequence}"
            ) or head_before
        except UnreadableFiles as exc:
            head_before, unreadable = exc.commit or head_before, exc
    commit = head_before
    # From here on a crash is repaired from the journal, which also keeps the
    # answer: one that was paid for is never lost from the record.
    job.session.journal.begin_applying(sequence, head_before, outcome.raw, outcome.saved)
    failpoint("after_call")
    if answer is not None and held:
        rule = hold_changes(after, before, answer, call)
        after.reason, after.question = None, None
    elif answer is not None:
        # Files that are there now are tracked (the workspace is clean or its
        # hand edits were just committed), so git can commit them by name.
        by_name = answer.action != "CMD" and all(os.path.lexists(target) for target, _data, _rel in planned)
        files_changed = job.repo.apply_changes(answer.file_changes, planned)
        failpoint("after_apply")
        if answer.action == "CMD":
            started = outcome.saved is not None and outcome.saved.command_pgid is not None
            command = run_or_hold(job, before, answer.command or "", interrupted=started, protocol=prepared.protocol,
                                  watch=watch)
            if started:
                outcome.note = "; ".join(n for n in (outcome.note, INTERRUPTED_COMMAND) if n)
        rule = apply_answer(after, before, answer, call, command, prepared.prompts)
        if after.status != Status.INTERVENTION_REQUIRED:
            after.reason = None
        if after.status != Status.INPUT_REQUIRED:
            after.question = None
        if files_changed or (command is not None and command.decision == "run"):
            message = _commit_message(
                job.id, sequence, prepared.role.name, action, answer.summary_for_supervisor or answer.message
            )
            repo = job.repo
            try:
                commit = (repo.commit_paths(message, files_changed) if by_name else repo.commit_all(message)) or head_before
            except UnreadableFiles as exc:
                commit, unreadable = exc.commit or head_before, exc
        failpoint("after_commit")
    if unreadable is not None and after.status in STEPPABLE:
        rule = apply_event(after, UNREADABLE, str(unreadable))
    elif unreadable is not None:  # the job waits for a person already (a question, an approval)
        log.warning("job %s: %s", job.id, unreadable)
    after.workspace_commit = commit
    cost, priced = count_call(after, config, prepared.model, outcome, kind)
    response = Response(
        status=FAILED if status_label == "ERROR" else status_label,  # the step's label; the entry's status
        actions=[answer.action] if answer else [],
        evidence_files=answer.evidence_files if answer else [],
        summary_for_supervisor=answer.summary_for_supervisor if answer else None,
        raw_response=outcome.raw,
        error=error,
        finish_reason=outcome.finish_reason if outcome.finish_reason not in (None, "stop") else None,
        fault=outcome.fault if error is not None and outcome.fault == "transient" else None,
        files_changed=files_changed,
        notes=answer.notes if answer else [],
        extra_fields=answer.extra if answer else {},
    )
    usage = Usage(
        prompt_tokens=outcome.prompt_tokens,
        completion_tokens=outcome.completion_tokens,
        cost_usd=cost,
        estimated=outcome.estimated,
    )
    entry = job.session.new_entry(before,
        after,
        kind=kind,
        role=prepared.role.name,
        request=outcome.request(prepared),
        response=response,
        usage=usage,
        duration_ms=round(outcome.duration * 1000),
        workspace_commit=commit,
        command=command,
        note=outcome.note,
    )
    job.session.record(entry, after)
    return StepResult(
        job_id=job.id,
        sequence=sequence,
        role=prepared.role.name,
        action=action,
        status=after.status,
        summary=_summary_of(answer, held),
        commit=commit,
        files_changed=files_changed,
        error=error,
        prompt_tokens=outcome.prompt_tokens,
        completion_tokens=outcome.completion_tokens,
        **_call_facts(prepared, outcome, cost, priced),
        command=command.command if command else None,
        command_output=command.output if command else None,
        command_exit_code=command.exit_code if command else None,
        command_duration_ms=command.duration_ms if command else None,
        held_because=held_because(after),
        turn=rule.turn,
    )


def _call_facts(prepared: Prepared, outcome: Outcome, cost: Optional[float], priced: bool) -> dict:
    return dict(called=outcome.called, model=prepared.model, cost_usd=cost, priced=priced,
                tokens_estimated=outcome.estimated, duration_ms=round(outcome.duration * 1000))


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
    entry = job.session.new_entry(before, after, kind="compaction", role=prepared.role.name,
        request=outcome.request(prepared),
        response=Response(status=status, raw_response=outcome.raw, error=error),
        usage=Usage(prompt_tokens=outcome.prompt_tokens, completion_tokens=outcome.completion_tokens, cost_usd=cost,
                    estimated=outcome.estimated),
        duration_ms=round(outcome.duration * 1000),
        workspace_commit=before.workspace_commit,
        note=(f"summarised rounds 1 to {target}" if error is None else
              f"summary call failed; the prompt keeps the full conversation: {error}")
        + ("; the summary was applied from a recorded history, no call was made" if replayed else ""),
    )
    job.session.record(entry, after)
    return StepResult(job.id, entry.sequence, prepared.role.name, action, after.status, summary=entry.note, error=error,
                      prompt_tokens=outcome.prompt_tokens, completion_tokens=outcome.completion_tokens,
                      **_call_facts(prepared, outcome, cost, priced), turn=rule.turn)
