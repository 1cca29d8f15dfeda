"""The entries of ``jobHistory.json`` (format 5): one model per part.

An entry holds what is new at its step. A call's request is recorded in
full (``prompt``) only when it does not extend an earlier one: the first
call of a turn, a summary call, the first call after a compaction. A later
round of the turn names the entry it continues and holds only the messages
it added (``continues`` + ``added``); its exact request is that entry's
request, that entry's answer, then ``added``
(:mod:`logist.store.requests` rebuilds it). That is the one delta: every
other part of an entry is written out in the entry itself. A call entry
carries the reference Logist design's fields in full (:data:`SEED_FIELDS`): ``workspace_path``,
``request.files_context`` (``[]`` when none), the whole
``request.metadata`` (role, phase, model, temperature, max_tokens,
response_format, stream) and the response's status, actions, evidence
files, summary and raw answer, so a script written from the reference Logist design reads
every entry. Each entry carries the job's small state after it (``state``,
:class:`~logist.store.manifest.JobState`), and the first entry what the
job is (``definition``), so the history alone restores the manifest at any
entry. Older formats are upgraded by :mod:`logist.store.upgrade`.
"""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import ConfigDict, model_validator

from .model import StoreModel
from .manifest import KEEP_UNKNOWN, JobDefinition, JobState, Message

#: Entry kinds. llm_call: one call of the model; replay: an answer applied
#: from a recorded history (job replay), no call made; poststep: an answer
#: posted by hand (job poststep); compaction: a summary call (SPEC section
#: 7); user_action: a person's command; repair: what Logist did to repair an
#: interrupted command; rewind: a restep or rerun; limit: a budget or the
#: call limit stopped the job before a call; check: one run of the job's checks
#: (no call: the commands a person gave the job, run in its workspace);
#: agent_run: one run of the role's coding agent (its model calls made
#: through Logist's recording gateway, its work and its exit command in
#: ``agent``).
Kind = Literal["llm_call", "replay", "poststep", "compaction", "user_action", "repair", "rewind", "limit", "check",
               "agent_run"]
#: Kinds that apply an answer of the role (a call, or one standing in for it).
ANSWER_KINDS = ("llm_call", "replay", "poststep", "agent_run")
#: Kinds that carry a request.
CALL_KINDS = ("llm_call", "replay", "poststep", "compaction", "agent_run")


class RequestMetadata(StoreModel):
    """How a call was made: for whom, in which state, with which model and parameters."""

    model_config = KEEP_UNKNOWN
    role: Optional[str] = None
    """The role the call was made for."""
    phase: Optional[str] = None
    """The job's state when the call was made, or "compaction" for a summary call."""
    model: str
    """The model the request named."""
    temperature: Optional[float] = None
    """The temperature sent, if any."""
    max_tokens: Optional[int] = None
    """The max_tokens sent, if any."""
    response_format: Optional[dict] = None
    """The response_format sent, if any, named by its digest: ``{"type", "file"}``, the file being the job's ``response_formats/<digest>.json``, which holds it exactly as sent (a value written here whole, as an older Logist did, is read as it is)."""
    context_window: Optional[int] = None
    """The context window the request was sized for (its default max_tokens at most a quarter of it; a summary call instead of one that would not fit), when it came from the machine it was made on: config.json's model_settings or the endpoint (a role's own and Logist's table of models are found again wherever the history is replayed). A replay sizes its request for this window, whatever the replaying jobs directory says."""
    context_window_from: Optional[str] = None
    """Where ``context_window`` was found, such as "config.json model_settings" or "the endpoint (/props)"."""
    structured_output: Optional[str] = None
    """The structured_output setting the response_format was chosen by, when config.json's model_settings named it (absent: the role's own, else auto). A replay uses it, whatever the replaying jobs directory says."""
    stream: Optional[bool] = None
    """True when the answer was asked for as a stream (stream, with stream_options asking for the usage)."""
    idempotency_key: Optional[str] = None
    """The ``Idempotency-Key`` header the call was sent with (the same on every retry of the call): ``<job>@<created>:<step>:<digest of the body>`` (:func:`logist.store.calls.call_key`). Left out where the entry's rebuilt body gives it."""
    key_format: Optional[int] = None
    """4: the key this entry leaves out is derived by format 4's rule (the digest of the messages' roles and texts, framed: an entry written in format 4 or before, upgraded); none: by the current one (the SHA-256 of the body's bytes as sent)."""
    agent: Optional[str] = None
    """The coding agent that answered (the role's ``agent``), when one did: the request is the prompt it was given."""


