"""What a person does to a job: approve, reject, resubmit, answer, suspend,
resume, cancel, set. Each is a row of :data:`logist.engine.workflow.TABLE`
(who: ``person``), which gives the next state and the refusal when the job's
state has no such row; this module does the row's turn part. Each is
recorded in the history like a step. An answer, and the feedback of a reject
or a resubmit, is also listed in the manifest's ``person_inputs``, so that
every later turn's first message recalls it (read back from that entry).

``set`` (and ``resubmit`` with new budgets) changes the job's settings, which
are part of its definition: the entry records the new definition, so the
history alone still restores the manifest. A job a spent budget stopped goes
on where it stopped once ``set`` leaves no budget spent (the table's
``budget raised`` row).
"""

from __future__ import annotations

from typing import Any, Optional

from pydantic import ValidationError

from ..errors import ConfigError, JobBusyError, LogistError, TransitionError, UsageError, format_validation_error
from ..store.entries import CommandRecord, UserInput
from ..store.session import JobFiles
from ..store.manifest import JobManifest, JobSettings, Turn, utc_now
from ..store.manifest import PLANNER, WORKER
from ..store.prompts import Prompts, builtin
from ..store.roles import load_roles
from ..terminal import shown
from .apply import StepResult
from .checks import approval_refusal
from .commands import CommandWatch, execute
from .budget import SETTABLE, raise_hint, stopped_by_budget
from .session import open_locked
from .workflow import BUDGET_RAISED, PERSON, Rule, answer_protocol, describe_job_hint, find_rule, move, person_rules
from ..protocol.answer import InvalidAnswer, file_changes_from


def _fresh_turn(manifest: JobManifest, slot: str, feedback: Optional[str]) -> Turn:
    return Turn(slot=slot, role=manifest.roles[slot], feedback=feedback)


#: The person's commands whose text every later turn recalls (manifest ``person_inputs``).
REMEMBERED = ("answer", "reject", "resubmit")


def _changes_decided(changed: Optional[list[str]]) -> str:
    """What the role is told after a person decided on its held file changes."""
    if changed is None:
        return "A person declined your file changes; nothing of that answer was applied. Go on without them."
    return (
        "A person approved your file changes and they are applied"
        + (f": {', '.join(changed)}" if changed else "")
        + ". Nothing else of that answer was applied; go on from here."
    )


def _apply(
    manifest: JobManifest, rule: Rule, text: Optional[str], command: Optional[CommandRecord] = None,
    prompts: Optional[Prompts] = None,
    changed: Optional[list[str]] = None,
) -> JobManifest:
    prompts = prompts or builtin()
    after = manifest.model_copy(deep=True)
    event = rule.event.name
    if event == "reject":
        feedback = prompts.render("messages/rejected", feedback=text)
        if after.workflow == "planned":
            # The Planner goes on with its plan and conversation.
            after.turn.pending = feedback
        else:
            after.turn = _fresh_turn(after, WORKER, feedback)
        after.retries_in_a_row = 0
    elif event == "resubmit":
        slot = after.turn.slot
        if text:
            feedback = prompts.render("messages/resubmitted", reason=str(after.reason), feedback=text)
        else:
            feedback = prompts.render("messages/resubmitted_without_feedback", reason=str(after.reason))
        if after.workflow == "planned" and slot == PLANNER and after.turn.rounds:
            after.turn.pending = feedback
        else:
            after.turn = _fresh_turn(after, slot, feedback)
        after.retries_in_a_row = 0
        after.reason = None
    elif event in ("approve-command", "skip-command") and manifest.pending_changes is not None:
        after.turn.pending = _changes_decided(changed)
        after.pending_changes = None
    elif event in ("approve-command", "skip-command"):
        after.turn.pending = command.output if command is not None else prompts.render("messages/skipped_command")
        after.pending_command = None
    elif event == "skip":
        if after.question is not None and after.question.required:
            raise LogistError("this question is required; it cannot be skipped (answer it with TEXT)")
        after.turn.pending = prompts.render("messages/skipped_question")
        after.question = None
    elif event == "answer":
        if after.question is not None and after.question.required and not (text or "").strip():
            raise UsageError("this question is required, and an empty answer tells the model nothing "
                             "(it would read \"User response: \" and no more); answer it with TEXT")
        after.turn.pending = prompts.render("messages/answered", answer=text)
        after.question = None
    if event in REMEMBERED and (text or "").strip():
        # The entry about to record this command; later turns read it back.
        after.person_inputs = [*manifest.person_inputs, manifest.last_sequence + 1]
    if event == BUDGET_RAISED.name:
        after.reason = None
    move(after, rule, manifest.status)
    return after


