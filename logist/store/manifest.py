"""``job_manifest.json``: the job's current state, read and written here only.

Format 2. The manifest is small: what the job is (:class:`JobDefinition`,
fixed at create) and where it stands (:class:`JobState`: status, whose turn
it is, plan, budgets spent, pointers into the history). It holds no
conversation: a turn's messages are in the history entries of its calls, and
the turn names those entries (:class:`Turn`), so nothing here grows with the
length of a turn. Every history entry carries the state after it, so a lost
manifest is rebuilt from the history and any step can be returned to.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any, Literal, Optional

from pydantic import ConfigDict, Field, ValidationError, model_serializer

from .model import StoreModel
from .atomic import atomic_write_json
from .config import JobDefaults
from .status import PLANNER, SUPERVISOR, WORKER, Status  # noqa: F401 (the manifest's names for them)
from ..errors import CorruptFileError, InvalidManifestError

#: The format this version of Logist writes; older ones are upgraded (store/upgrade.py).
MANIFEST_FORMAT = 2
MANIFEST_SCHEMA = "job-manifest.v2.schema.json"

#: The roles a workflow's slots hold unless a job names others.
DEFAULT_SLOTS = {WORKER: "Worker", SUPERVISOR: "Supervisor"}
PLANNED_SLOTS = {PLANNER: "Planner", WORKER: "Worker", SUPERVISOR: "Supervisor"}
SOLO_SLOTS = {WORKER: "Worker"}
#: Each workflow's slots.
WORKFLOW_SLOTS = {"default": DEFAULT_SLOTS, "planned": PLANNED_SLOTS, "solo": SOLO_SLOTS}


def utc_now() -> str:
    """The time now, ISO 8601 UTC to the second: ``2026-11-23T10:04:05Z``."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


#: Models of files Logist writes keep fields they do not know (a newer
#: version's), so reading and writing back never loses them.
KEEP_UNKNOWN = ConfigDict(extra="allow")


class Message(StoreModel):
    """One chat message, as sent to or received from the model."""

    model_config = ConfigDict(extra="forbid")
    role: Literal["system", "user", "assistant"]
    """Who speaks: the system prompt, Logist (user) or the model (assistant)."""
    content: str
    """The message's text, exactly as sent or received."""


class Question(StoreModel):
    """A question the model asked the person (ASK)."""

    model_config = KEEP_UNKNOWN
    text: str
    """The question the model asked (ASK)."""
    required: bool = True
    """False: the person may skip it."""


class Turn(StoreModel):
    """One role's turn: from its first call until its exit command.

    The conversation is not stored here: each call of the turn is a history
    entry, and a later call's request continues the one before it
    (``request.continues``), so ``last_call`` and ``prompt_call`` are enough
    to rebuild every message (:mod:`logist.store.requests`)."""

    model_config = KEEP_UNKNOWN
    slot: str = WORKER
    """The workflow slot whose turn it is: worker, supervisor or planner."""
    role: str = "Worker"
    """The role filling the slot."""
    feedback: Optional[str] = None
    """Feedback that opens the turn (from a review, a rejection, a resubmit)."""
    task: Optional[str] = None
    """Planned workflow: the Planner's message that this turn carries out."""
    pending: Optional[str] = None
    """The next user message to send; None at the start of a turn, when the opening message is built from the job."""
    format_retries_used: int = 0
    """Re-asks spent on invalid answers in this turn."""
    rounds: int = 0
    """Calls of this turn whose answer is part of its conversation (a round: one user message and the answer to it)."""
    first_call: Optional[int] = None
    """History entry of the turn's first call; its request opens the turn."""
    last_call: Optional[int] = None
    """History entry of the turn's latest round; the next call continues it."""
    prompt_call: Optional[int] = None
    """History entry whose request holds in full the prompt the conversation extends; None: the next call sends its prompt in full (a new turn, or after a compaction)."""
    summary: Optional[str] = None
    """Compaction (SPEC section 7): a summary of the first ``summarised_rounds`` rounds, which the prompt shows instead of them."""
    summarised_rounds: int = 0
    """How many rounds ``summary`` covers."""
    compaction_failed_at: Optional[int] = None
    """Round count at which a summary call last failed; no new attempt until the conversation has grown past it."""


class Handoff(StoreModel):
    """The last exit command, passed to the next role (and shown to people)."""

    model_config = KEEP_UNKNOWN
    role: str
    """The role that ended its turn."""
    action: str
    """Its exit command: COMPLETED, RETRY or STUCK."""
    summary: str
    """What it said it did (summary_for_supervisor)."""
    evidence_files: list[str] = []
    """Workspace files it named as evidence."""