class AddedMessage(StoreModel):
    """A message a call added: its text, or (a command's output being the
    next message the model is sent) ``prefix``, the ``command.output`` of
    entry ``output_of``, then ``suffix``, so the output is stored once."""

    model_config = KEEP_UNKNOWN
    role: Literal["system", "user", "assistant"]
    """Who speaks: the system prompt, Logist (user) or the model (assistant)."""
    content: Optional[str] = None
    """The message's text, exactly as sent (absent when ``output_of`` says it)."""
    output_of: Optional[int] = None
    """The entry whose command output the message holds (instead of ``content``)."""
    prefix: str = ""
    """With ``output_of``: the text sent before the output."""
    suffix: str = ""
    """With ``output_of``: the text sent after the output."""

    @model_validator(mode="after")
    def _one_source(self) -> "AddedMessage":
        if (self.content is None) == (self.output_of is None):
            raise ValueError("an added message has either 'content' or 'output_of'")
        return self


class Request(StoreModel):
    """The request's messages: ``prompt`` in full, or ``continues`` + ``added``."""

    model_config = KEEP_UNKNOWN
    prompt: Optional[list[Message]] = None
    """Every message sent, in order (first call of a turn, summary calls, first call after a compaction)."""
    continues: Optional[int] = None
    """The entry this call continues: its request's messages and its answer come before ``added``."""
    added: Optional[list[AddedMessage]] = None
    """The messages this call added after the continued entry's answer."""
    files_context: list[str] = []
    """Workspace files whose contents the prompt includes."""
    metadata: RequestMetadata
    """How the call was made."""

    @model_validator(mode="after")
    def _one_form(self) -> "Request":
        if (self.prompt is None) == (self.continues is None):
            raise ValueError("a request has either 'prompt' or 'continues' (with 'added')")
        if self.continues is not None and self.added is None:
            raise ValueError("a request that continues an entry needs 'added'")
        return self


class Response(StoreModel):
    """What came back from a call, and what Logist made of it."""

    model_config = KEEP_UNKNOWN
    status: Literal["SUCCESS", "INVALID", "FAILED", "UNKNOWN"] = "SUCCESS"
    """SUCCESS: a valid answer; INVALID: not JSON or against the protocol; FAILED: the call failed (no answer; formats 1-3 said ERROR); UNKNOWN: the process ended while the call was in flight, so whether the endpoint answered (and charged for it) is unknown; nothing was applied."""
    actions: list[str] = []
    """The answer's action."""
    evidence_files: list[str] = []
    """Files the answer named as evidence."""
    summary_for_supervisor: Optional[str] = None
    """The answer's summary, if it gave one."""
    raw_response: Optional[str] = None
    """The answer exactly as received; the next round's request repeats it as the assistant message."""
    error: Optional[str] = None
    """Why the answer was refused or the call failed."""
    finish_reason: Optional[str] = None
    """Why the model stopped, when it was not a plain stop: length, the answer was cut at max_tokens."""
    fault: Optional[str] = None
    """Of a failed call (FAILED): transient when the endpoint failed for now (5xx after the retries, a timeout, a disconnect) and the turn was kept to go on with; absent when the failure stopped the job."""
    files_changed: list[str] = []
    """Workspace paths the answer's file changes wrote or deleted."""
    notes: list[str] = []
    """How the answer was read when it was not in the protocol's exact shape (a reasoning block set aside, a lower-case action, no tag: its first line read as a command...)."""
    extra_fields: dict[str, Any] = {}
    """Fields the answer carried that the protocol does not know (the reference Logist design's job_manifest_url, TaskWeaver's stop...): kept here, never acted on."""


class Usage(StoreModel):
    """Tokens and cost of one call."""

    model_config = KEEP_UNKNOWN
    prompt_tokens: Optional[int] = None
    """Prompt tokens the endpoint reported."""
    completion_tokens: Optional[int] = None
    """Completion tokens the endpoint reported."""
    cost_usd: Optional[float] = None
    """The call's cost, when its model has a price."""
    estimated: bool = False
    """True when the endpoint reported no usage and the tokens were estimated from the text (4 characters a token, rounded up)."""


