"""The job state machine: one table, read this module first.

Every change of a job's ``status`` is a row of :data:`TABLE`::

    (states, event, who)  ->  (next state, what happens to the turn, hint)

- *states*: the states the row applies in (a set where the rule is the same).
- *event*: what happened, an :class:`~logist.protocol.actions.Event` (a
  name, and for some how it went): a role's answer, as its action says
  (``COMPLETED``, ``CMD held``, the Planner's ``MESSAGE to a role`` ...:
  :meth:`logist.protocol.actions.Action.event`), something the engine
  noticed (``call failed``, ``limit reached``, ``RETRY over limit``) or a
  person's command (``approve``, ``resume`` ...).
- *who*: whose turn it is, by slot: ``worker`` and ``supervisor`` in the
  default workflow; ``planner`` and ``addressed`` (a role the Planner sent
  work to) in the planned one; ``solo`` (the Worker with no Supervisor) in
  the solo one, a skill's job by default; ``person`` for a person's commands.
- *next state*: a :class:`Status`, or a named target resolved from the
  manifest (:data:`TARGETS`): ``SAME``, ``WORKING`` (RUNNING, or REVIEWING in
  the default Supervisor's turn), ``START`` (PENDING, or REVIEWING for that
  Supervisor) and ``RESUME`` (the state it was asked or suspended in, kept in
  the manifest's ``resume_status``; ``remember`` says what a row keeps there).
- *turn*: what happens to the role's turn (:data:`TURN_EFFECTS`); the engine
  does that part (:mod:`.transition` for answers, :mod:`.decide` for people).
- *hint*: what a person is told to do in the row's states; refusals such as
  "cannot approve job 'x': it is RUNNING ..." are built from it.

The rows of one event never overlap, so each (state, event, who) has at
most one row and their order is for reading.
``logist workflow`` prints the table (``--markdown`` is the README's copy, a
test keeps the two equal), and ``tests/engine/test_workflow.py`` walks every
row with a real job.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Protocol, Union

from ..errors import ConfigError
from ..protocol.actions import ACTION_RULES, USER, Event  # noqa: F401 (USER: the Planner's send_to for the person; the table's readers find it here)
from ..store.manifest import JobManifest
from ..store.status import PLANNER, SUPERVISOR, WORKER, Status


class AnsweringRole(Protocol):
    """What :func:`answer_protocol` reads of a role (:class:`logist.store.roles.RoleManifest`):
    named so, not imported, since the table reads no role file and a command
    that only reads loads none (an import-linter contract in pyproject.toml)."""

    name: str
    source: Optional[str]
    protocol: str
    agent: Optional[str]

#: Who acts, beyond the slots of the store: a role the Planner addressed,
#: and a person.
ADDRESSED, PERSON = "addressed", "person"
#: The Worker of the solo workflow (a skill's job): no Supervisor; its COMPLETED ([DONE]) ends the job.
SOLO = "solo"
ROLES = frozenset({WORKER, SUPERVISOR, PLANNER, ADDRESSED, SOLO})
#: How ``who`` reads in the printed table, in the table's order.
WHO_NAMES = {
    WORKER: "Worker", SUPERVISOR: "Supervisor", PLANNER: "Planner", ADDRESSED: "addressed role",
    SOLO: "Worker (solo)", PERSON: "person",
}

#: Named targets, resolved from the manifest by :func:`resolve`.
SAME, WORKING, START, RESUME = "SAME", "WORKING", "START", "RESUME"
TARGETS = {
    SAME: "the state does not change",
    WORKING: "RUNNING; REVIEWING while the Supervisor reviews (default workflow)",
    START: "PENDING; REVIEWING when the turn is the Supervisor's (default workflow)",
    RESUME: "the state the job was asked or suspended in (WORKING if none was kept)",
}

TURN_EFFECTS = {
    "continue": "the turn goes on; the next message reports what happened",
    "wait": "the turn waits for a person",
    "handoff": "the Supervisor's turn starts",
    "afresh": "the role's turn starts over, its summary as feedback",
    "send back": "the Worker's turn starts over, the review as feedback",
    "stop": "the turn ends; the job waits for a person",
    "finish": "the turn ends and the job with it; the answer's message is the job's result",
    "delegate": "the addressed role's turn starts, the Planner's message its task",
    "report": "the Planner's turn goes on with the role's report",
    "summarise": "older rounds of the turn are replaced by a summary (kept whole if the summary call fails)",
    "begin": "the first role's turn begins",
    "reject": "the Worker's turn starts over with the rejection (planned: the Planner's goes on with it)",
    "resubmit": "the role's turn starts over with the feedback (a Planner's goes on with it)",
    "keep": "the turn is kept as it is",
    "check": "the job's checks run next (logist job step or logist job check), before anything else",
    "fix": "the Worker's turn starts over, the failing checks' output as feedback",
}
#: The effects after which the role's turn goes on with another call, or
#: with its checks (``job step`` makes it): the turn is neither over nor
#: waiting for a person.
GOES_ON = frozenset({"continue", "summarise", "check"})

E = Event
# Events the engine fires (an answer's own event is its action's:
# logist.protocol.actions.Action.event).
RETRY_LIMIT = E("RETRY", "over limit")
OUT_OF_TURN = E("answer out of turn")
INVALID = E("invalid answer")
INVALID_LAST = E("invalid answer, no re-asks")
CHANGES_HELD = E("file changes held")
CALL_FAILED = E("call failed")
#: A call the endpoint failed for now (5xx after the retries, a timeout, a disconnect): the turn goes on later.
CALL_INTERRUPTED = E("call interrupted")
LIMIT = E("limit reached")
COMPACTION = E("compaction")
#: The step's commit found workspace files git cannot read (logist.workspace.repository.UnreadableFiles).
UNREADABLE = E("workspace unreadable")
#: ``job set`` fires it instead of ``set`` when the new budgets free a job a budget stopped.
BUDGET_RAISED = E("budget raised")
#: A COMPLETED the job's checks verify before it counts (the Worker's, a solo
#: Worker's, the Planner's to the person): the checks run next.
CHECKS_DUE = E("COMPLETED", "checks to run")
#: A solo Worker's COMPLETED in a job with no checks, created without --no-review: a person approves.
UNCHECKED = E("COMPLETED", "no checks")
#: A run of the checks (:mod:`logist.engine.checks`): every one exited 0, or one did not.
CHECKS_PASSED = E("checks passed")
CHECKS_FAILED = E("checks failed")
#: A failed run that makes the RETRYs in a row more than max_retries_in_a_row.
CHECKS_OVER_LIMIT = E("checks failed", "over limit")
#: ``job check`` when no checks are due: the run is recorded, the state stays.
CHECK = E("check")

S = Status
ACTIVE = frozenset({S.PENDING, S.RUNNING})
STEPPABLE = frozenset({S.PENDING, S.RUNNING, S.REVIEWING})
TERMINAL = frozenset({S.SUCCESS, S.CANCELED})
LIVE = frozenset(Status) - TERMINAL

STEP = "step it (logist job step)"
ANSWER = "answer its question (logist job answer TEXT)"
DECIDE = "decide on its held command or file changes (logist job approve-command / skip-command)"
#: What a person is told in a state no hinted row leaves.
RESTING_HINTS = {S.SUCCESS: "it is finished", S.CANCELED: "it was canceled", S.DRAFT: "it is being created"}


@dataclass(frozen=True)
class Rule:
    states: frozenset
    event: Event
    who: frozenset
    to: Union[Status, str]
    turn: str
    #: Empty for rows open in nearly every state (suspend, cancel), which
    #: refusals do not list.
    hint: str = STEP
    #: A named target or state kept in ``resume_status`` for a later RESUME.
    remember: Optional[str] = None
    #: INPUT_REQUIRED waits for one thing: "question", or "command" (a held command or held file changes);
    #: INTERVENTION_REQUIRED waits for a "budget" when a spent one stopped it.
    waits_for: Optional[str] = None


def _row(states, event, who, to, turn, hint=STEP, remember=None, waits_for=None) -> Rule:
    event = Event(event) if isinstance(event, str) else event
    states = frozenset({states}) if isinstance(states, Status) else frozenset(states)
    who = frozenset({who}) if isinstance(who, str) else frozenset(who)
    return Rule(states, event, who, to, turn, hint, remember, waits_for)


TABLE: tuple[Rule, ...] = (
    # Default workflow: the Worker works, the Supervisor reviews.
    _row(ACTIVE, E("COMPLETED"), WORKER, S.REVIEWING, "handoff"),
    _row(ACTIVE, E("RETRY"), WORKER, S.RUNNING, "afresh"),
    _row(ACTIVE, E("STUCK"), WORKER, S.INTERVENTION_REQUIRED, "stop"),
    _row(S.REVIEWING, E("COMPLETED"), SUPERVISOR, S.APPROVAL_REQUIRED, "stop"),
    _row(S.REVIEWING, E("RETRY"), SUPERVISOR, S.RUNNING, "send back"),
    _row(S.REVIEWING, E("STUCK"), SUPERVISOR, S.INTERVENTION_REQUIRED, "stop"),
    _row(STEPPABLE, RETRY_LIMIT, {WORKER, SUPERVISOR, SOLO}, S.INTERVENTION_REQUIRED, "stop"),
    # Solo workflow (a skill's job, as kosmos-panel runs a skill): the Worker's COMPLETED ([DONE]) ends the job
    # (created with --no-review and no checks; with checks, once they pass; else a person approves).
    _row(ACTIVE, E("COMPLETED"), SOLO, S.SUCCESS, "finish"),
    _row(ACTIVE, E("RETRY"), SOLO, S.RUNNING, "afresh"),
    _row(ACTIVE, E("STUCK"), SOLO, S.INTERVENTION_REQUIRED, "stop"),
    # Checks (a job's commands, run by Logist): a COMPLETED they verify counts only once they pass.
    _row(ACTIVE, CHECKS_DUE, {WORKER, SOLO, PLANNER}, S.RUNNING, "check"),
    _row(ACTIVE, CHECKS_PASSED, WORKER, S.REVIEWING, "handoff"),
    _row(ACTIVE, CHECKS_PASSED, SOLO, S.SUCCESS, "finish"),
    _row(ACTIVE, CHECKS_PASSED, PLANNER, S.APPROVAL_REQUIRED, "stop"),
    _row(ACTIVE, CHECKS_FAILED, {WORKER, SOLO}, S.RUNNING, "fix"),
    _row(ACTIVE, CHECKS_FAILED, PLANNER, S.RUNNING, "continue"),
    _row(ACTIVE, CHECKS_OVER_LIMIT, {WORKER, SOLO, PLANNER}, S.INTERVENTION_REQUIRED, "stop"),
    _row(ACTIVE, UNCHECKED, SOLO, S.APPROVAL_REQUIRED, "stop"),
    # Planned workflow: the Planner routes each answer with send_to.
    _row(ACTIVE, E("MESSAGE", "to a role"), PLANNER, S.RUNNING, "delegate"),
    _row(ACTIVE, E("COMPLETED", "to a role"), PLANNER, S.RUNNING, "delegate"),
    _row(ACTIVE, E("MESSAGE", "to User"), PLANNER, S.RUNNING, "continue"),
    _row(ACTIVE, E("COMPLETED", "to User"), PLANNER, S.APPROVAL_REQUIRED, "stop"),
    _row(ACTIVE, E("RETRY"), PLANNER, S.RUNNING, "afresh"),
    _row(ACTIVE, E("STUCK"), PLANNER, S.INTERVENTION_REQUIRED, "stop"),
    _row(ACTIVE, E("COMPLETED"), ADDRESSED, S.RUNNING, "report"),
    _row(ACTIVE, E("RETRY"), ADDRESSED, S.RUNNING, "report"),
    _row(ACTIVE, E("STUCK"), ADDRESSED, S.RUNNING, "report"),
    # Any role's turn.
    _row(STEPPABLE, E("MESSAGE"), {WORKER, SUPERVISOR, ADDRESSED, SOLO}, WORKING, "continue"),
    _row(STEPPABLE, E("CMD", "run"), ROLES, WORKING, "continue"),
    _row(STEPPABLE, E("CMD", "denied"), ROLES, WORKING, "continue"),
    _row(STEPPABLE, E("CMD", "held"), ROLES, S.INPUT_REQUIRED, "wait", remember=WORKING),
    _row(STEPPABLE, E("ASK"), ROLES, S.INPUT_REQUIRED, "wait", remember=WORKING),
    _row(STEPPABLE, CHANGES_HELD, ROLES, S.INPUT_REQUIRED, "wait", remember=WORKING),
    _row(STEPPABLE, INVALID, ROLES, WORKING, "continue"),
    _row(STEPPABLE, INVALID_LAST, ROLES, S.INTERVENTION_REQUIRED, "stop"),
    _row(STEPPABLE, CALL_FAILED, ROLES, S.INTERVENTION_REQUIRED, "stop"),
    _row(STEPPABLE, CALL_INTERRUPTED, ROLES, SAME, "keep"),
    _row(STEPPABLE, LIMIT, ROLES, S.INTERVENTION_REQUIRED, "stop"),
    _row(STEPPABLE, COMPACTION, ROLES, SAME, "summarise"),
    # Fired after the answer's own row, when that left the job steppable.
    _row(STEPPABLE, UNREADABLE, ROLES, S.INTERVENTION_REQUIRED, "stop"),
    # An exit command no row above takes (a hand-edited manifest).
    _row(STEPPABLE, OUT_OF_TURN, ROLES, S.INTERVENTION_REQUIRED, "stop"),
    # A person's commands.
    _row(S.DRAFT, "create", PERSON, S.PENDING, "begin", hint=""),
    _row(S.APPROVAL_REQUIRED, "approve", PERSON, S.SUCCESS, "keep", hint="approve it (logist job approve)"),
    _row(S.APPROVAL_REQUIRED, "reject", PERSON, S.PENDING, "reject", hint="reject it (logist job reject --feedback TEXT)"),
    _row(S.INTERVENTION_REQUIRED, "resubmit", PERSON, START, "resubmit",
         hint="look at the reason (logist job status) and resubmit it (logist job resubmit --feedback TEXT)"),
    _row(S.INPUT_REQUIRED, "answer", PERSON, RESUME, "continue", hint=ANSWER, waits_for="question"),
    _row(S.INPUT_REQUIRED, "skip", PERSON, RESUME, "continue", hint=ANSWER, waits_for="question"),
    _row(S.INPUT_REQUIRED, "approve-command", PERSON, RESUME, "continue", hint=DECIDE, waits_for="command"),
    _row(S.INPUT_REQUIRED, "skip-command", PERSON, RESUME, "continue", hint=DECIDE, waits_for="command"),
    _row(LIVE - {S.SUSPENDED}, "suspend", PERSON, S.SUSPENDED, "keep", hint="", remember=SAME),
    _row(S.SUSPENDED, "resume", PERSON, RESUME, "keep", hint="resume it (logist job resume)"),
    _row(LIVE, "cancel", PERSON, S.CANCELED, "keep", hint=""),
    # job check with no checks due: the run is recorded for the person (and for approve).
    _row(LIVE, CHECK, PERSON, SAME, "keep", hint=""),
    # job set: new budgets; a job a spent budget stopped goes on where it stopped.
    _row(LIVE, "set", PERSON, SAME, "keep", hint=""),
    _row(S.INTERVENTION_REQUIRED, BUDGET_RAISED, PERSON, WORKING, "keep",
         hint="raise the budget that stopped it (logist job set JOB --max-steps N)", waits_for="budget"),
)

EVENTS = frozenset(r.event for r in TABLE)
#: The names a row an action brings (logist.protocol.actions.Row) uses for a set of states or of slots.
_NAMED = {"ACTIVE": ACTIVE, "STEPPABLE": STEPPABLE, "LIVE": LIVE, "ROLES": ROLES}


def _action_rows() -> tuple[Rule, ...]:
    """The rows the registered actions bring (none of the built-in ones does: theirs are in the table)."""
    rows = []
    for action in ACTION_RULES.values():
        for row in action.rows:
            states = _NAMED.get(row.states) or Status(row.states)
            to = row.to if row.to in TARGETS else Status(row.to)
            rows.append(_row(states, Event(action.name, row.variant), _NAMED.get(row.who, row.who), to, row.turn,
                             remember=row.remember))
    return tuple(rows)


def table() -> tuple[Rule, ...]:
    """Every row in effect: :data:`TABLE`, and those the registered actions bring."""
    extra = _action_rows()
    return TABLE + extra if extra else TABLE


def _event(event: Union[Event, str]) -> Event:
    """An event; a person's command may be named by its name."""
    return Event(event) if isinstance(event, str) else event
