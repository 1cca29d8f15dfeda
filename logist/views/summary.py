"""A job's summary, computed once: what every view says about a job and its entries.

``job status``, ``job show``, ``job history``, the HTML report and the
transcript's headings all describe the same things: who acted in an entry,
what they did, the one line that says what happened, the states the job
passed through, and how much of each budget is used. Each of those is
defined here and nowhere else, so the views cannot drift apart: a view
only chooses how to lay the summary out (columns, HTML, Markdown).

The summary is plain data (dataclasses) derived from the manifest and the
history entries; nothing here reads or writes a file except
:func:`summarise`, which reads the history (one entry at a time) when it
is not given.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from typing import Iterable, Optional

from ..store.entries import ANSWER_KINDS, CALL_KINDS, CheckResult, HistoryEntry
from ..store.session import JobFiles
from ..store.manifest import JobManifest, Totals
from ..protocol.forms import extract_json_text, loads
from ..terminal import inert


@dataclass
class StepRow:
    """One history entry as a line of a timeline."""

    sequence: int
    timestamp: str
    kind: str
    #: The role whose turn it was (``None`` for entries that name none).
    role: Optional[str]
    #: Who acted: the role for a model call, "person" or "Logist".
    actor: str
    action: str
    state_before: str
    state_after: str
    summary: str
    tokens: Optional[int]
    cost_usd: Optional[float]
    commit: Optional[str]


@dataclass
class StateVisit:
    status: str
    sequence: int
    timestamp: str


@dataclass
class Budget:
    name: str
    used: float
    limit: Optional[float]

    @property
    def fraction(self) -> Optional[float]:
        if not self.limit:
            return None
        return self.used / self.limit


@dataclass
class JobSummary:
    job_id: str
    manifest: JobManifest
    rows: list[StepRow]
    states: list[StateVisit]
    budgets: list[Budget]

    @property
    def cost_known(self) -> bool:
        return cost_known(self.manifest.totals)


# -- One entry -----------------------------------------------------------------------------------


def answer_fields(entry: HistoryEntry) -> dict:
    """The fields of a model's answer as it wrote them ({} when it is not a JSON object)."""
    raw = entry.response.raw_response if entry.response else None
    if not raw or entry.kind not in ANSWER_KINDS:
        return {}
    try:
        data = loads(extract_json_text(raw))  # bounded: an answer nested 100,000 deep is recorded too
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def action_of(entry: HistoryEntry) -> str:
    """One word for what the entry did: the model's action, or the person's."""
    if entry.kind == "check" and entry.checks is not None:
        return "CHECKS_PASSED" if entry.checks.passed else "CHECKS_FAILED"
    if entry.kind == "compaction":
        return "COMPACTED" if entry.response is not None and entry.response.status == "SUCCESS" else "COMPACTION_FAILED"
    if entry.response is not None:
        return (entry.response.actions or [entry.response.status])[0]
    if entry.user_input is not None:
        return entry.user_input.action
    return entry.kind


#: Entries a person's command makes: create, approve, reject, answer, approve-command, skip..., and a rewind (restep, rerun).
PERSON_KINDS = ("user_action", "rewind")


def actor_of(entry: HistoryEntry) -> str:
    """Who acted: the role for a model call (or an answer standing in for
    one), ``person`` for a person's command, or Logist itself (a repair, a
    spent budget). Every table of entries shows this, never the role whose
    turn it was when a person acted."""
    if entry.kind in CALL_KINDS:
        return entry.role or "model"
    if entry.kind in PERSON_KINDS:
        return "person"
    return "Logist"


def entry_summary(entry: HistoryEntry) -> str:
    """What happened in one entry, in one line of prose."""
    if entry.kind == "check" and entry.checks is not None:
        return checks_line(entry.checks.results)
    if entry.response is not None:
        if entry.command is not None:
            label = {"ask": " (held for a person)", "deny": " (refused by the policy)"}.get(entry.command.decision, "")
            if entry.command.decision == "run":
                label = f" (exit {entry.command.exit_code})" if not entry.command.timed_out else " (timed out)"
            return f"$ {inert(entry.command.command, one_line=True)}{label}"
        if entry.response.status != "SUCCESS":
            return entry.response.error or entry.response.status
        if entry.kind == "compaction":
            return "summarised the conversation"
        if entry.response.summary_for_supervisor:
            return entry.response.summary_for_supervisor
        fields = answer_fields(entry)
        for key in ("message", "question", "command"):
            if isinstance(fields.get(key), str):
                return fields[key]
        return ""
    if entry.user_input is not None:
        text = entry.user_input.text or ""
        if entry.command is not None:
            text = f"$ {inert(entry.command.command, one_line=True)} (exit {entry.command.exit_code})"
        return text
    return entry.note or ""


def checks_line(results: list[CheckResult]) -> str:
    """A run of checks in one line: how many passed, and each that did not."""
    passed = sum(1 for r in results if r.passed)
    failed = [f"`{r.command}` {r.ending}" for r in results if not r.passed]
    return f"checks: {passed} of {len(results)} passed" + ("; " + "; ".join(failed) if failed else "")