def _with_settings(job: JobFiles, manifest: JobManifest, settings: dict[str, Any]) -> JobManifest:
    """``manifest`` with ``settings`` changed (None leaves one as it is); a
    bad value is a :class:`ConfigError` naming it."""
    changed = {name: value for name, value in settings.items() if value is not None}
    unknown = sorted(set(changed) - set(SETTABLE) - {"checks"})
    if unknown:
        raise UsageError(f"job '{job.id}': only budgets and checks can be changed ({', '.join(SETTABLE)}, checks), "
                         f"not {', '.join(unknown)}")
    try:
        new = JobSettings.model_validate({**manifest.settings.model_dump(), **changed})
    except ValidationError as exc:
        raise UsageError(format_validation_error(exc, f"job '{job.id}' settings")) from None
    updated = manifest.model_copy(deep=True)
    updated.settings = new
    return updated


def _check_waiting_for(job: JobFiles, manifest: JobManifest, rule: Rule) -> None:
    """INPUT_REQUIRED waits either for an answer or for a command decision."""
    if rule.waits_for == "question" and manifest.question is None:
        raise TransitionError(
            f"job '{job.id}' is waiting for a decision on a command, not an answer: "
            "logist job approve-command or logist job skip-command"
        )
    if rule.waits_for == "command" and manifest.pending_command is None and manifest.pending_changes is None:
        raise TransitionError(f"job '{job.id}' holds no command; it is waiting for an answer (logist job answer TEXT)")


def _apply_held_changes(job: JobFiles, manifest: JobManifest) -> tuple[list[str], Optional[str]]:
    """Apply the file changes a role's policy held, and commit them."""
    sequence = manifest.last_sequence + 1
    try:
        changes = file_changes_from(manifest.pending_changes or [])
        job.repo.plan_changes(changes)
    except InvalidAnswer as exc:
        raise LogistError(
            f"job '{job.id}': the held file changes no longer apply ({exc}); skip them (logist job skip-command)"
        ) from None
    job.session.journal.begin_applying(sequence, manifest.workspace_commit, None,
                                       doing="the file changes a person approved (approve-command)")
    changed = job.repo.apply_changes(changes)
    commit = job.repo.commit_all(
        shown(f"logist: {job.id} entry {sequence} file changes approved by a person: {', '.join(changed)}"[:200], one_line=True)
    ) or manifest.workspace_commit
    return changed, commit
def _settings_change(before: JobManifest, after: JobManifest) -> str:
    """What ``job set`` changed, in words, for the history and the transcript."""
    changes = [
        f"{name} {getattr(before.settings, name)} -> {getattr(after.settings, name)}"
        for name in SETTABLE if getattr(before.settings, name) != getattr(after.settings, name)
    ]
    if before.settings.checks != after.settings.checks:
        changes.append("checks " + (" ; ".join(after.settings.checks) or "none"))
    return ", ".join(changes) or "no change"


def user_action(
    job: JobFiles, action: str, text: Optional[str] = None, *, skip: bool = False,
    settings: Optional[dict[str, Any]] = None, lock_timeout: float = 0, at: Optional[int] = None,
    watch: Optional[CommandWatch] = None, despite_checks: bool = False, note: Optional[str] = None,
) -> JobManifest:
    """Apply a person's ``action`` to the job; returns the new manifest.

    A suspend or cancel while a step holds the job's lock is not refused as
    busy: it is asked of the step's runner (:meth:`JobFiles.request_stop`),
    which applies it before its next step (:func:`honour_stop`); the
    manifest returned is then the job's as it is, and
    :meth:`JobFiles.stop_request` says what waits. Any decision made under
    the lock replaces a stop asked for earlier. ``note``: recorded in the
    entry (why it was made when it was).

    ``despite_checks``: approve although a check failed or the checks have
    not run on the workspace's commit (:func:`logist.engine.checks.approval_refusal`),
    recorded in the entry.

    ``at``: the history entry the person decided on; a job that has moved
    on since raises :class:`~logist.errors.MovedOnError` (see
    :func:`logist.engine.session.open_locked`).

    ``settings``: new budgets (``max_steps``, ``max_cost_usd``,
    ``max_tokens``, ``max_wall_seconds``; None leaves one as it is), for
    ``set`` and ``resubmit``. ``watch``: told while the command
    ``approve-command`` runs."""
    event = "skip" if action == "answer" and skip else action
    rules = person_rules(event)
    if not rules or event in ("create", BUDGET_RAISED.name):
        raise LogistError(f"unknown action {action}")
    if action in ("reject",) and not (text or "").strip():
        raise UsageError("reject needs --feedback TEXT: say what is wrong so the Worker can fix it")
    if settings and action not in ("set", "resubmit"):
        raise LogistError(f"{action} does not change settings (job set and job resubmit do)")
    try:
        return _decide(job, action, event, rules, text, skip=skip, settings=settings, lock_timeout=lock_timeout, at=at,
                       watch=watch, despite_checks=despite_checks, note=note)
    except JobBusyError:
        if action not in JobFiles.STOPS:
            raise
        return _request_stop(job, action)