#: The states in which a job's turn waits for a person: those the rows that
#: make a turn wait for a person or stop it lead to, in :class:`Status`'s order.
NEEDS_PERSON = tuple(s.value for s in Status if any(r.to == s and r.turn in ("wait", "stop") for r in TABLE))
#: The states a job stays in until a person acts: those above, and SUSPENDED
#: (set aside by a person until one resumes it). A command that ran such a
#: job, or was refused one, exits 3 (logist.cli.app).
WAITING_FOR_PERSON = NEEDS_PERSON + (Status.SUSPENDED.value,)


def who_acts(manifest: JobManifest) -> str:
    """Whose turn it is, as the table's ``who`` names it."""
    if manifest.workflow == "planned":
        return PLANNER if manifest.turn.slot == PLANNER else ADDRESSED
    if manifest.workflow == "solo":
        return SOLO
    return manifest.turn.slot


def verified(manifest: JobManifest, who: str, event: Event) -> Event:
    """The event of an answer once the job's checks are considered: a
    COMPLETED they verify becomes :data:`CHECKS_DUE` when the job has
    checks; a solo Worker's COMPLETED with no checks, in a job not created
    with --no-review, becomes :data:`UNCHECKED` (a person approves)."""
    verifiable = (event == E("COMPLETED") and who in (WORKER, SOLO)) or (event == E("COMPLETED", f"to {USER}")
                                                                         and who == PLANNER)
    if not verifiable:
        return event
    if manifest.settings.checks:
        return CHECKS_DUE
    return UNCHECKED if who == SOLO and not manifest.no_review else event


