"""Applying recorded answers: ``job poststep --from-history`` and ``job replay``.

Every entry of a recorded history is re-applied through the same code as a
live step (:func:`logist.step.post_answer`) or a person's command
(:func:`logist.actions.user_action`), so a replayed job goes through the
same states and leaves the same workspace as the recorded one.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Optional

from pydantic import ValidationError

from .actions import user_action
from .errors import ConfigError, CorruptFileError, LogistError
from .history import HistoryEntry, JobHistory
from .jobsdir import Job
from .step import StepResult, post_answer

REPLAYED_USER_ACTIONS = (
    "approve", "reject", "resubmit", "answer", "skip", "suspend", "resume", "cancel", "approve-command", "skip-command",
)


def read_history_file(path: Path) -> JobHistory:
    try:
        return JobHistory.model_validate(json.loads(Path(path).read_text(encoding="utf-8")))
    except FileNotFoundError:
        raise ConfigError(f"no history file {path}") from None
    except (ValueError, ValidationError) as exc:
        first = str(exc).strip().splitlines()[0]
        raise CorruptFileError(f"{path} is not a readable jobHistory.json: {first}") from None


def entry_by_sequence(history: JobHistory, sequence: int) -> HistoryEntry:
    for entry in history.interactions:
        if entry.sequence == sequence:
            return entry
    raise ConfigError(f"the history has no entry with sequence {sequence}")


def post_recorded(job: Job, entry: HistoryEntry, lock_timeout: float = 0) -> StepResult:
    """Apply one recorded LLM answer (or recorded call failure)."""
    if entry.kind != "llm_call" or entry.response is None:
        raise ConfigError(f"entry {entry.sequence} is a {entry.kind}, not an LLM call")
    usage = entry.usage
    return post_answer(
        job,
        entry.response.raw_response,
        error=entry.response.error if entry.response.status == "ERROR" else None,
        prompt_tokens=usage.prompt_tokens if usage else None,
        completion_tokens=usage.completion_tokens if usage else None,
        model=entry.request.metadata.model if entry.request else None,
        lock_timeout=lock_timeout,
    )


def replay_history(
    job: Job,
    history: JobHistory,
    *,
    on_entry: Optional[Callable[[HistoryEntry, object], None]] = None,
    lock_timeout: float = 0,
) -> int:
    """Re-apply every recorded answer and person's action in order.

    The creation entry and Logist's own recovery notes are skipped. Returns
    the number of entries applied; stops at the first one the job refuses.
    """
    applied = 0
    for entry in history.interactions:
        if entry.kind == "llm_call":
            result = post_recorded(job, entry, lock_timeout)
        elif entry.kind == "user_action" and entry.user_input and entry.user_input.action in REPLAYED_USER_ACTIONS:
            action = entry.user_input.action
            result = user_action(
                job, "answer" if action == "skip" else action, entry.user_input.text,
                skip=action == "skip", lock_timeout=lock_timeout,
            )
        else:
            continue
        applied += 1
        if on_entry:
            on_entry(entry, result)
    if applied == 0:
        raise LogistError("the history has no recorded answers to replay")
    return applied