class Totals(StoreModel):
    """Sums over the job's history, rewound entries included (they were paid
    for). Tokens, cost and ``llm_calls`` count real model calls only; answers
    applied from a recording or posted by hand are counted apart. Every
    history entry carries the state after it, so the last entry holds the
    totals and they survive restarts, rewinds and crashes."""

    model_config = KEEP_UNKNOWN
    llm_calls: int = 0
    """Calls made to a model (role calls and summary calls)."""
    prompt_tokens: int = 0
    """Prompt tokens of those calls, as the endpoint reported them."""
    completion_tokens: int = 0
    """Completion tokens of those calls."""
    cost_usd: float = 0.0
    """Cost of the calls whose model has a price in config.json; see unpriced_calls."""
    unpriced_calls: int = 0
    """Calls whose model has no price, so their cost is unknown."""
    unknown_calls: int = 0
    """Calls of unknown outcome (counted in llm_calls too): the process ended while the call was in flight, so whether it was answered and charged is unknown; their tokens and cost are not known."""
    replayed: int = 0
    """Answers applied from a recorded history (job replay): no call was made."""
    posted: int = 0
    """Answers posted by hand (job poststep): no call was made."""
    wall_ms: int = 0
    """Time spent in steps, in milliseconds: each step whole (call, answer applied, commit, command), not waiting for a person."""

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class Source(StoreModel):
    """Where a cloned workspace came from (job create --from-repo)."""

    model_config = KEEP_UNKNOWN
    repo: Optional[str] = None
    """The repository the workspace was cloned from (--from-repo)."""
    ref: Optional[str] = None
    """The ref that was checked out (--ref)."""
    commit: Optional[str] = None
    """The commit the clone started at."""


class JobSettings(JobDefaults):
    """The job's copy of the settings (config.json's ``defaults``, then the
    job's own); in a job's files, fields a newer Logist added are kept."""

    model_config = KEEP_UNKNOWN


class ActiveSkill(StoreModel):
    """What a job keeps of its skill (in a job's files, fields a newer Logist added are kept)."""

    model_config = ConfigDict(extra="allow")
    name: str
    """The skill's name."""
    params: dict[str, str] = {}
    """The values its params had: given, else their defaults."""
    instructions: str
    """The skill's instructions as rendered with those values at create; later edits of SKILL.md do not change them."""
    protocol: Optional[Literal["json", "tags"]] = None
    """The protocol the skill asks the job's roles to answer in, if it names one (absent: each role's own)."""
    prompted: bool = False
    """Whether the person gave the job's objective (kosmos-panel's custom prompt), sent in the tags protocol in place of "Execute skill: NAME"."""

    @model_serializer(mode="wrap")
    def _without_an_unset_protocol(self, handler):
        # Absent, not null or false: a job made before these fields keeps the files it had.
        data = handler(self)
        if isinstance(data, dict) and data.get("protocol", "") is None:
            del data["protocol"]
        if isinstance(data, dict) and data.get("prompted") is False:
            del data["prompted"]
        return data


class JobDefinition(StoreModel):
    """What the job is: set at create, recorded once in the history's first entry."""

    model_config = KEEP_UNKNOWN
    job_id: str
    """The job's id (its folder's name)."""
    objective: str
    """What the job must achieve."""
    details: str = ""
    """More about the objective."""
    acceptance_criteria: list[str] = []
    """What the result must satisfy."""
    files: list[str] = []
    """Workspace files shown to the roles at the start of a turn."""
    workflow: Literal["default", "planned", "solo"] = "default"
    """default: Worker and Supervisor; planned: a Planner directs the other roles; solo: the Worker alone, its COMPLETED ([DONE]) ends the job (a skill's job)."""
    roles: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_SLOTS))
    """Slot -> the role that fills it."""
    model: Optional[str] = None
    """A model for every role of this job (overrides the roles' own)."""
    settings: JobSettings = JobSettings()
    """Limits, budgets and the command policy."""
    skill: Optional[ActiveSkill] = None
    """The skill the job was made from, with its instructions as rendered then."""
    created_at: str = Field(default_factory=utc_now)
    """When the job was created (ISO 8601 UTC)."""
    source: Source = Source()
    """Where the workspace came from, if it was cloned."""
    baseline_commit: Optional[str] = None
    """The workspace's commit right after create; job rerun returns here."""
    no_review: bool = False
    """Solo workflow: --no-review was given at create, so the Worker's COMPLETED ends the job at SUCCESS even when it has no checks (without it, a solo job with no checks waits for a person's approval)."""