def answer_protocol(role: AnsweringRole, manifest: JobManifest) -> str:
    """The protocol ``role`` answers in, in the job of ``manifest``: its
    job's skill's, when that names one, else its own. A Planner always
    answers in JSON: only JSON carries its plan and send_to. A coding agent
    ends its run with an exit command in JSON, whatever the skill says."""
    if manifest.workflow == "planned" and manifest.turn.slot == PLANNER:
        if role.agent is not None:
            raise ConfigError(f"role manifest {role.source or role.name}: agent: a coding agent cannot be a "
                              "Planner (its exit command carries no plan or send_to)")
        if role.protocol != "json":
            raise ConfigError(
                f"role manifest {role.source or role.name}: protocol: {role.protocol} cannot be a Planner's protocol "
                "(its plan and send_to need json)"
            )
        return "json"
    if role.agent is not None:
        return "json"
    skill = manifest.skill.protocol if manifest.skill is not None else None
    return skill or role.protocol


def find_rule(state: Status, event: Union[Event, str], who: str) -> Optional[Rule]:
    """The first row for (state, event, who), or None."""
    event, rows = _event(event), table()
    if event not in EVENTS and all(r.event != event for r in rows):
        raise ValueError(f"the workflow table has no event {str(event)!r}")
    return next((r for r in rows if r.event == event and state in r.states and who in r.who), None)


