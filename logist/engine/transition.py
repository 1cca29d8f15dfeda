"""What an answer does to the job: the manifest after a step.

Pure with respect to the disk: these functions change a copy of the
manifest (``after``) and nothing else; :mod:`logist.engine.step` records it.
"""

from __future__ import annotations

from typing import Optional

from ..protocol import Answer
from ..store.history import CommandRecord
from ..store.manifest import PLANNER, SUPERVISOR, WORKER, Handoff, JobManifest, Message, Question, Status, Turn
from .workflow import PLANNER_ROUTES, USER, exit_transition

CONTINUE_AFTER_MESSAGE = "[Continue after informational message]"


def intervention(after: JobManifest, reason: str) -> None:
    after.status = Status.INTERVENTION_REQUIRED
    after.reason = reason


def _next_turn(after: JobManifest, slot: str, feedback: Optional[str]) -> None:
    after.turn = Turn(slot=slot, role=after.roles[slot], feedback=feedback)


def apply_answer(
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
        intervention(after, f"the workflow has no transition for {action} from {turn.role} in {before.status}")
        return
    if action == "RETRY":
        after.retries_in_a_row += 1
        limit = after.settings.max_retries_in_a_row
        if after.retries_in_a_row > limit:
            turn.messages, turn.pending = conversation, None
            intervention(after, f"{after.retries_in_a_row} RETRYs in a row (limit {limit}); last: {answer.summary_for_supervisor}")
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


def refuse_answer(after: JobManifest, sent: str, raw: Optional[str], reason: str) -> None:
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
        intervention(after, f"invalid answer from {turn.role}: {reason}")
