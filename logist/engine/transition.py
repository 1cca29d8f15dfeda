"""What an answer does to the job: the manifest after a step.

The next state comes from the row of :data:`logist.engine.workflow.TABLE`
for the answer's event (set by :func:`~logist.engine.workflow.move`); this
module does the row's *turn* part: which messages the turn keeps, what it
sends next, whose turn follows. Pure with respect to the disk: these
functions change a copy of the manifest (``after``) and nothing else;
:mod:`logist.engine.step` records it. The messages they leave for the next
call (feedback, the report to the Planner, a re-ask) are worded by the
``messages/*`` prompt templates the step's prompts give.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..protocol.answer import EXIT_ACTIONS, Answer, InvalidAnswer
from ..store.entries import CommandRecord
from ..store.roles import RoleManifest
from ..store.manifest import PLANNER, SUPERVISOR, WORKER, Handoff, JobManifest, Question, Turn
from ..store.prompts import Prompts, builtin
from .workflow import (
    ADDRESSED, CHANGES_HELD, INVALID, INVALID_LAST, OUT_OF_TURN, RETRY_LIMIT, SOLO, USER, Rule, find_rule, move,
    rule_for, who_acts,
)

@dataclass(frozen=True)
class Call:
    """The call being applied: the history entry that will record it, and
    whether its request is a prompt in full (else it continues the turn's
    last round)."""

    sequence: int
    full: bool


def add_round(turn: Turn, call: Call) -> None:
    """The call's request and answer join the turn's conversation."""
    turn.rounds += 1
    turn.last_call = call.sequence
    if call.full:
        turn.prompt_call = call.sequence
    if turn.first_call is None:
        turn.first_call = call.sequence
    turn.pending = None


def apply_event(after: JobManifest, event: str, reason: Optional[str] = None) -> Rule:
    """An event with no answer (a failed call, a limit): the row's state, the reason."""
    rule = rule_for(after.status, event, who_acts(after))
    move(after, rule, after.status, reason)
    return rule


def _next_turn(after: JobManifest, slot: str, feedback: Optional[str]) -> None:
    after.turn = Turn(slot=slot, role=after.roles[slot], feedback=feedback)


def answer_event(who: str, answer: Answer, command: Optional[CommandRecord]) -> str:
    """The table's event for an answer: its action, a command's fate, the Planner's addressee."""
    if answer.action == "CMD":
        if command is None or command.decision == "ask":
            return "CMD held"
        return "CMD denied" if command.decision == "deny" else "CMD run"
    if who == PLANNER and answer.action in ("MESSAGE", "COMPLETED"):
        return f"{answer.action} to {USER if answer.send_to == USER else 'a role'}"
    return answer.action


def _continue_with(event: str, answer: Answer, command: Optional[CommandRecord], prompts: Prompts) -> str:
    if event == "CMD run":
        return command.output
    if event == "CMD denied":
        return prompts.render("messages/command_denied", command=answer.command)
    return prompts.render("messages/continue")