def rule_for(state: Status, event: Union[Event, str], who: str) -> Rule:
    """The row the engine needs; a missing one is a bug in the table."""
    rule = find_rule(state, event, who)
    if rule is None:
        raise ValueError(f"the workflow table has no row for {event} by {who} in {state}")
    return rule


def person_rules(event: Union[Event, str]) -> list[Rule]:
    event = _event(event)
    return [r for r in TABLE if r.event == event and PERSON in r.who]


def creation() -> tuple[Status, Status]:
    """The ``create`` row: the state a new job is drafted in, and the one it starts in."""
    (rule,) = person_rules("create")
    (drafted,) = rule.states
    return drafted, rule.to


def resolve(target: Union[Status, str], manifest: JobManifest, before: Status) -> Status:
    """A row's target as a state, for ``manifest`` (whose status was ``before``)."""
    if isinstance(target, Status):
        return target
    supervisor = manifest.workflow == "default" and manifest.turn.slot == SUPERVISOR
    if target == SAME:
        return before
    if target == WORKING:
        return S.REVIEWING if supervisor else S.RUNNING
    if target == START:
        return S.REVIEWING if supervisor else S.PENDING
    if target == RESUME:
        return manifest.resume_status or resolve(WORKING, manifest, before)
    raise ValueError(f"unknown target {target!r}")