def _request_stop(job: JobFiles, action: str) -> JobManifest:
    """Ask the runner of the step in progress to ``action`` the job after it."""
    manifest = job.manifest()
    if find_rule(manifest.status, action, PERSON) is None:
        raise TransitionError(f"cannot {action} job '{job.id}': it is {manifest.status}")
    job.request_stop(action, utc_now())
    return manifest


def honour_stop(job: JobFiles, lock_timeout: float = 0) -> Optional[StepResult]:
    """Apply the suspend or cancel a person asked for while a step ran (a
    runner calls this between steps); None when none was asked, or the job
    has since reached a state it does not apply to (then it is forgotten)."""
    request = job.stop_request()
    if request is None:
        return None
    action = request["action"]
    try:
        after = user_action(job, action, lock_timeout=max(lock_timeout, 5.0),
                            note=f"asked for at {request['requested_at']} while a step ran; applied once it ended")
    except TransitionError:
        job.clear_stop_request()
        return None
    return StepResult(job.id, after.last_sequence, after.turn.role, action.upper(), after.status,
                      summary=f"{action} asked for by a person while a step ran")


def _decide(job: JobFiles, action: str, event: str, rules, text: Optional[str], *, skip: bool,
            settings: Optional[dict[str, Any]], lock_timeout: float, at: Optional[int],
            watch: Optional[CommandWatch], despite_checks: bool, note: Optional[str]) -> JobManifest:
    with open_locked(job, lock_timeout, at) as session:
        manifest = session.manifest
        settled = _with_settings(job, manifest, settings or {})
        if action == "set":
            text = _settings_change(manifest, settled)
        if action == "set" and stopped_by_budget(job, manifest) and raise_hint(job.id, settled) is None:
            event = BUDGET_RAISED
        rule = find_rule(manifest.status, event, PERSON)
        if rule is None:
            allowed = ", ".join(sorted({str(s) for r in rules for s in r.states}))
            raise TransitionError(
                f"cannot {action} job '{job.id}': it is {manifest.status} "
                f"({action} needs {allowed}); {describe_job_hint(manifest, stopped_by_budget(job, manifest))}"
            )
        _check_waiting_for(job, manifest, rule)
        overridden = approval_refusal(job, manifest) if event == "approve" else None
        if overridden is not None and not despite_checks:
            raise TransitionError(overridden)
        if overridden is not None:
            text = "approved despite its checks: " + overridden.split(": ", 1)[-1].split("; approve anyway")[0]
        command, changed = None, None
        commit = manifest.workspace_commit
        if action == "approve-command" and manifest.pending_changes is not None:
            changed, commit = _apply_held_changes(job, manifest)
        elif action == "approve-command":
            sequence = manifest.last_sequence + 1
            job.session.journal.begin_applying(sequence, manifest.workspace_commit, None,
                                               doing="the command a person approved (approve-command)")
            role = load_roles(job.jobs_dir.path)[manifest.turn.role]
            command = execute(job, manifest, manifest.pending_command or "", answer_protocol(role, manifest), watch)
            commit = job.repo.commit_all(
                shown(f"logist: {job.id} entry {sequence} command approved by a person: {command.command}"[:200], one_line=True)
            ) or commit
        prompts = Prompts(job.jobs_dir.path)
        after = _apply(settled, rule, text, command, prompts, changed)
        after.workspace_commit = commit
        if command is not None:
            after.totals.wall_ms += command.duration_ms
        entry = job.session.new_entry(manifest,
            after,
            kind="user_action",
            role=manifest.turn.role,
            user_input=UserInput(action=action if not skip else "skip", text=text,
                                 despite_checks=overridden is not None),
            workspace_commit=commit,
            command=command,
            definition=after.definition() if after.settings != manifest.settings else None,
            note=note,
        )
        job.session.record(entry, after)
        job.clear_stop_request()
        return after