class AgentCall(StoreModel):
    """One model call a coding agent made through the gateway: what the entry
    says of it; the call in full (request, answer, a stream's events) is the
    file it names."""

    model_config = KEEP_UNKNOWN
    number: int
    """The run's calls counted from 1, in the order the gateway forwarded them."""
    file: str
    """The call in full, relative to the job's folder (``agent_runs/<entry>/call-<number>.json``)."""
    api: str
    """The API the agent spoke: chat, responses or messages."""
    status: int
    """The HTTP status the agent was answered with."""
    input_tokens: Optional[int] = None
    """Prompt tokens the endpoint reported."""
    output_tokens: Optional[int] = None
    """Completion tokens the endpoint reported."""
    duration_ms: int = 0
    """From the call's arrival until it was recorded."""
    error: Optional[str] = None
    """Why the call failed or its answer broke off."""


class AgentRunRecord(StoreModel):
    """One run of a role's coding agent (an ``agent_run`` entry; a replay of one carries it too)."""

    model_config = KEEP_UNKNOWN
    agent: str
    """The agent (the role's ``agent``)."""
    argv: list[str] = []
    """The command line run, program first (the run's token shown as ``[run token]``)."""
    exit_code: Optional[int] = None
    """The agent's exit code; absent when it was stopped (its timeout, or the process ended)."""
    timed_out: bool = False
    """It ran past the job's command_timeout and was stopped."""
    exit_source: Optional[str] = None
    """Where the step's answer came from: exit_file (LOGIST_EXIT_FILE), final_message (the agent's last message), or rule (its exit code and the files it changed)."""
    refused: Optional[str] = None
    """Why the exit command the agent gave was refused (the answer is then STUCK)."""
    final_message: Optional[str] = None
    """The agent's final message, as its provider reads it."""
    stdout_tail: str = ""
    """The end of what it printed (command_output_limit characters), redacted."""
    stderr_tail: str = ""
    """The end of its standard error, redacted."""
    changed_files: list[str] = []
    """Workspace paths the run changed."""
    commits: Optional[str] = None
    """BEFORE..AFTER when the agent made commits itself (folded into the step's commit)."""
    calls: list[AgentCall] = []
    """Each model call it made through the gateway, in order."""
    budget_stop: Optional[str] = None
    """Why the gateway refused its calls once a budget was spent: the run ended there and the job stops at its budget."""
    unrecorded: list[str] = []
    """Calls whose record could not be kept (their answers were withheld from the agent)."""
    interrupted: bool = False
    """The process ended during the run: only its recorded calls are known; its work was undone."""
    patch: Optional[str] = None
    """The run's work as a binary git patch against the commit it started from: what job replay applies without the agent."""


class CommandRecord(StoreModel):
    """A command the model asked for, and what became of it."""

    model_config = KEEP_UNKNOWN
    command: str
    """The command line, as the model wrote it."""
    decision: Literal["run", "ask", "deny"]
    """run: executed; ask: held for a person; deny: refused by the policy."""
    exit_code: Optional[int] = None
    """Its exit code, when it ran to the end."""
    timed_out: bool = False
    """True when it was stopped at the job's command timeout."""
    duration_ms: int = 0
    """How long it ran, in milliseconds."""
    output: Optional[str] = None
    """The cleaned output exactly as the model is shown it."""
    cwd: Optional[str] = None
    """The absolute path the command ran in (the job's workspace then), recorded when its output names it: a record of the run that a replay recognises in the output, never used to find the workspace. Absent: the job's ``workspace/``, not named in the output."""
    raw_stdout: Optional[str] = None
    """The standard output as the command printed it, when cleaning changed more than its line ends (of a huge output, its first and last bytes around a note counting the rest)."""
    raw_stderr: Optional[str] = None
    """The same for the standard error."""


class UserInput(StoreModel):
    """A person's command and its text."""

    model_config = KEEP_UNKNOWN
    action: str
    """The person's command (create, answer, approve, reject, ...)."""
    text: Optional[str] = None
    """Its text: an answer, feedback, the objective."""
    despite_checks: bool = False
    """approve: the person approved while a check failed or the checks had not run on the workspace's commit (--despite-checks)."""


