"""One history entry as Markdown: the blocks of the transcript.

Each entry becomes a section a person reads in an editor: a heading naming
who acted and what they did (from :mod:`logist.views.summary`, as every
view names them), the state change, the new part of the prompt (see
:mod:`logist.views.prompt_tracker`), the answer laid out field by field,
what Logist did with it, and a footer with the commit, tokens and cost.

Everything that came from a model, a person or a command is shown verbatim
inside a fence longer than any backtick run in it (:func:`fenced`), or as a
block quote for prose, so no text can break the layout around it.
"""

from __future__ import annotations

import json
import re
from typing import Optional

from ..store.entries import ANSWER_KINDS, CALL_KINDS, FAILED
from ..store.history import HistoryEntry
from .prompt_tracker import STEP_MARKER, PromptTracker, PromptView
from .summary import action_of, actor_of, answer_fields


def fenced(text: str, info: str = "text") -> str:
    """``text`` verbatim in a fence longer than any backtick run inside it."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    fence = "`" * max(3, longest + 1)
    body = text if text.endswith("\n") else text + "\n"
    return f"{fence}{info}\n{body}{fence}\n"


def code(text: str) -> str:
    """An inline code span for a short single-line ``text``."""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def quoted(text: str) -> str:
    """Prose (a summary, a question, a note) as a block quote."""
    lines = (text or "").rstrip("\n").split("\n")
    return "\n".join("> " + line if line else ">" for line in lines) + "\n"


def _tokens(entry: HistoryEntry) -> Optional[str]:
    usage = entry.usage
    if usage is None or usage.prompt_tokens is None:
        return None
    total = (usage.prompt_tokens or 0) + (usage.completion_tokens or 0)
    return f"{total} tokens ({usage.prompt_tokens} in, {usage.completion_tokens or 0} out)"


def _cost(entry: HistoryEntry) -> Optional[str]:
    if entry.usage is None:
        return None
    if entry.usage.cost_usd is None:
        return "cost unknown (no price for the model)"
    return f"${entry.usage.cost_usd:.6f}"


def _heading(entry: HistoryEntry) -> str:
    return f"## #{entry.sequence} · {actor_of(entry)} · {action_of(entry)}\n"


def _state_line(entry: HistoryEntry) -> str:
    change = entry.state_before if entry.state_before == entry.state_after else f"{entry.state_before} → {entry.state_after}"
    return f"{change} · {entry.timestamp}\n"


def _render_prompt(view: PromptView) -> list[str]:
    out: list[str] = []
    if view.system is not None:
        out += ["### System prompt\n", fenced(view.system)]
    if view.continues is not None:
        out.append(f"### Prompt: continues the conversation of #{view.continues}; new\n")
    else:
        count = len(view.messages)
        out.append(f"### Prompt: a new conversation of {count} message{'s' if count != 1 else ''}\n")
    for message, repeated in zip(view.messages, view.repeats_output_of):
        out.append(f"**{message['role']}**\n")
        if repeated is not None:
            marker = STEP_MARKER.search(message["content"])
            tail = f" {code(marker.group(0).strip())}" if marker else ""
            out.append(f"(the command output shown in #{repeated}{', then ' + tail.strip() if tail else ''})\n")
        else:
            out.append(fenced(message["content"]))
    return out


_PROSE_FIELDS = ("summary_for_supervisor", "message", "question", "thought")


def _render_file_change(change) -> list[str]:
    if not isinstance(change, dict) or not isinstance(change.get("path"), str):
        return [f"- {code(json.dumps(change, ensure_ascii=False))}\n"]
    path = code(change["path"])
    if change.get("delete") is True:
        return [f"- delete {path}\n"]
    if isinstance(change.get("content"), str):
        return [f"- write {path}:\n", fenced(change["content"])]
    if isinstance(change.get("old"), str) and isinstance(change.get("new"), str):
        return [f"- in {path} replace:\n", fenced(change["old"]), "with:\n", fenced(change["new"])]
    return [f"- {code(json.dumps(change, ensure_ascii=False))}\n"]


def _render_answer(entry: HistoryEntry) -> list[str]:
    response = entry.response
    assert response is not None
    out = ["### Answer\n"]
    raw = response.raw_response
    if raw is None:
        out.append(f"No answer: {response.error or 'the call failed'}\n")
        return out
    data = answer_fields(entry)
    if not data:
        out.append(fenced(raw))
        return out
    for key, value in data.items():
        if key == "file_changes" and isinstance(value, list):
            out.append(f"- **file_changes**: {len(value)}\n")
            for change in value:
                out += _render_file_change(change)
        elif key in _PROSE_FIELDS and isinstance(value, str):
            out += [f"- **{key}**:\n", quoted(value)]
        elif isinstance(value, str) and "\n" not in value and len(value) <= 160:
            out.append(f"- **{key}**: {code(value)}\n")
        elif isinstance(value, str):
            out += [f"- **{key}**:\n", fenced(value)]
        elif key == "plan" and isinstance(value, list) and all(isinstance(item, str) for item in value):
            out.append("- **plan**:\n" + "".join(f"  {n}. {item}\n" for n, item in enumerate(value, 1)))
        elif isinstance(value, list) and all(isinstance(item, str) for item in value):
            out.append(f"- **{key}**: " + (", ".join(code(item) for item in value) or "(none)") + "\n")
        else:
            out.append(f"- **{key}**: " + code(json.dumps(value, ensure_ascii=False)) + "\n")
    return out


def _render_command(entry: HistoryEntry) -> list[str]:
    command = entry.command
    assert command is not None
    if command.decision == "run":
        how = f"timed out after {command.duration_ms / 1000:g} s" if command.timed_out else f"exit {command.exit_code}"
        out = [f"- Command {code(command.command)} ran ({how}); its output, cleaned as the model is shown it:\n"]
        out.append(fenced(command.output or "(no output)"))
        return out
    if command.decision == "ask":
        return [f"- Command {code(command.command)} is held until a person approves or skips it.\n"]
    return [f"- Command {code(command.command)} was refused: the job's command policy does not allow it.\n"]


def _render_checks(entry: HistoryEntry) -> list[str]:
    """A run of the job's checks: each command, how it ended, the end of its output."""
    out = []
    for result in entry.checks.results:
        out.append(f"- Check {code(result.command)} {result.ending} ({result.duration_ms / 1000:g} s); "
                   "the end of its output:\n")
        out.append(fenced(result.output or "(no output)"))
    return out


