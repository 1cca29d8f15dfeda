"""Applying recorded answers: ``job poststep --from-history`` and ``job replay``.

Every entry of a recorded history is re-applied through the same code as a
live step (:func:`logist.engine.step.post_answer`) or a person's command
(:func:`logist.engine.decide.user_action`), so a replayed job goes through the
same states and leaves the same workspace as the recorded one.

:func:`replay_history` can also replay live: each recorded call is made
again, as a real step against an endpoint (normally a
:class:`logist.replay.server.ReplayLLMServer` serving the same history),
with the recorded person's actions applied in between. That checks the
prompts too: a strict replay server refuses a request that differs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Optional

from pydantic import ValidationError

from ..engine.checks import replay_check
from ..engine.decide import user_action
from ..errors import ConfigError, CorruptFileError, LogistError
from ..store.entries import CALL_KINDS, FAILED
from ..store.history import HistoryEntry, JobHistory
from ..store.session import JobFiles
from ..engine.apply import StepResult
from ..engine.prepare import Recorded
from ..engine.step import post_answer, step_once

from ..engine.workflow import PERSON, TABLE
from ..store.upgrade import upgrade_history_data

#: A person's recorded actions that replay re-applies: every event of the
#: workflow table a person makes, but the job's creation (the replay's job
#: is created on its own).
REPLAYED_USER_ACTIONS = frozenset(r.event.name for r in TABLE if PERSON in r.who) - {"create"}


def read_history_file(path: Path) -> JobHistory:
    """A jobHistory.json of any format (an older one upgraded in memory)."""
    try:
        return JobHistory.model_validate(upgrade_history_data(json.loads(Path(path).read_text(encoding="utf-8"))))
    except FileNotFoundError:
        raise ConfigError(f"no history file {path}") from None
    except (ValueError, ValidationError, KeyError, TypeError) as exc:
        first = str(exc).strip().splitlines()[0]
        raise CorruptFileError(f"{path} is not a readable jobHistory.json: {first}") from None


def entry_by_sequence(history: JobHistory, sequence: int) -> HistoryEntry:
    for entry in history.interactions:
        if entry.sequence == sequence:
            return entry
    raise ConfigError(f"the history has no entry with sequence {sequence}")


def post_recorded(job: JobFiles, entry: HistoryEntry, lock_timeout: float = 0) -> StepResult:
    """Apply one recorded LLM answer (or recorded call failure); it is
    recorded as a ``replay`` entry, counted apart from real calls."""
    if entry.kind == "check" and entry.checks is not None:
        return replay_check(job, entry.checks, lock_timeout)
    if entry.kind not in CALL_KINDS or entry.response is None:
        raise ConfigError(f"entry {entry.sequence} is a {entry.kind}, not an LLM call")
    usage = entry.usage
    return post_answer(
        job,
        entry.response.raw_response,
        error=entry.response.error if entry.response.status == FAILED else None,
        prompt_tokens=usage.prompt_tokens if usage else None,
        completion_tokens=usage.completion_tokens if usage else None,
        model=entry.request.metadata.model if entry.request else None,
        lock_timeout=lock_timeout,
        summary=entry.kind == "compaction",
        replayed=True,
        fault=entry.response.fault,
        finish_reason=entry.response.finish_reason,
        agent=entry.agent,
        recorded=Recorded.of(entry.request.metadata if entry.request else None),
    )


class ReplayDivergedError(LogistError):
    """A live replay's step ended in another state than the recorded one."""


def step_recorded(job: JobFiles, entry: HistoryEntry, base_url: str, lock_timeout: float = 0) -> StepResult:
    """Make a recorded call again, live, against ``base_url`` with the model
    it was made with and what else its machine chose of its request (the
    context window, the structured_output form: :class:`~logist.engine.prepare.Recorded`); raise :class:`ReplayDivergedError` if the step ends in
    another state than the recorded one."""
    if entry.request is None or entry.response is None:
        raise ConfigError(f"entry {entry.sequence} is a {entry.kind}, not an LLM call")
    result = step_once(job, base_url=base_url, model=entry.request.metadata.model, lock_timeout=lock_timeout,
                       recorded=Recorded.of(entry.request.metadata))
    if str(result.status) != entry.state_after:
        why = f": {result.error}" if result.error else ""
        raise ReplayDivergedError(
            f"the replay diverged at history entry {entry.sequence}: the recorded step went to {entry.state_after}, "
            f"this one to {result.status}{why}"
        )
    return result


def agent_runs_refused(history: JobHistory) -> Optional[str]:
    """Why a live replay cannot make ``history``'s calls again (a coding
    agent ran one of its steps), in one line naming what to do instead; None
    when it can."""
    runs = [entry for entry in history.interactions if entry.kind in CALL_KINDS and entry.agent is not None]
    if not runs:
        return None
    first = runs[0]
    return (f"history entry {first.sequence} is a run of the coding agent '{first.agent.agent}', which a live replay "
            "cannot make again: the agent's calls are its own requests (its prompt, tools, ids and dates), which no "
            "recording can be matched to; replay without a model instead (logist job replay JOB --history FILE, or "
            "Job.replay(history) without base_url), which applies each run's recorded patch and exit command")


def replay_history(
    job: JobFiles,
    history: JobHistory,
    *,
    base_url: Optional[str] = None,
    on_entry: Optional[Callable[[HistoryEntry, object], None]] = None,
    lock_timeout: float = 0,
) -> int:
    """Re-apply every recorded answer and person's action in order.

    With ``base_url``, each recorded call is made again as a live step
    against that endpoint instead (see the module docstring); a step that
    ends in another state than the recorded one stops the replay with
    :class:`ReplayDivergedError`, and a history with a coding agent's run is
    refused (:func:`agent_runs_refused`) before anything is applied.

    The creation entry, Logist's own recovery notes and calls of unknown
    outcome (no answer was recorded: the call made again after one is the
    step) are skipped. Returns
    the number of entries applied; stops at the first one the job refuses.
    """
    refused = agent_runs_refused(history) if base_url is not None else None
    if refused:
        raise ConfigError(refused)
    applied = 0
    for entry in history.interactions:
        if entry.unknown_outcome:
            continue
        if entry.kind in CALL_KINDS and base_url is not None:
            result = step_recorded(job, entry, base_url, lock_timeout)
        elif entry.kind in CALL_KINDS:
            result = post_recorded(job, entry, lock_timeout)
        elif entry.kind == "check" and entry.checks is not None:  # the recorded outcome; nothing is run
            result = replay_check(job, entry.checks, lock_timeout)
        elif entry.kind == "user_action" and entry.user_input and entry.user_input.action in REPLAYED_USER_ACTIONS:
            action = entry.user_input.action
            result = user_action(
                job, "answer" if action == "skip" else action, entry.user_input.text,
                skip=action == "skip", lock_timeout=lock_timeout, despite_checks=entry.user_input.despite_checks,
            )
        else:
            continue
        applied += 1
        if on_entry:
            on_entry(entry, result)
    if applied == 0:
        raise LogistError("the history has no recorded answers to replay")
    return applied
