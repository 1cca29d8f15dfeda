"""``job_manifest.json``: the job's current state, read and written here only.

The manifest holds everything needed to take the next step without reading
the history: the status, whose turn it is, the turn's conversation so far and
the message to send next. Each history entry keeps a copy of the manifest as
it was after that entry (``manifest_after``), so a damaged manifest can be
rebuilt and any step can be returned to.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from enum import Enum
from pathlib import Path
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from .atomic import atomic_write_json
from .config import JobDefaults
from ..errors import CorruptFileError
from .skills import ActiveSkill

MANIFEST_NAME = "job_manifest.json"


class Status(str, Enum):
    DRAFT = "DRAFT"
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    REVIEWING = "REVIEWING"
    INPUT_REQUIRED = "INPUT_REQUIRED"
    APPROVAL_REQUIRED = "APPROVAL_REQUIRED"
    INTERVENTION_REQUIRED = "INTERVENTION_REQUIRED"
    SUSPENDED = "SUSPENDED"
    SUCCESS = "SUCCESS"
    CANCELED = "CANCELED"

    def __str__(self) -> str:  # so f-strings print the bare name
        return self.value


#: The slots of a workflow, which a job fills with roles of its choice.
WORKER, SUPERVISOR, PLANNER = "worker", "supervisor", "planner"
DEFAULT_SLOTS = {WORKER: "Worker", SUPERVISOR: "Supervisor"}
PLANNED_SLOTS = {PLANNER: "Planner", WORKER: "Worker", SUPERVISOR: "Supervisor"}


def utc_now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid")
    role: Literal["system", "user", "assistant"]
    content: str


class Question(BaseModel):
    model_config = ConfigDict(extra="forbid")
    text: str
    required: bool = True


class Turn(BaseModel):
    """One role's turn: from its first call until its exit command."""

    model_config = ConfigDict(extra="forbid")
    slot: str = WORKER
    role: str = "Worker"
    #: Feedback that opens the turn (from a review, a rejection, a resubmit).
    feedback: Optional[str] = None
    #: Planned workflow: the Planner's message that this turn carries out.
    task: Optional[str] = None
    #: Messages already sent and answered in this turn (without the system prompt).
    messages: list[Message] = []
    #: The next user message to send; None at the start of a turn, when the
    #: opening message is built from the job.
    pending: Optional[str] = None
    #: Re-asks spent on invalid answers in this turn.
    format_retries_used: int = 0
    #: Compaction (SPEC section 7): a summary of the first
    #: ``summarised_rounds`` rounds of ``messages``, which the prompt then
    #: replaces with it. A round is one user message and the answer to it.
    summary: Optional[str] = None
    summarised_rounds: int = 0
    #: Round count at which a summary call last failed; no new attempt until
    #: the conversation has grown past it.
    compaction_failed_at: Optional[int] = None

    @property
    def rounds(self) -> int:
        return len(self.messages) // 2


class Handoff(BaseModel):
    """The last exit command, passed to the next role (and shown to people)."""

    model_config = ConfigDict(extra="forbid")
    role: str
    action: str
    summary: str
    evidence_files: list[str] = []


class Totals(BaseModel):
    """Running sums over every LLM call in the history, rewound ones included
    (they were paid for). Each history entry keeps the manifest after it, so
    the last entry holds the totals: they come from the history without
    reading all of it, and survive restarts, rewinds and crashes."""

    model_config = ConfigDict(extra="forbid")
    llm_calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    #: Sum of the calls whose model has a price; see ``unpriced_calls``.
    cost_usd: float = 0.0
    unpriced_calls: int = 0
    #: Time spent in calls and commands (not waiting for a person).
    wall_seconds: float = 0.0

    @property
    def tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


class Source(BaseModel):
    model_config = ConfigDict(extra="forbid")
    repo: Optional[str] = None
    ref: Optional[str] = None
    commit: Optional[str] = None


class JobManifest(BaseModel):
    model_config = ConfigDict(extra="forbid", use_enum_values=False)

    job_id: str
    status: Status = Status.PENDING
    objective: str
    details: str = ""
    acceptance_criteria: list[str] = []
    files: list[str] = []
    workflow: Literal["default", "planned"] = "default"
    roles: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_SLOTS))
    model: Optional[str] = None
    settings: JobDefaults = JobDefaults()
    #: The skill the job was made from, with its instructions as rendered then.
    skill: Optional[ActiveSkill] = None
    created_at: str = Field(default_factory=utc_now)
    updated_at: str = Field(default_factory=utc_now)
    source: Source = Source()
    baseline_commit: Optional[str] = None
    workspace_commit: Optional[str] = None
    #: Sequence number of the last history entry this manifest reflects.
    last_sequence: int = 0
    #: LLM calls made (and answers posted) so far: the N of "[Step N of MAX]".
    steps: int = 0
    retries_in_a_row: int = 0
    totals: Totals = Totals()
    turn: Turn = Turn()
    last_exit: Optional[Handoff] = None
    #: Planned workflow: the Planner's plan, the step being worked on, and
    #: the Planner's conversation, kept while a role it addressed has its turn.
    plan: list[str] = []
    current_plan_step: Optional[int] = None
    planner_turn: Optional[Turn] = None
    question: Optional[Question] = None
    #: A command the policy holds until a person approves or skips it.
    pending_command: Optional[str] = None
    #: The state to return to after SUSPENDED or INPUT_REQUIRED.
    resume_status: Optional[Status] = None
    #: Why the job needs a person (INTERVENTION_REQUIRED), or None.
    reason: Optional[str] = None

    def dump(self) -> dict:
        return self.model_dump(mode="json")


def manifest_path(job_dir: Path) -> Path:
    return Path(job_dir) / MANIFEST_NAME


def read_manifest(job_dir: Path) -> JobManifest:
    path = manifest_path(job_dir)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return JobManifest.model_validate(data)
    except FileNotFoundError:
        raise
    except (ValueError, ValidationError) as exc:
        first = str(exc).strip().splitlines()[0]
        raise CorruptFileError(f"{path} is corrupt: {first}") from None


def write_manifest(job_dir: Path, manifest: JobManifest) -> None:
    atomic_write_json(manifest_path(job_dir), manifest.dump())