class CheckSummary(StoreModel):
    """The last run of the job's checks, for approval: where it ran and what failed."""

    model_config = KEEP_UNKNOWN
    sequence: int
    """The history entry that records the run (kind ``check``)."""
    commit: Optional[str] = None
    """The workspace commit the checks ran on."""
    passed: bool
    """Every check exited 0."""
    failed: list[str] = []
    """The commands of the checks that failed."""


class JobState(StoreModel):
    """Where the job stands: changes with every step; each history entry
    carries it as it was after the entry (``state``)."""

    model_config = KEEP_UNKNOWN
    status: Status = Status.PENDING
    """The job's state (SPEC section 5)."""
    updated_at: str = Field(default_factory=utc_now)
    """When the last history entry was written (ISO 8601 UTC)."""
    workspace_commit: Optional[str] = None
    """The workspace commit the job's state belongs to."""
    last_sequence: int = 0
    """Sequence number of the last history entry this state reflects: the job's step number."""
    calls: int = 0
    """Steps taken in the job's history as it stands: answers applied (model calls, replayed and posted answers; a call that brought no answer is none), a rewind taking back those it undoes. The N of "[Step N of MAX]" is the next one; settings.max_steps limits it. The calls made to a model, rewound ones too, are totals.llm_calls."""
    retries_in_a_row: int = 0
    """RETRYs since the Supervisor last accepted work."""
    totals: Totals = Totals()
    """Calls, tokens, cost and time so far."""
    turn: Turn = Turn()
    """The turn of the role that acts next."""
    last_exit: Optional[Handoff] = None
    """The last exit command, for the next role and for people."""
    plan: list[str] = []
    """Planned workflow: the Planner's plan."""
    current_plan_step: Optional[int] = None
    """Planned workflow: the plan step being worked on."""
    plan_reasoning: Optional[str] = None
    """Planned workflow: the Planner's reasoning about its plan (plan_reasoning), as it last gave it."""
    planner_thought: Optional[str] = None
    """Planned workflow: the thought of the Planner's last answer that had one."""
    planner_turn: Optional[Turn] = None
    """Planned workflow: the Planner's turn, kept while a role it addressed has its turn."""
    question: Optional[Question] = None
    """The open question (INPUT_REQUIRED)."""
    pending_command: Optional[str] = None
    """A command the policy holds until a person approves or skips it."""
    pending_changes: Optional[list[dict]] = None
    """File changes the role's file_changes policy (approval) holds until a person approves or skips them."""
    resume_status: Optional[Status] = None
    """The state to return to after SUSPENDED or INPUT_REQUIRED."""
    reason: Optional[str] = None
    """Why the job needs a person (INTERVENTION_REQUIRED)."""
    checks_due: bool = False
    """The job's checks run before anything else happens (a role's COMPLETED they verify): job step or job check runs them."""
    last_check: Optional[CheckSummary] = None
    """The last run of the job's checks (None: they never ran)."""
    person_inputs: list[int] = []
    """The history entries in which the person answered a question or gave feedback (reject, resubmit with a text): every turn's first message recalls them, read from those entries."""

    def state_dump(self) -> dict:
        """The state part alone, defaults left out: what a history entry carries."""
        data = self.model_dump(mode="json", include=set(JobState.model_fields), exclude_defaults=True)
        always = {"status": str(self.status), "updated_at": self.updated_at, "last_sequence": self.last_sequence}
        return always | data


class JobManifest(JobState, JobDefinition):
    """The whole manifest: ``format``, the definition, then the state."""

    model_config = ConfigDict(extra="allow", use_enum_values=False, populate_by_name=True)
    schema_: str = Field(default=MANIFEST_SCHEMA, alias="$schema")
    """The JSON Schema of this file (in Logist's schemas/ folder)."""
    format: int = MANIFEST_FORMAT
    """The file's format version."""

    def dump(self) -> dict:
        data = self.model_dump(mode="json", by_alias=True)
        # The version first, then what the job is, then where it stands.
        order = ["$schema", "format", *JobDefinition.model_fields, *JobState.model_fields]
        return {k: data[k] for k in order if k in data} | {k: v for k, v in data.items() if k not in order}

    def definition(self) -> JobDefinition:
        return JobDefinition.model_validate(self.model_dump(include=set(JobDefinition.model_fields)))

    def with_state(self, state: JobState | dict) -> "JobManifest":
        """This job's definition with ``state`` (an entry's ``state``)."""
        data = state if isinstance(state, dict) else state.state_dump()
        base = self.model_dump(mode="json", by_alias=True, include={"schema_", "format", *JobDefinition.model_fields})
        return JobManifest.model_validate({**base, **(self.model_extra or {}), **data})