def _render_outcome(entry: HistoryEntry) -> list[str]:
    out = ["### What Logist did\n"]
    response = entry.response
    if response is not None and response.status == "INVALID":
        out.append("- The answer was refused, nothing from it was applied:\n")
        out.append(quoted(response.error or ""))
    elif response is not None and response.status == FAILED:
        out.append("- The call failed:\n")
        out.append(quoted(response.error or ""))
    elif response is not None and response.status == "UNKNOWN":
        out.append("- The call's outcome is unknown (the process ended while it was in flight); nothing was applied.\n")
    if response is not None and response.notes:
        out.append("- The answer was read leniently: " + "; ".join(response.notes) + ".\n")
    if response is not None and response.files_changed:
        out.append("- Files changed: " + ", ".join(code(p) for p in response.files_changed) + "\n")
    if entry.command is not None:
        out += _render_command(entry)
    after = entry.state.model_dump(mode="json")
    held = after.get("pending_changes")
    if response is not None and held and entry.state_after == "INPUT_REQUIRED":
        paths = ", ".join(code(str(change.get("path"))) for change in held if isinstance(change, dict))
        out.append(f"- File changes held until a person approves or skips them (the role's policy): {paths}\n")
    question = after.get("question")
    if response is not None and isinstance(question, dict) and entry.state_after == "INPUT_REQUIRED":
        kind = "required" if question.get("required", True) else "optional"
        out.append(f"- Asked a person ({kind}); the job waits for `logist job answer`.\n")
    reason = after.get("reason")
    if entry.state_after == "INTERVENTION_REQUIRED" and reason:
        out.append("- The job needs a person:\n")
        out.append(quoted(reason))
    if len(out) == 1:
        out.append("- Nothing changed in the workspace.\n")
    return out


#: What stood in for the model's call, for entries that applied an answer without one.
_NO_CALL = {"replay": "answer replayed from a recording, no call", "poststep": "answer posted by hand, no call",
            "check": "the job's checks, run by Logist, no call"}


