"""The actions of the answer protocol: one class each, everything about it in one place.

An action (``COMPLETED``, ``CMD``, ``ASK`` ...) is an :class:`Action`: what
it means (the prompt's line for it), the fields it requires and may carry
(the answer model's schema, the decoding schema's object for it), its tag in
the line protocol, the event of the workflow table it fires, and how it is
applied: hook methods that the engine's one generic path calls
(:mod:`logist.engine.apply` and :mod:`logist.engine.transition`), none of
which names an action. Adding an action is adding a subclass to
:data:`BUILTIN` (and, when no row of the workflow table takes its event,
the row); everything else is generated from it.

The hooks speak to the step through the object the engine passes
(``step``: :class:`logist.engine.transition.AnswerStep`), so this module
stays free of files, git and the network, and imports nothing of the layers
above it: the protocol is below the store and the engine.

The workflow table's events are :class:`Event` values, not strings: the
action that fired one and, for some, how it went (``CMD`` ``run``, the
Planner's ``MESSAGE`` ``to User``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Optional

#: The person, as the Planner's ``send_to`` names them (in any case).
USER = "User"
#: The Planner's own fields (SPEC section 7): those each of its answers but a command must carry (an
#: ASK's question is its message), and those it may carry; the decoding schema and the prompt come from these.
PLANNER_REQUIRED = ("send_to", "message")
PLANNER_OPTIONAL = ("plan", "current_plan_step", "plan_reasoning", "thought")

_EXIT_FIELDS = ("evidence_files", "summary_for_supervisor")
_SUMMARY = "summary_for_supervisor"


@dataclass(frozen=True)
class Event:
    """What happened, as a row of the workflow table names it: an action (or
    an event of the engine or of a person) and, for some, how it went."""

    name: str
    #: How it went: a command's fate (``run``, ``denied``, ``held``), the
    #: Planner's addressee (``to User``, ``to a role``); empty for most.
    variant: str = ""

    def __str__(self) -> str:
        return f"{self.name} {self.variant}" if self.variant else self.name


@dataclass(frozen=True)
class Row:
    """A row of the workflow table an action brings with it (one registered
    from outside :mod:`logist.engine.workflow`, whose table holds the
    built-in actions' rows). Names, resolved by the workflow module: the
    states (a state, or ``ACTIVE``/``STEPPABLE``/``LIVE``), who (a slot, or
    ``ROLES``), the next state (a state or a named target such as
    ``WORKING``) and the turn effect (a key of its ``TURN_EFFECTS``)."""

    states: str
    who: str
    to: str
    turn: str
    variant: str = ""
    remember: Optional[str] = None


class Action:
    """One action of the protocol. Subclasses set the class attributes and
    override the hooks they need; an instance is what the registry holds."""

    #: The action's name, as an answer's ``action`` spells it.
    name: ClassVar[str]
    #: What it means, said to the model (the prompt's line for it).
    meaning: ClassVar[str]
    #: The fields it requires, and optional ones worth naming with it in the prompt and the decoding schema.
    required: ClassVar[tuple[str, ...]] = ()
    optional: ClassVar[tuple[str, ...]] = ()
    #: An exit command ends the role's turn.
    exit: ClassVar[bool] = False
    #: The line protocol: the tag that starts such an answer, and the field its text fills.
    tag: ClassVar[str] = ""
    tag_field: ClassVar[str] = ""
    #: The line protocol's options (``[ASK:optional]``) -> the fields they set.
    tag_options: ClassVar[dict[str, dict]] = {}
    #: The Planner's own fields (:data:`PLANNER_REQUIRED`) go with it in a Planner's answer.
    planner_fields: ClassVar[bool] = True
    #: A Planner's answer of this action is routed by its ``send_to``: the
    #: event says whom to (``to User`` or ``to a role``).
    routed: ClassVar[bool] = False
    #: It may change the workspace beyond its file changes (a command does):
    #: its commit takes everything, not only the named files.
    touches_workspace: ClassVar[bool] = False
    #: Rows of the workflow table it brings (an action registered from
    #: outside; the built-in actions' rows are in the table itself).
    rows: ClassVar[tuple[Row, ...]] = ()

    # -- the protocol: the Planner's answers --------------------------------

    def planner_required(self, answer) -> tuple[str, ...]:
        """The Planner's fields ``answer`` must carry with this action."""
        return PLANNER_REQUIRED if self.planner_fields else ()

    def decoding_variant(self, planner: bool) -> tuple[list[str], list[str], dict]:
        """The decoding schema's object for this action: its fields, the
        required ones, and the changes to a field's schema (merged over it)."""
        fields, required = [*self.required, *self.optional], list(self.required)
        if planner and self.planner_fields:
            fields += [f for f in (*PLANNER_REQUIRED, *PLANNER_OPTIONAL) if f not in fields]
            required += [f for f in PLANNER_REQUIRED if f not in required]
        return fields, required, {}

    def check_addressee(self, answer) -> Optional[str]:
        """Why a Planner's answer of this action may not go to its ``send_to`` (None: it may)."""
        return None

    # -- the engine: the step (``step``: logist.engine.transition.AnswerStep) -

    def run(self, answer, run_command: Callable[[str], Any]) -> Any:
        """Do what the action does beyond its file changes, before the
        workflow row is applied; the command record, if it ran one."""
        return None

    def event(self, step) -> Event:
        """The workflow table's event this answer fires."""
        if self.routed and step.planner:
            return Event(self.name, f"to {USER}" if step.answer.send_to == USER else "to a role")
        return Event(self.name)

    def count(self, step) -> Optional[str]:
        """Before the row is applied: count what the answer counts (RETRYs in
        a row); why it goes over a limit (None: it does not)."""
        return None

    def reason(self, step) -> Optional[str]:
        """The reason a person reads when the row stops the job."""
        return None

    def continue_with(self, step) -> str:
        """The next message of a turn that goes on (the row's ``continue``)."""
        return step.render("messages/continue")

    def wait(self, step) -> None:
        """What the turn waits for (the row's ``wait``)."""

    def stop(self, step) -> None:
        """What a turn the row ends leaves behind (the row's ``stop``)."""


class Completed(Action):
    name = "COMPLETED"
    meaning = "your turn is done."
    required = _EXIT_FIELDS
    exit = True
    tag, tag_field = "DONE", _SUMMARY
    routed = True

    def count(self, step) -> Optional[str]:
        if step.reviewing:
            # A RETRY sends work round the Worker-Supervisor loop; only an
            # accepted review ends the run of RETRYs.
            step.after.retries_in_a_row = 0
        return None

    def stop(self, step) -> None:
        if step.event == Event(self.name, f"to {USER}"):
            step.hand_over(step.summary)


class Stuck(Action):
    name = "STUCK"
    meaning = "a person must step in; the summary says exactly what is needed."
    required = _EXIT_FIELDS
    exit = True
    tag, tag_field = "STUCK", _SUMMARY

    def reason(self, step) -> Optional[str]:
        return f"{step.after.turn.role} is STUCK: {step.summary}"


class Retry(Action):
    name = "RETRY"
    meaning = "your approach failed; your turn starts over with fresh context; the summary says what to do differently."
    required = _EXIT_FIELDS
    exit = True
    tag, tag_field = "RETRY", _SUMMARY

    def count(self, step) -> Optional[str]:
        if not step.counts_retries:
            return None
        after = step.after
        after.retries_in_a_row += 1
        limit = after.settings.max_retries_in_a_row
        if after.retries_in_a_row > limit:
            return f"{after.retries_in_a_row} RETRYs in a row (limit {limit}); last: {step.answer.summary_for_supervisor}"
        return None


class Command(Action):
    name = "CMD"
    meaning = "run a command in the workspace; its output comes back in the next message."
    required = ("command",)
    tag, tag_field = "CMD", "command"
    planner_fields = False
    touches_workspace = True

    def run(self, answer, run_command):
        return run_command(answer.command or "")

    def event(self, step) -> Event:
        command = step.command
        if command is None or command.decision == "ask":
            return Event(self.name, "held")
        return Event(self.name, "denied" if command.decision == "deny" else "run")

    def continue_with(self, step) -> str:
        if step.event.variant == "run":
            return step.command.output
        return step.render("messages/command_denied", command=step.answer.command)

    def wait(self, step) -> None:
        step.after.pending_command = step.answer.command


class Ask(Action):
    name = "ASK"
    meaning = "ask the person a question."
    required = ("question",)
    optional = ("required",)
    tag, tag_field = "ASK", "question"
    tag_options = {"optional": {"required": False}}

    def planner_required(self, answer) -> tuple[str, ...]:
        # The question is the message.
        return tuple(f for f in PLANNER_REQUIRED if not (f == "message" and answer.question))

    def decoding_variant(self, planner: bool) -> tuple[list[str], list[str], dict]:
        fields, required, overrides = super().decoding_variant(planner)
        if planner:
            required.remove("message")  # the question is the message
            overrides = {"send_to": {"enum": [USER]}}
        return fields, required, overrides

    def check_addressee(self, answer) -> Optional[str]:
        return None if answer.send_to == USER else "send_to: a question (ASK) goes to User"

    def wait(self, step) -> None:
        step.ask(step.answer.question or step.answer.message or "", step.answer.required)


class Message(Action):
    name = "MESSAGE"
    meaning = "a short progress note; you continue right away."
    required = ("message",)
    tag, tag_field = "MESSAGE", "message"
    routed = True


#: The built-in actions, in the order the prompt and the schema list them.
BUILTIN: tuple[Action, ...] = (Completed(), Stuck(), Retry(), Command(), Ask(), Message())

#: The protocol's actions, by name, in the order the prompt and the schema
#: list them: the built-in ones, and any
#: :func:`logist.protocol.answer.register_action` adds. The registry is here,
#: below the answer model, so that what reads only the workflow's rules
#: (:mod:`logist.engine.workflow`, and through it ``logist job status``)
#: finds the actions without building the answer's models.
ACTION_RULES: dict[str, Action] = {action.name: action for action in BUILTIN}
