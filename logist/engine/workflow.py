"""The job state machine, as data.

Two tables decide every transition: :data:`EXIT_TRANSITIONS` for a role's
exit command (COMPLETED / STUCK / RETRY) and :data:`USER_ACTIONS` for what a
person does. Roles appear by their *slot* in the workflow (``worker``,
``supervisor``) so that a job can put its own roles in those slots.

Exit commands, default workflow::

    state      slot        action     -> state                  next slot
    RUNNING    worker      COMPLETED  -> REVIEWING              supervisor
    RUNNING    worker      RETRY      -> RUNNING                worker (fresh turn)
    RUNNING    worker      STUCK      -> INTERVENTION_REQUIRED  worker
    REVIEWING  supervisor  COMPLETED  -> APPROVAL_REQUIRED      supervisor
    REVIEWING  supervisor  RETRY      -> RUNNING                worker (feedback)
    REVIEWING  supervisor  STUCK      -> INTERVENTION_REQUIRED  supervisor

PENDING is RUNNING before the role's first call of the turn. CMD and MESSAGE
keep the state; ASK, and a CMD the command policy holds, go to
INPUT_REQUIRED until a person answers, approves or skips.

Planned workflow: the Planner routes each answer with ``send_to``
(:data:`PLANNER_ROUTES`); the addressed role's exit command returns to the
Planner; ``send_to: User`` with COMPLETED ends in APPROVAL_REQUIRED, with ASK
in INPUT_REQUIRED.

Person's actions::

    approve   APPROVAL_REQUIRED                      -> SUCCESS
    reject    APPROVAL_REQUIRED                      -> PENDING (worker, feedback)
    resubmit  INTERVENTION_REQUIRED                  -> PENDING / REVIEWING (same slot, feedback)
    answer    INPUT_REQUIRED (a question)            -> the state it was asked in
    approve-command / skip-command
              INPUT_REQUIRED (a held command)        -> the state it was asked in
    suspend   any non-terminal but SUSPENDED         -> SUSPENDED
    resume    SUSPENDED                              -> the state it was suspended in
    cancel    any non-terminal                       -> CANCELED
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ..store.manifest import SUPERVISOR, WORKER, Status


TERMINAL = frozenset({Status.SUCCESS, Status.CANCELED})
#: States in which ``job step`` may call the model.
STEPPABLE = frozenset({Status.PENDING, Status.RUNNING, Status.REVIEWING})



@dataclass(frozen=True)
class Next:
    status: Status
    slot: str
    #: "fresh": the next turn starts over; "feedback": it starts over with the
    #: exit summary as feedback; "stop": no next turn until a person acts.
    turn: str


EXIT_TRANSITIONS: dict[tuple[Status, str, str], Next] = {
    (Status.RUNNING, WORKER, "COMPLETED"): Next(Status.REVIEWING, SUPERVISOR, "handoff"),
    (Status.RUNNING, WORKER, "RETRY"): Next(Status.RUNNING, WORKER, "feedback"),
    (Status.RUNNING, WORKER, "STUCK"): Next(Status.INTERVENTION_REQUIRED, WORKER, "stop"),
    (Status.REVIEWING, SUPERVISOR, "COMPLETED"): Next(Status.APPROVAL_REQUIRED, SUPERVISOR, "stop"),
    (Status.REVIEWING, SUPERVISOR, "RETRY"): Next(Status.RUNNING, WORKER, "feedback"),
    (Status.REVIEWING, SUPERVISOR, "STUCK"): Next(Status.INTERVENTION_REQUIRED, SUPERVISOR, "stop"),
}


#: Planned workflow (SPEC section 7). The Planner's answers are routed by
#: ``send_to``: a role of the job, or ``User``. Any other role's exit command
#: goes back to the Planner as its next user message.
USER = "User"

#: (Planner's action, addressee) -> what happens. "delegate": the addressed
#: role starts a turn with the Planner's message as its task; "continue": the
#: Planner goes on; "done": the job waits for approval; "stop": intervention.
#: ASK, CMD and an invalid answer behave as for any role.
PLANNER_ROUTES: dict[tuple[str, str], tuple[Status, str]] = {
    ("MESSAGE", "role"): (Status.RUNNING, "delegate"),
    ("COMPLETED", "role"): (Status.RUNNING, "delegate"),
    ("MESSAGE", USER): (Status.RUNNING, "continue"),
    ("COMPLETED", USER): (Status.APPROVAL_REQUIRED, "done"),
    ("RETRY", "role"): (Status.RUNNING, "fresh"),
    ("RETRY", USER): (Status.RUNNING, "fresh"),
    ("STUCK", "role"): (Status.INTERVENTION_REQUIRED, "stop"),
    ("STUCK", USER): (Status.INTERVENTION_REQUIRED, "stop"),
}


@dataclass(frozen=True)
class UserAction:
    allowed_from: frozenset
    #: None: the state is computed (resume, answer, resubmit); see ``actions``.
    to: Optional[Status]
    hint: str


_NON_TERMINAL = frozenset(Status) - TERMINAL

USER_ACTIONS: dict[str, UserAction] = {
    "approve": UserAction(frozenset({Status.APPROVAL_REQUIRED}), Status.SUCCESS, "approve a job waiting for approval"),
    "reject": UserAction(frozenset({Status.APPROVAL_REQUIRED}), Status.PENDING, "reject a job waiting for approval"),
    "resubmit": UserAction(frozenset({Status.INTERVENTION_REQUIRED}), None, "resubmit a job that needs intervention"),
    "answer": UserAction(frozenset({Status.INPUT_REQUIRED}), None, "answer a job's question"),
    "approve-command": UserAction(frozenset({Status.INPUT_REQUIRED}), None, "run a command the job holds"),
    "skip-command": UserAction(frozenset({Status.INPUT_REQUIRED}), None, "skip a command the job holds"),
    "suspend": UserAction(_NON_TERMINAL - {Status.SUSPENDED}, Status.SUSPENDED, "suspend a job"),
    "resume": UserAction(frozenset({Status.SUSPENDED}), None, "resume a suspended job"),
    "cancel": UserAction(_NON_TERMINAL, Status.CANCELED, "cancel a job"),
}


def effective_status(status: Status) -> Status:
    """PENDING behaves as RUNNING in the exit table."""
    return Status.RUNNING if status == Status.PENDING else status


def exit_transition(status: Status, slot: str, action: str) -> Optional[Next]:
    return EXIT_TRANSITIONS.get((effective_status(status), slot, action))


def describe_state_hint(status: Status) -> str:
    """What a person can do next in ``status``: used in refusals."""
    return {
        Status.APPROVAL_REQUIRED: "approve it (logist job approve) or reject it (logist job reject --feedback TEXT)",
        Status.INTERVENTION_REQUIRED: "look at the reason (logist job status) and resubmit it (logist job resubmit --feedback TEXT)",
        Status.INPUT_REQUIRED: "answer its question (logist job answer TEXT) or decide on its command (logist job approve-command / skip-command)",
        Status.SUSPENDED: "resume it (logist job resume)",
        Status.SUCCESS: "it is finished",
        Status.CANCELED: "it was canceled",
        Status.DRAFT: "it is a draft",
    }.get(status, "step it (logist job step)")