def _footer(entry: HistoryEntry) -> str:
    parts = [f"commit {code(entry.workspace_commit)}" if entry.workspace_commit else "no commit"]
    if entry.kind in _NO_CALL:
        parts.append(_NO_CALL[entry.kind])
    elif entry.request is not None:
        parts.append(f"model {code(entry.request.metadata.model)}")
        parts += [part for part in (_tokens(entry), _cost(entry)) if part]
    if entry.duration_ms:
        parts.append(f"{entry.duration_ms / 1000:g} s")
    return "*" + " · ".join(parts) + "*\n"


_PERSON_LABELS = {
    "create": "Created the job",
    "answer": "Answered the question",
    "skip": "Skipped the question",
    "approve": "Approved the result",
    "reject": "Rejected the result",
    "resubmit": "Resubmitted the job",
    "approve-command": "Approved the held command or file changes",
    "skip-command": "Skipped the held command or file changes",
    "suspend": "Suspended the job",
    "resume": "Resumed the job",
    "cancel": "Canceled the job",
}


def _render_person(entry: HistoryEntry) -> list[str]:
    user_input = entry.user_input
    assert user_input is not None
    label = _PERSON_LABELS.get(user_input.action, f"Did {user_input.action}")
    out = [label + ":\n", quoted(user_input.text)] if user_input.text else [label + ".\n"]
    if entry.command is not None:
        out += _render_command(entry)
    return out


def _render_agent_run(entry: HistoryEntry) -> list[str]:
    """What a coding agent's run did: how it ended, and each model call it made (the files that hold them)."""
    run = entry.agent
    ended = ("was stopped at its timeout" if run.timed_out else "was interrupted" if run.interrupted
             else f"exited {run.exit_code}" if run.exit_code is not None else "ended")
    source = {"exit_file": "; its answer came from its exit file", "final_message": "; its answer came from its "
              "final message", "rule": "; it gave no exit command (its answer follows from its exit code and the "
              "files it changed)"}.get(run.exit_source or "", "")
    out = [f"### Agent run\n\n{code(run.agent)} {ended}{source}; {len(run.calls)} model "
           f"call{'s' if len(run.calls) != 1 else ''} through the gateway.\n"]
    if run.budget_stop:
        out.append(f"Stopped at the gateway: {run.budget_stop}\n")
    for call in run.calls:
        tokens = f", {call.input_tokens or 0} tokens in, {call.output_tokens or 0} out" if call.input_tokens is not None \
            else ""
        out.append(f"- call {call.number}: {call.api}, HTTP {call.status}{tokens}, {code(call.file)}\n")
    return out


def render_entry(entry: HistoryEntry, tracker: PromptTracker) -> str:
    """One entry's Markdown block."""
    out = [_heading(entry), _state_line(entry)]
    view = tracker.view(entry)
    if entry.kind in CALL_KINDS and entry.response is not None:
        if view is not None:
            out += _render_prompt(view)
        out += _render_answer(entry)
        if entry.agent is not None:
            out += _render_agent_run(entry)
        if entry.kind in ANSWER_KINDS:
            out += _render_outcome(entry)
    else:
        if entry.user_input is not None:
            out += _render_person(entry)
        if entry.checks is not None:
            out += _render_checks(entry)
        if entry.note:
            out.append(quoted(entry.note))
    out.append(_footer(entry))
    return _join_blocks(out)


def _join_blocks(blocks: list[str]) -> str:
    """Blocks separated by a blank line (each its own paragraph when
    rendered), except that one-line list items stay together as one list."""
    text = ""
    previous_item = False
    for block in blocks:
        item = block.startswith("- ") and block.count("\n") == 1
        if text:
            text += "" if item and previous_item else "\n"
        text += block
        previous_item = item
    return text


def header(job_id: str, objective: Optional[str]) -> str:
    lines = [
        f"# Transcript of job {code(job_id)}\n",
        "\n",
        "Every entry of the job's history in order, written as it is recorded: who acted, the messages "
        "the model had not seen before, its answer, and what Logist did with it. The source of truth is "
        "`jobHistory.json` beside this file (every request can be rebuilt from it and `response_formats/` exactly "
        "as sent); "
        f"`logist job transcript {job_id} --rebuild` rewrites this file from it.\n",
    ]
    if objective:
        lines += ["\n", "Objective:\n", "\n", quoted(objective)]
    return "".join(lines)