# -- format 1, read (the history's upgrades are logist.store.upgrade's) --


def is_format_1(data: Any) -> bool:
    """Whether parsed JSON is a format 1 file (it names no format)."""
    return isinstance(data, dict) and "format" not in data


def _turn(turn: Optional[dict], pointers: Optional[dict] = None) -> Optional[dict]:
    if turn is None:
        return None
    turn = dict(turn)
    messages = turn.pop("messages", []) or []
    turn["rounds"] = len(messages) // 2
    turn.update(pointers or {})
    return turn


def milliseconds(seconds: Any) -> int:
    """Seconds as format 1 wrote them, in the milliseconds later formats write."""
    return int(round(float(seconds or 0) * 1000))


def upgrade_manifest_data(data: Any, pointers: Optional[dict] = None) -> Any:
    """A format 1 manifest as format 2 (anything else unchanged).

    ``pointers`` maps "turn" and "planner_turn" to the history pointers of
    their conversations, which only the history can tell.
    """
    if not is_format_1(data):
        return data
    pointers = pointers or {}
    out = {"$schema": MANIFEST_SCHEMA, "format": MANIFEST_FORMAT, **data}
    if "steps" in out:
        out["calls"] = out.pop("steps")
    totals = dict(out.get("totals") or {})
    if "wall_seconds" in totals:
        totals["wall_ms"] = milliseconds(totals.pop("wall_seconds"))
    out["totals"] = totals
    out["turn"] = _turn(out.get("turn") or {}, pointers.get("turn"))
    out["planner_turn"] = _turn(out.get("planner_turn"), pointers.get("planner_turn"))
    return out


def parse_manifest(data: Any, where: str) -> JobManifest:
    """A manifest from parsed JSON of any format (older ones upgraded in memory).

    A JSON object with fields of a wrong type or value (a hand edit) raises
    :class:`InvalidManifestError` naming each field and its value; anything
    else that is no manifest (not an object: a file cut short by a crash
    that still parses, say) is :class:`CorruptFileError`."""
    try:
        return JobManifest.model_validate(upgrade_manifest_data(data))
    except ValidationError as exc:
        errors = exc.errors()
        if isinstance(data, dict) and errors and all(err["loc"] for err in errors):
            fields = tuple(".".join(str(part) for part in err["loc"]) for err in errors)
            parts = [_field_problem(field, err) for field, err in zip(fields, errors)]
            raise InvalidManifestError(f"{where}: " + "; ".join(parts), fields) from None
        first = str(exc).strip().splitlines()[0]
        raise CorruptFileError(f"{where} is corrupt: {first}") from None
    except ValueError as exc:
        first = str(exc).strip().splitlines()[0]
        raise CorruptFileError(f"{where} is corrupt: {first}") from None


def _field_problem(field: str, err: dict) -> str:
    """One field's fault as a person reads it: the field, the value found, what it should be."""
    if err["type"] == "missing":
        return f"field {field} is missing"
    value = json.dumps(err.get("input"), ensure_ascii=False, default=str)
    if len(value) > 60:
        value = value[:57] + "..."
    message = err["msg"].removeprefix("Value error, ")
    return f"field {field} is {value}: {message}"


def invalid_manifest_fix(files: "JobFiles", fields: tuple[str, ...]) -> str:
    """How to go on from a manifest with an invalid field (:class:`InvalidManifestError`)."""
    named = ", ".join(fields)
    return (f"fix {named} in {files.manifest_path.name} (your other edits there are kept), or run 'logist job fsck "
            f"{files.id} --rebuild-manifest' to rebuild the manifest from the history, dropping every edit made to it")


def read_manifest(files: "JobFiles") -> JobManifest:
    path = files.manifest_path
    if path.exists() and not path.is_file():  # a folder (or a pipe, which would block)
        raise CorruptFileError(f"{path} is corrupt: it is not a file")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise
    except ValueError as exc:
        raise CorruptFileError(f"{path} is corrupt: {exc}") from None
    except RecursionError:  # JSON nested thousands deep: no file Logist writes
        raise CorruptFileError(f"{path} is corrupt: it is nested too deep to be read") from None
    try:
        return parse_manifest(data, str(path))
    except InvalidManifestError as exc:
        raise InvalidManifestError(f"{exc}; {invalid_manifest_fix(files, exc.fields)}",
                                   exc.fields) from None


def write_manifest(files: "JobFiles", manifest: JobManifest, durable: bool = True) -> None:
    """Write the manifest; ``durable=False`` once the history holds its state
    (:func:`logist.store.atomic.atomic_write`)."""
    atomic_write_json(files.manifest_path, manifest.dump(), durable)