class CheckResult(StoreModel):
    """One check of a run: its command and what it did."""

    model_config = KEEP_UNKNOWN
    command: str
    """The check's command line, as the job gives it."""
    exit_code: Optional[int] = None
    """Its exit status (None: it timed out, or could not be started)."""
    timed_out: bool = False
    """True when it was stopped at the job's command timeout."""
    duration_ms: int = 0
    """How long it ran, in milliseconds."""
    output: str = ""
    """The end of its cleaned output (standard output, then standard error), redacted as a command's is."""

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    @property
    def ending(self) -> str:
        """How it ended, in a few words: passed, failed (exit N), timed out, could not run."""
        if self.timed_out:
            return "timed out"
        if self.exit_code is None:
            return "could not run"
        return "passed" if self.passed else f"failed (exit {self.exit_code})"


class CheckRun(StoreModel):
    """One run of the job's checks (an entry of kind ``check``)."""

    model_config = KEEP_UNKNOWN
    commit: Optional[str] = None
    """The workspace commit the checks ran on."""
    results: list[CheckResult] = []
    """Each check, in the job's order."""
    requested: bool = False
    """Run on a person's demand (job check), not because a role's COMPLETED was to be verified."""

    @property
    def passed(self) -> bool:
        return all(result.passed for result in self.results)

    @property
    def failed(self) -> list[CheckResult]:
        return [result for result in self.results if not result.passed]


#: The response status of a call whose outcome is unknown.
UNKNOWN = "UNKNOWN"
#: The response status of a call that failed (no answer).
FAILED = "FAILED"
#: Where the workspace is, relative to the job's folder: every call entry's ``workspace_path``.
WORKSPACE_PATH = "workspace"
#: The reference Logist design's fields of a call entry (jjurach/logist), each written out even when empty or null: the entry's own,
#: its request's, its request metadata's and its response's.
SEED_FIELDS = {
    "entry": ("sequence", "timestamp", "state_before", "workspace_path", "request", "response"),
    "request": ("files_context", "metadata"),
    "metadata": ("role", "phase", "model", "temperature", "max_tokens", "response_format", "stream"),
    "response": ("status", "actions", "evidence_files", "summary_for_supervisor", "raw_response"),
}


def unknown_outcome(entry: dict) -> bool:
    """Whether a parsed entry records a call of unknown outcome (no answer to replay)."""
    return ((entry.get("response") or {}).get("status")) == UNKNOWN