@dataclass
class CheckStatus:
    """The job's last run of its checks, as approval sees it."""

    sequence: int
    commit: Optional[str]
    passed: bool
    #: The workspace's commit is not the one they ran on (they must run again before approval).
    stale: bool
    results: list[CheckResult]

    def line(self) -> str:
        on = f"on {(self.commit or '')[:12]}, entry {self.sequence}"
        return f"{checks_line(self.results)} ({on}" + ("; the workspace has changed since" if self.stale else "") + ")"

    def as_dict(self) -> dict:
        return {"sequence": self.sequence, "commit": self.commit, "passed": self.passed, "stale": self.stale,
                "results": [{**r.model_dump(mode="json", exclude={"output"}), "passed": r.passed} for r in self.results]}


def check_status(job: JobFiles, manifest: JobManifest, head: Optional[str]) -> Optional[CheckStatus]:
    """The job's last run of its checks (None: they never ran), read from
    its entry; ``head``: the workspace's commit now (None: unknown, so the
    run is not current)."""
    last = manifest.last_check
    if last is None:
        return None
    run = job.entry(last.sequence).checks
    results = run.results if run is not None else []
    return CheckStatus(last.sequence, last.commit, last.passed, head is None or last.commit != head, results)


def tokens_of(entry: HistoryEntry) -> Optional[int]:
    usage = entry.usage
    if usage is None or usage.prompt_tokens is None:
        return None
    return (usage.prompt_tokens or 0) + (usage.completion_tokens or 0)


def step_row(entry: HistoryEntry) -> StepRow:
    return StepRow(
        sequence=entry.sequence,
        timestamp=entry.timestamp,
        kind=entry.kind,
        role=entry.role,
        actor=actor_of(entry),
        action=action_of(entry),
        state_before=entry.state_before,
        state_after=entry.state_after,
        summary=entry_summary(entry),
        tokens=tokens_of(entry),
        cost_usd=entry.usage.cost_usd if entry.usage else None,
        commit=entry.workspace_commit,
    )


def one_line(text: str, limit: int) -> str:
    """``text`` on one line, cut to ``limit`` characters with an ellipsis."""
    flat = " ".join((text or "").split())
    return flat if len(flat) <= limit else flat[: limit - 1] + "…"


# -- The whole job -------------------------------------------------------------------------------


class StateTrail:
    """The states a job entered, in order, each with the entry that entered
    it; taken in one entry at a time. With a ``limit``, only the first and
    the last ``limit // 2`` visits are kept (``omitted`` counts the others,
    which were between them at ``gap``), so a history of any length costs
    the same memory."""

    def __init__(self, limit: Optional[int] = None):
        self.head: list[StateVisit] = []
        self.tail: deque[StateVisit] = deque(maxlen=None if limit is None else limit - limit // 2)
        self.head_size = None if limit is None else limit // 2
        self.omitted = 0
        self.status: Optional[str] = None

    def add(self, sequence: int, timestamp: str, state_before: str, state_after: str) -> None:
        if self.status is None:
            self._visit(StateVisit(state_before, sequence, timestamp))
        if state_after != self.status:
            self._visit(StateVisit(state_after, sequence, timestamp))

    def _visit(self, visit: StateVisit) -> None:
        self.status = visit.status
        if self.head_size is None or len(self.head) < self.head_size:
            self.head.append(visit)
            return
        if self.tail.maxlen is not None and len(self.tail) == self.tail.maxlen:
            self.omitted += 1
        self.tail.append(visit)

    @property
    def visits(self) -> list[StateVisit]:
        return self.head + list(self.tail)

    @property
    def gap(self) -> Optional[int]:
        """Where in :attr:`visits` the omitted ones were (None: none were)."""
        return len(self.head) if self.omitted else None


def states_passed(entries: Iterable[HistoryEntry]) -> list[StateVisit]:
    """Each state the job entered, in order, with the entry that entered it."""
    trail = StateTrail()
    for entry in entries:
        trail.add(entry.sequence, entry.timestamp, entry.state_before, entry.state_after)
    return trail.visits


def budgets(manifest: JobManifest) -> list[Budget]:
    """Each budget: how much is used and its limit (None: no limit)."""
    s, t = manifest.settings, manifest.totals
    return [
        Budget("steps", manifest.calls, s.max_steps),
        Budget("cost_usd", t.cost_usd, s.max_cost_usd),
        Budget("tokens", t.tokens, s.max_tokens),
        Budget("wall_seconds", t.wall_ms / 1000, s.max_wall_seconds),
    ]


def cost_known(totals: Totals) -> bool:
    """False when every call so far had no price: the cost is unknown, not $0."""
    return not totals.llm_calls or totals.unpriced_calls < totals.llm_calls


def summarise(job: JobFiles, entries: Optional[Iterable[HistoryEntry]] = None, manifest: Optional[JobManifest] = None) -> JobSummary:
    """The job's summary: its rows, the states it passed through, budget use.
    The history is read one entry at a time when ``entries`` is not given."""
    manifest = manifest if manifest is not None else job.manifest()
    rows: list[StepRow] = []
    trail = StateTrail()
    for entry in job.entries() if entries is None else entries:
        rows.append(step_row(entry))
        trail.add(entry.sequence, entry.timestamp, entry.state_before, entry.state_after)
    return JobSummary(job_id=job.id, manifest=manifest, rows=rows, states=trail.visits, budgets=budgets(manifest))
