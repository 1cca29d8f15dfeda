"""What an answer does to the job: the manifest after a step.

The next state comes from the row of :data:`logist.engine.workflow.TABLE`
for the answer's event (set by :func:`~logist.engine.workflow.move`); this
module does the row's *turn* part: which messages the turn keeps, what it
sends next, whose turn follows. Nothing here names an action: the answer's
action (:class:`logist.protocol.actions.Action`) says which event it fires
and does its part of the turn through :class:`AnswerStep`; the engine's own
turn effects (handoff, afresh, delegate, report ...) are a table here. Pure with respect to the disk: these
functions change a copy of the manifest (``after``) and nothing else;
:mod:`logist.engine.step` records it. The messages they leave for the next
call (feedback, the report to the Planner, a re-ask) are worded by the
``messages/*`` prompt templates the step's prompts give.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Sequence

from ..protocol.answer import Action, Answer, Event, InvalidAnswer, action_of
from ..store.entries import CommandRecord
from ..store.roles import RoleManifest
from ..store.manifest import PLANNER, SUPERVISOR, WORKER, Handoff, JobManifest, Question, Turn
from ..store.prompts import Prompts, builtin
from .workflow import (
    CHANGES_HELD, INVALID, INVALID_LAST, OUT_OF_TURN, RETRY_LIMIT, SOLO, Rule, find_rule, move, rule_for, who_acts,
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


@dataclass
class AnswerStep:
    """An answer being applied, as its action's hooks see it
    (:class:`logist.protocol.actions.Action`): the manifests, the answer,
    what its command did, and the few things a hook may do to the turn."""

    after: JobManifest
    before: JobManifest
    answer: Answer
    call: Call
    command: Optional[CommandRecord]
    prompts: Prompts
    #: The event the answer fired (set once its action has said which).
    event: Optional[Event] = None

    @property
    def who(self) -> str:
        return who_acts(self.before)

    @property
    def planner(self) -> bool:
        """The answer is the Planner's."""
        return self.who == PLANNER

    @property
    def reviewing(self) -> bool:
        """The answer is the default workflow's Supervisor's."""
        return self.who == SUPERVISOR

    @property
    def counts_retries(self) -> bool:
        """RETRYs in a row count for whoever acts (not the Planner's, not a role it addressed)."""
        return self.who in (WORKER, SUPERVISOR, SOLO)

    @property
    def summary(self) -> str:
        """What the answer says it did (in the planned workflow, its message when it has no summary)."""
        planned = self.before.workflow == "planned"
        return (self.answer.summary_for_supervisor or (self.answer.message if planned else None) or "").strip()

    def render(self, template: str, **values) -> str:
        return self.prompts.render(template, **values)

    def ask(self, text: str, required: bool) -> None:
        """The turn waits for the person's answer to ``text``."""
        self.after.question = Question(text=text, required=required)

    def hand_over(self, summary: str, evidence_files: Sequence[str] = ()) -> None:
        """The answer is the turn's last word (``last_exit``), with ``summary``."""
        self.after.last_exit = Handoff(role=self.after.turn.role, action=self.answer.action, summary=summary,
                                       evidence_files=list(evidence_files))


def _handoff(step: AnswerStep) -> None:
    _next_turn(step.after, SUPERVISOR, None)


def _send_back(step: AnswerStep) -> None:
    _next_turn(step.after, WORKER, step.render("messages/sent_back", role=step.after.turn.role, summary=step.summary))


def _afresh(step: AnswerStep) -> None:
    turn = step.after.turn
    if step.planner:
        _next_turn(step.after, PLANNER, step.render("messages/planner_retry", summary=step.summary))
    else:
        _next_turn(step.after, turn.slot, step.render("messages/retry", summary=step.summary))


def _delegate(step: AnswerStep) -> None:
    after, answer = step.after, step.answer
    slot = next(s for s, name in after.roles.items() if name == answer.send_to and s != PLANNER)
    after.planner_turn = after.turn
    after.turn = Turn(slot=slot, role=answer.send_to, task=answer.message)


def _report(step: AnswerStep) -> None:
    # The addressed role's exit command goes back to the Planner.
    after, answer = step.after, step.answer
    report = step.render(
        "messages/report", role=after.turn.role, action=answer.action, summary=step.summary,
        evidence_files=", ".join(answer.evidence_files) or None,
    )
    planner_turn = after.planner_turn or Turn(slot=PLANNER, role=after.roles[PLANNER])
    planner_turn.pending = report
    after.turn, after.planner_turn = planner_turn, None


def _goes_on(step: AnswerStep, action: Action) -> None:
    step.after.turn.pending = action.continue_with(step)


#: What each turn effect of a row (:data:`~logist.engine.workflow.TURN_EFFECTS`)
#: does after an answer: the action's own hook (``continue``, ``wait``,
#: ``stop``), or the engine's (the turn passed on or started over).
_TURN: dict[str, Callable[[AnswerStep, Action], None]] = {
    "continue": _goes_on,
    "wait": lambda step, action: action.wait(step),
    "stop": lambda step, action: action.stop(step),
    "handoff": lambda step, _action: _handoff(step),
    "send back": lambda step, _action: _send_back(step),
    "afresh": lambda step, _action: _afresh(step),
    "delegate": lambda step, _action: _delegate(step),
    "report": lambda step, _action: _report(step),
}
#: The effects after which the call joins the role's conversation (the turn is not restarted or passed on).
_KEEPS_ROUND = frozenset({"continue", "wait", "stop", "finish", "delegate"})


def _keep_plan(after: JobManifest, answer: Answer) -> None:
    """The Planner's plan: what the answer leaves out stays as it was."""
    if answer.plan is not None:
        after.plan, after.current_plan_step = list(answer.plan), answer.current_plan_step
    if answer.current_plan_step is not None:
        after.current_plan_step = answer.current_plan_step
    after.plan_reasoning = answer.plan_reasoning or after.plan_reasoning
    after.planner_thought = answer.thought or after.planner_thought


def _stop_with(step: AnswerStep, event: Event, reason: str) -> Rule:
    """The answer's own row is not applied: ``event``'s row stops the job with ``reason``."""
    add_round(step.after.turn, step.call)
    rule = rule_for(step.before.status, event, step.who)
    move(step.after, rule, step.before.status, reason)
    return rule


def apply_answer(
    after: JobManifest, before: JobManifest, answer: Answer, call: Call, command: Optional[CommandRecord],
    prompts: Optional[Prompts] = None,
) -> Rule:
    """Move ``after`` to the state the answer's row leads to, and do its turn part; the row.

    The one generic path: the answer's action (its hooks) says which event it
    fires and what the turn does; the row of the table says where the job goes."""
    step = AnswerStep(after, before, answer, call, command, prompts or builtin())
    action = action_of(answer.action)
    if step.planner:
        _keep_plan(after, answer)
    if action.exit and not step.planner:
        step.hand_over(step.summary if before.workflow == "planned" else answer.summary_for_supervisor or "",
                       answer.evidence_files)
    step.event = action.event(step)
    rule = find_rule(before.status, step.event, step.who)
    if rule is None:
        return _stop_with(step, OUT_OF_TURN,
                          f"the workflow has no transition for {answer.action} from {after.turn.role} in {before.status}")
    over = action.count(step)
    if over is not None:
        return _stop_with(step, RETRY_LIMIT, over)
    move(after, rule, before.status, action.reason(step))
    if rule.turn in _KEEPS_ROUND:
        add_round(after.turn, call)
    effect = _TURN.get(rule.turn)
    if effect is not None:
        effect(step, action)
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