def move(after: JobManifest, rule: Rule, before: Status, reason: Optional[str] = None) -> None:
    """Set ``after``'s status from ``rule``: the only place a status changes."""
    remembered = resolve(rule.remember, after, before) if rule.remember else None
    after.status = resolve(rule.to, after, before)
    if rule.remember:
        after.resume_status = remembered
    elif rule.to == RESUME:
        after.resume_status = None
    if after.status == S.INTERVENTION_REQUIRED and reason is not None:
        after.reason = reason


def describe_state_hint(status: Status) -> str:
    """What a person can do next in ``status``: the hints of its rows."""
    hints: list[str] = []
    for rule in TABLE:
        if status in rule.states and rule.hint and rule.hint not in hints:
            hints.append(rule.hint)
    return " or ".join(hints) or RESTING_HINTS.get(status, STEP)


def waiting_for(manifest: JobManifest) -> Optional[str]:
    """What an INPUT_REQUIRED job waits for: "question", or "command" (a
    held command or held file changes); None in any other state."""
    if manifest.status != S.INPUT_REQUIRED:
        return None
    if manifest.question is not None:
        return "question"
    return "command" if manifest.pending_command is not None or manifest.pending_changes is not None else None


def describe_job_hint(manifest: JobManifest, budget_stopped: bool = False) -> str:
    """What a person can do next with this job: its state's hints, less
    those for what it does not wait for, naming what is held. Raising a
    budget is hinted only when a spent budget stopped the job
    (``budget_stopped``: :func:`logist.engine.budget.stopped_by_budget`
    says so from its history), never for a job STUCK, refused or failed."""
    waits = waiting_for(manifest)
    if waits is None and manifest.status != S.INTERVENTION_REQUIRED:
        return describe_state_hint(manifest.status)
    wanted = {None, waits} | ({"budget"} if budget_stopped else set())
    held = "command" if manifest.pending_command is not None else "file changes"
    hints: list[str] = []
    for rule in TABLE:
        if manifest.status in rule.states and rule.hint and rule.waits_for in wanted:
            hint = rule.hint.replace("its held command or file changes", f"its held {held}")
            if hint not in hints:
                hints.append(hint)
    return " or ".join(hints) or RESTING_HINTS.get(manifest.status, STEP)