class HistoryEntry(StoreModel):
    """One entry of the job's history: its number names it everywhere (commit messages, the `#N` of `job step`'s lines, `--entry N`); it is not the step count."""

    model_config = KEEP_UNKNOWN
    sequence: int
    """The step number: 1 for create, then one more per entry."""
    kind: Kind
    """What the entry records (see the module's description of each kind)."""
    timestamp: str
    """When the entry was written, ISO 8601 UTC to the second."""
    duration_ms: int = 0
    """Time the call took, in milliseconds."""
    state_before: str
    """The job's state before the step."""
    state_after: str
    """The job's state after the step."""
    role: Optional[str] = None
    """The role the step concerns."""
    workspace_commit: Optional[str] = None
    """The workspace commit after the step."""
    workspace_path: Optional[str] = None
    """Of a call entry: where the workspace is, relative to the job's folder, always ``"workspace"`` (a field of the reference Logist design, jjurach/logist). (Files before format 4 named the absolute path a step ran in here, when it was not the header's; the upgrade moves it into ``command.cwd``, where a command records where it ran.)"""
    request: Optional[Request] = None
    """What was sent (calls only)."""
    response: Optional[Response] = None
    """What came back (calls only)."""
    usage: Optional[Usage] = None
    """Tokens and cost (calls only)."""
    user_input: Optional[UserInput] = None
    """A person's command (user_action)."""
    command: Optional[CommandRecord] = None
    """A command the model asked for, and what became of it."""
    checks: Optional[CheckRun] = None
    """check: the run of the job's checks this entry records."""
    agent: Optional[AgentRunRecord] = None
    """agent_run (and a replay of one): the run of the role's coding agent."""
    rewound_to: Optional[int] = None
    """rewind: the entry whose end state was restored."""
    note: Optional[str] = None
    """What Logist did, in words (repairs, limits, rewinds, summaries)."""
    definition: Optional[JobDefinition] = None
    """What the job is: on the first entry (and on any entry that changes it)."""
    pending_is_command_output: bool = False
    """True when ``state.turn.pending`` is left out because it is this entry's ``command.output`` (a command's output is the next message the model is sent), so the output is stored once; reading the entry puts it back."""
    state: JobState
    """The job's state after this entry (defaults left out; what the entry itself says too: its status, time, number and commit)."""

    @model_validator(mode="before")
    @classmethod
    def _restore(cls, data: Any) -> Any:
        """The read side of :meth:`dump`: put back what it left out."""
        if not isinstance(data, dict) or not isinstance(data.get("state"), dict):
            return data
        state = dict(data["state"])
        # Said once by the entry itself.
        for key, source in (("status", "state_after"), ("updated_at", "timestamp"), ("last_sequence", "sequence"),
                            ("workspace_commit", "workspace_commit")):
            if key not in state and data.get(source) is not None:
                state[key] = data[source]
        request = data.get("request")
        if isinstance(request, dict) and isinstance(request.get("metadata"), dict):
            # Said once by the entry itself.
            meta = request["metadata"]
            restored = {"role": data.get("role"), "phase": data.get("state_before")}
            missing = {k: v for k, v in restored.items() if k not in meta and v is not None}
            if missing:
                data = {**data, "request": {**request, "metadata": {**meta, **missing}}}
        command = data.get("command")
        if data.get("pending_is_command_output") and isinstance(state.get("turn"), dict) and "pending" not in state["turn"]:
            output = command.get("output") if isinstance(command, dict) else getattr(command, "output", None)
            state["turn"] = {**state["turn"], "pending": output}
        return {**data, "state": state}

    @property
    def unknown_outcome(self) -> bool:
        """A call of unknown outcome: sent, its answer never received (no answer to apply or replay)."""
        return self.response is not None and self.response.status == UNKNOWN

    def dump(self) -> dict:
        """The entry as the file holds it: fields at their defaults left
        out, but a call entry's seed fields (:data:`SEED_FIELDS`) always
        written; in ``state``, what the entry itself says (status, time,
        number, commit) left out, and the pending message not repeated when
        it is the command's output."""
        skip = {"state", "definition", "pending_is_command_output", "request", "response"}
        data = self.model_dump(mode="json", exclude_defaults=True, exclude=skip)
        if self.request is not None:
            data["workspace_path"] = self.workspace_path or WORKSPACE_PATH
            request = self.request.model_dump(mode="json", exclude_defaults=True, exclude={"files_context", "metadata"})
            meta = self.request.metadata.model_dump(mode="json", exclude_defaults=True)
            full = self.request.metadata.model_dump(mode="json", include=set(SEED_FIELDS["metadata"]))
            full.update(role=self.request.metadata.role or self.role,
                        phase=self.request.metadata.phase or self.state_before)
            request["files_context"] = list(self.request.files_context)
            request["metadata"] = {**{k: full[k] for k in SEED_FIELDS["metadata"]}, **meta}
            data["request"] = request
        if self.response is not None:
            full = self.response.model_dump(mode="json", include=set(SEED_FIELDS["response"]))
            data["response"] = {**{k: full[k] for k in SEED_FIELDS["response"]},
                                **self.response.model_dump(mode="json", exclude_defaults=True)}
        elif self.request is not None:
            data["response"] = None
        if self.definition is not None:
            data["definition"] = self.definition.model_dump(mode="json")
        state = self.state.state_dump()
        for key, value in (("status", self.state_after), ("updated_at", self.timestamp),
                           ("last_sequence", self.sequence), ("workspace_commit", self.workspace_commit)):
            if key in state and state[key] == value:
                del state[key]
            elif key not in state and value is not None:
                state[key] = None  # said, so the read side does not take the entry's
        turn = state.get("turn") or {}
        if self.command is not None and self.command.output is not None and turn.get("pending") == self.command.output:
            del turn["pending"]
            data["pending_is_command_output"] = True
        data["state"] = state
        order = [name for name in type(self).model_fields if name in data]
        return {**{name: data[name] for name in order}, **data}


class JobHistory(StoreModel):
    """The whole file, for readers; appends never build this."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)
    format: int = 4
    """The file's format version."""
    job_id: str
    """The job's id."""
    workspace_path: Optional[str] = None
    """Files written before paths were relative: the absolute workspace path the job was created with. No longer written: the workspace is always the job's ``workspace/`` (``logist job upgrade`` moves it into the ``command.cwd`` of the entries that ran a command)."""
    interactions: list[HistoryEntry]
    """Every entry, oldest first."""
