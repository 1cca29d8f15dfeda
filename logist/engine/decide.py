"""What a person does to a job: approve, reject, resubmit, answer, suspend,
resume, cancel. Each is checked against :data:`logist.engine.workflow.USER_ACTIONS`,
recorded in the history like a step, and refused in one line naming the
job's state when the state does not allow it.
"""

from __future__ import annotations

from typing import Optional

from ..store import recovery as journal
from ..errors import LogistError, TransitionError
from ..store.history import CommandRecord, UserInput
from ..store.jobsdir import Job
from ..store.manifest import JobManifest, Turn
from ..store.manifest import PLANNER, SUPERVISOR, WORKER, Status
from .session import open_locked
from .workflow import USER_ACTIONS, describe_state_hint


def _fresh_turn(manifest: JobManifest, slot: str, feedback: Optional[str]) -> Turn:
    return Turn(slot=slot, role=manifest.roles[slot], feedback=feedback)


def _apply(
    manifest: JobManifest, action: str, text: Optional[str], skip: bool, command: Optional[CommandRecord] = None
) -> JobManifest:
    after = manifest.model_copy(deep=True)
    if action == "approve":
        after.status = Status.SUCCESS
    elif action == "reject":
        after.status = Status.PENDING
        feedback = f"A person reviewed the result and rejected it:\n{text}"
        if after.workflow == "planned":
            # The Planner goes on with its plan and conversation.
            after.turn.pending = feedback
        else:
            after.turn = _fresh_turn(after, WORKER, feedback)
        after.retries_in_a_row = 0
    elif action == "resubmit":
        slot = after.turn.slot
        feedback = f"A person looked at why the job stopped ({after.reason}) and resubmitted it"
        feedback += f":\n{text}" if text else "."
        if after.workflow == "planned" and slot == PLANNER and after.turn.messages:
            after.turn.pending = feedback
        else:
            after.turn = _fresh_turn(after, slot, feedback)
        after.status = Status.REVIEWING if slot == SUPERVISOR and after.workflow == "default" else Status.PENDING
        after.retries_in_a_row = 0
        after.reason = None
    elif action in ("approve-command", "skip-command"):
        after.turn.pending = command.output if command is not None else "User skipped the command."
        after.pending_command = None
        after.status = after.resume_status or Status.RUNNING
        after.resume_status = None
    elif action == "answer":
        question = after.question
        if skip:
            if question is not None and question.required:
                raise LogistError("this question is required; it cannot be skipped (answer it with TEXT)")
            after.turn.pending = "User skipped the question."
        else:
            after.turn.pending = f"User response: {text}"
        after.question = None
        after.status = after.resume_status or Status.RUNNING
        after.resume_status = None
    elif action == "suspend":
        after.resume_status = after.status
        after.status = Status.SUSPENDED
    elif action == "resume":
        after.status = after.resume_status or Status.PENDING
        after.resume_status = None
    elif action == "cancel":
        after.status = Status.CANCELED
    else:  # pragma: no cover - the table and this function list the same actions
        raise LogistError(f"unknown action {action}")
    return after


def _check_waiting_for(job: Job, manifest: JobManifest, action: str) -> None:
    """INPUT_REQUIRED waits either for an answer or for a command decision."""
    if action == "answer" and manifest.question is None:
        raise TransitionError(
            f"job '{job.id}' is waiting for a decision on a command, not an answer: "
            "logist job approve-command or logist job skip-command"
        )
    if action in ("approve-command", "skip-command") and manifest.pending_command is None:
        raise TransitionError(f"job '{job.id}' holds no command; it is waiting for an answer (logist job answer TEXT)")


def user_action(
    job: Job, action: str, text: Optional[str] = None, *, skip: bool = False, lock_timeout: float = 0
) -> JobManifest:
    """Apply a person's ``action`` to the job; returns the new manifest."""
    rule = USER_ACTIONS[action]
    if action in ("reject",) and not (text or "").strip():
        raise LogistError("reject needs --feedback TEXT: say what is wrong so the Worker can fix it")
    with open_locked(job, lock_timeout) as manifest:
        if manifest.status not in rule.allowed_from:
            allowed = ", ".join(sorted(str(s) for s in rule.allowed_from))
            raise TransitionError(
                f"cannot {action} job '{job.id}': it is {manifest.status} "
                f"({action} needs {allowed}); {describe_state_hint(manifest.status)}"
            )
        _check_waiting_for(job, manifest, action)
        command = None
        commit = manifest.workspace_commit
        if action == "approve-command":
            from .commands import execute

            sequence = manifest.last_sequence + 1
            journal.begin_applying(job.dir, sequence, manifest.workspace_commit, None)
            command = execute(job, manifest, manifest.pending_command or "")
            commit = job.repo.commit_all(
                f"logist: {job.id} entry {sequence} command approved by a person: {command.command}"[:200]
            ) or commit
        after = _apply(manifest, action, text, skip, command)
        after.workspace_commit = commit
        if command is not None:
            after.totals.wall_seconds = round(after.totals.wall_seconds + command.duration_seconds, 3)
        entry = journal.new_entry(
            job.dir,
            job.workspace,
            manifest,
            after,
            kind="user_action",
            role=manifest.turn.role,
            user_input=UserInput(action=action if not skip else "skip", text=text),
            workspace_commit=commit,
            command=command,
        )
        journal.record(job.dir, entry, after)
        return after