def apply_answer(
    after: JobManifest, before: JobManifest, answer: Answer, call: Call, command: Optional[CommandRecord],
    prompts: Optional[Prompts] = None,
) -> Rule:
    """Move ``after`` to the state the answer's row leads to, and do its turn part; the row."""
    prompts = prompts or builtin()
    turn = after.turn
    action = answer.action
    who = who_acts(before)
    planned = before.workflow == "planned"
    summary = (answer.summary_for_supervisor or (answer.message if planned else None) or "").strip()
    if who == PLANNER:  # what the answer leaves out stays as it was (TaskWeaver's answers carry no plan)
        if answer.plan is not None:
            after.plan, after.current_plan_step = list(answer.plan), answer.current_plan_step
        if answer.current_plan_step is not None:
            after.current_plan_step = answer.current_plan_step
        after.plan_reasoning = answer.plan_reasoning or after.plan_reasoning
        after.planner_thought = answer.thought or after.planner_thought
    if action in EXIT_ACTIONS and who in (WORKER, SUPERVISOR, ADDRESSED, SOLO):
        after.last_exit = Handoff(
            role=turn.role, action=action, summary=summary if planned else answer.summary_for_supervisor or "",
            evidence_files=answer.evidence_files,
        )
    event = answer_event(who, answer, command)
    rule = find_rule(before.status, event, who)
    if rule is None:
        add_round(turn, call)
        reason = f"the workflow has no transition for {action} from {turn.role} in {before.status}"
        rule = rule_for(before.status, OUT_OF_TURN, who)
        move(after, rule, before.status, reason)
        return rule
    if action == "RETRY" and who in (WORKER, SUPERVISOR, SOLO):
        after.retries_in_a_row += 1
        limit = after.settings.max_retries_in_a_row
        if after.retries_in_a_row > limit:
            add_round(turn, call)
            reason = f"{after.retries_in_a_row} RETRYs in a row (limit {limit}); last: {answer.summary_for_supervisor}"
            rule = rule_for(before.status, RETRY_LIMIT, who)
            move(after, rule, before.status, reason)
            return rule
    elif action == "COMPLETED" and who == SUPERVISOR:
        # A RETRY sends work round the Worker-Supervisor loop; only an
        # accepted review ends the run of RETRYs.
        after.retries_in_a_row = 0
    move(after, rule, before.status, f"{turn.role} is STUCK: {summary}" if action == "STUCK" else None)
    effect = rule.turn
    if effect in ("continue", "wait", "stop", "finish", "delegate"):
        add_round(turn, call)
    if effect == "continue":
        turn.pending = _continue_with(event, answer, command, prompts)
    elif effect == "wait" and action == "ASK":
        after.question = Question(text=answer.question or answer.message or "", required=answer.required)
    elif effect == "wait":
        after.pending_command = answer.command
    elif effect == "stop" and event == "COMPLETED to User":
        after.last_exit = Handoff(role=turn.role, action=action, summary=summary)
    elif effect == "handoff":
        _next_turn(after, SUPERVISOR, None)
    elif effect == "send back":
        _next_turn(after, WORKER, prompts.render("messages/sent_back", role=turn.role, summary=summary))
    elif effect == "afresh" and who == PLANNER:
        _next_turn(after, PLANNER, prompts.render("messages/planner_retry", summary=summary))
    elif effect == "afresh":
        _next_turn(after, turn.slot, prompts.render("messages/retry", summary=summary))
    elif effect == "delegate":
        slot = next(s for s, name in after.roles.items() if name == answer.send_to and s != PLANNER)
        after.planner_turn = turn
        after.turn = Turn(slot=slot, role=answer.send_to, task=answer.message)
    elif effect == "report":
        # The addressed role's exit command goes back to the Planner.
        report = prompts.render(
            "messages/report", role=turn.role, action=action, summary=summary,
            evidence_files=", ".join(answer.evidence_files) or None,
        )
        planner_turn = after.planner_turn or Turn(slot=PLANNER, role=after.roles[PLANNER])
        planner_turn.pending = report
        after.turn, after.planner_turn = planner_turn, None
    return rule


def refuse_answer(
    after: JobManifest, call: Call, reason: str, prompts: Optional[Prompts] = None, protocol: str = "json"
) -> Rule:
    """An invalid answer: re-ask while the job's format retries last, then stop; the row."""
    turn = after.turn
    if turn.format_retries_used < after.settings.format_retries:
        turn.format_retries_used += 1
        add_round(turn, call)
        prompts = prompts or builtin()
        form = prompts.render(f"answer_form/{protocol}")
        turn.pending = prompts.render("messages/refused", reason=reason, answer_form=form)
        return apply_event(after, INVALID)
    return apply_event(after, INVALID_LAST, f"invalid answer from {turn.role}: {reason}")


def holds_file_changes(answer: Answer, role: RoleManifest) -> bool:
    """The role's ``file_changes`` policy for an answer that carries some:
    False to apply them (allowed), True to hold them for a person
    (approval); refused raises :class:`InvalidAnswer` with the reason."""
    if not answer.file_changes or role.file_changes == "allowed":
        return False
    if role.file_changes == "approval":
        return True
    raise InvalidAnswer(
        f"file_changes: the {role.name} role may not change files (its role manifest says file_changes: refused). "
        "Answer without file_changes; if a file must change, say in your summary what should change."
    )


def hold_changes(after: JobManifest, before: JobManifest, answer: Answer, call: Call) -> Rule:
    """An answer whose file changes wait for a person: nothing of it is
    applied; the person's approve-command applies the changes, skip-command
    drops them, and either way the role's turn goes on; the row."""
    add_round(after.turn, call)
    rule = rule_for(before.status, CHANGES_HELD, who_acts(before))
    move(after, rule, before.status)
    after.pending_changes = [change.model_dump(mode="json") for change in answer.file_changes]
    return rule
