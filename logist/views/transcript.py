"""``transcript.md``: the job's history as a person reads it in an editor.

``jobHistory.json`` is the source of truth, but it is JSON: every prompt and
answer sits in one line with its newlines escaped. The transcript says the
same things in Markdown, entry by entry in order: who acted, the messages
the model saw that it had not seen before, its answer, what Logist did with
it (files changed, command run and its output, question asked), the commit,
tokens and cost. No code ever reads it back except to append to it.

One file per job, not one per step: a person reads a job from top to bottom,
and a file browser with thousands of step files in a job folder is worse
than one long file an editor opens and searches. It is appended to as each
history entry is recorded (:func:`append_entry`, called by
:func:`logist.store.recovery.record`), so the cost of a step does not grow with the
job: nothing earlier is read except the last few hundred bytes.

Repetition is what makes a raw history unreadable (each prompt repeats the
whole conversation so far), so the transcript shows each thing once: a
system prompt the first time it is used (later: "as in #N"), and of each
prompt only the messages that are new since the call whose conversation it
continues. That needs a little memory from one append to the next; it is
kept in a Markdown comment ending each entry (the *marker*), invisible when
the file is rendered. A file that does not end in the marker of the entry
just before the one being appended (missing, cut by a crash, edited, or an
entry recorded by crash recovery without going through the journal) is
rebuilt whole from the history instead: it is derived data, so that is
always safe. :func:`rebuild` does the same on demand
(``logist job transcript JOB --rebuild``).
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Optional

from ..store.atomic import atomic_write
from ..store.history import HistoryEntry, load_history

TRANSCRIPT_NAME = "transcript.md"
MARKER_PREFIX = "<!-- logist-transcript "
MARKER_SUFFIX = " -->\n"
#: How many system prompts and conversations the marker remembers. A
#: conversation older than that is shown whole again, which is only longer.
MARKER_MEMORY = 16
_STEP_MARKER = re.compile(r"\n\n\[Step \d+ of \d+\]\Z")

log = logging.getLogger("logist")


def transcript_path(job_dir: Path) -> Path:
    return Path(job_dir) / TRANSCRIPT_NAME


# -- What the reader has seen --------------------------------------------------------------------


def _feed(digest, role: str, content: str) -> None:
    digest.update(role.encode("utf-8") + b"\0" + content.encode("utf-8", errors="surrogatepass") + b"\1")


def _hex(digest) -> str:
    return digest.hexdigest()[:16]


def _text_digest(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8", errors="surrogatepass")).hexdigest()[:16]


@dataclass
class PromptView:
    """How to show one call's prompt to someone who read the entries before."""

    #: The system prompt, or None when the call had none.
    system: Optional[str]
    #: The entry that showed this system prompt first, or None: show it now.
    system_seen_in: Optional[int]
    #: The call whose conversation (and answer) this prompt continues, or None.
    continues: Optional[int]
    #: The messages to show: the new ones, or all of them after the system prompt.
    messages: list[dict]
    #: For each message, the entry whose command output it repeats (or None).
    repeats_output_of: list[Optional[int]]


@dataclass
class PromptTracker:
    """Remembers, by digest, the system prompts and conversations already shown.

    ``limit`` bounds the memory (the transcript's marker); None keeps all
    (the HTML report, built in one pass).
    """

    limit: Optional[int] = MARKER_MEMORY
    systems: dict[str, int] = field(default_factory=dict)
    contexts: dict[str, int] = field(default_factory=dict)
    outputs: dict[str, int] = field(default_factory=dict)

    def view(self, entry: HistoryEntry) -> Optional[PromptView]:
        """The view of ``entry``'s prompt, and remember what it shows."""
        if entry.request is None:
            self._remember_output(entry)
            return None
        prompt = entry.request.prompt
        system = prompt[0].content if prompt and prompt[0].role == "system" else None
        conversation = prompt[1:] if system is not None else list(prompt)
        system_seen_in = None
        if system is not None:
            key = _text_digest(system)
            system_seen_in = self.systems.get(key)
            if system_seen_in is None:
                self.systems[key] = entry.sequence
        digest = hashlib.sha1()
        for message in conversation[:-1]:
            _feed(digest, message.role, message.content)
        continues = self.contexts.get(_hex(digest)) if len(conversation) > 1 else None
        shown = conversation[-1:] if continues is not None else conversation
        messages = [{"role": m.role, "content": m.content} for m in shown]
        repeats = [self._repeated_output(m) for m in messages]
        raw = entry.response.raw_response if entry.response else None
        if conversation and raw is not None:
            _feed(digest, conversation[-1].role, conversation[-1].content)
            _feed(digest, "assistant", raw)
            self.contexts[_hex(digest)] = entry.sequence
        self._remember_output(entry)
        self._trim()
        return PromptView(system, system_seen_in, continues, messages, repeats)

    def _repeated_output(self, message: dict) -> Optional[int]:
        if message["role"] != "user":
            return None
        text = _STEP_MARKER.sub("", message["content"])
        return self.outputs.get(_text_digest(text))

    def _remember_output(self, entry: HistoryEntry) -> None:
        if entry.command is not None and entry.command.output:
            self.outputs[_text_digest(entry.command.output)] = entry.sequence
            self._trim()

    def _trim(self) -> None:
        if self.limit is None:
            return
        for table in (self.systems, self.contexts, self.outputs):
            while len(table) > self.limit:
                del table[min(table, key=table.__getitem__)]

    def state(self, sequence: int) -> dict:
        return {"seq": sequence, "systems": self.systems, "contexts": self.contexts, "outputs": self.outputs}

    @classmethod
    def from_state(cls, state: dict) -> "PromptTracker":
        return cls(
            systems=dict(state.get("systems") or {}),
            contexts=dict(state.get("contexts") or {}),
            outputs=dict(state.get("outputs") or {}),
        )


# -- Markdown ------------------------------------------------------------------------------------


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


def action_of(entry: HistoryEntry) -> str:
    """One word for what the entry did: the model's action, or the person's."""
    if entry.kind == "compaction":
        return "COMPACTED" if entry.response is not None and entry.response.status == "SUCCESS" else "COMPACTION_FAILED"
    if entry.response is not None:
        return (entry.response.actions or [entry.response.status])[0]
    if entry.user_input is not None:
        return entry.user_input.action
    return entry.kind


def actor_of(entry: HistoryEntry) -> str:
    if entry.kind in ("llm_call", "compaction"):
        return entry.role or "model"
    if entry.kind == "user_action":
        return "person"
    return "Logist"


def _heading(entry: HistoryEntry) -> str:
    return f"## #{entry.sequence} · {actor_of(entry)} · {action_of(entry)}\n"


def _state_line(entry: HistoryEntry) -> str:
    change = entry.state_before if entry.state_before == entry.state_after else f"{entry.state_before} → {entry.state_after}"
    return f"{change} · {entry.timestamp}\n"


def _render_prompt(view: PromptView) -> list[str]:
    out: list[str] = []
    if view.system is not None:
        if view.system_seen_in is None:
            out += ["### System prompt\n", fenced(view.system)]
        else:
            out.append(f"System prompt: as in #{view.system_seen_in}.\n")
    if view.continues is not None:
        out.append(f"### Prompt: continues the conversation of #{view.continues}; new\n")
    else:
        count = len(view.messages)
        out.append(f"### Prompt: a new conversation of {count} message{'s' if count != 1 else ''}\n")
    for message, repeated in zip(view.messages, view.repeats_output_of):
        out.append(f"**{message['role']}**\n")
        if repeated is not None:
            marker = _STEP_MARKER.search(message["content"])
            tail = f" {code(marker.group(0).strip())}" if marker else ""
            out.append(f"(the command output shown in #{repeated}{', then ' + tail.strip() if tail else ''})\n")
        else:
            out.append(fenced(message["content"]))
    return out


def _parsed_answer(raw: str) -> Optional[dict]:
    from ..protocol import extract_json_text

    try:
        data = json.loads(extract_json_text(raw))
    except ValueError:
        return None
    return data if isinstance(data, dict) else None


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
    data = _parsed_answer(raw) if entry.kind == "llm_call" else None
    if data is None:
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
        how = f"timed out after {command.duration_seconds:g} s" if command.timed_out else f"exit {command.exit_code}"
        out = [f"- Command {code(command.command)} ran ({how}); its output, cleaned as the model is shown it:\n"]
        out.append(fenced(command.output or "(no output)"))
        return out
    if command.decision == "ask":
        return [f"- Command {code(command.command)} is held until a person approves or skips it.\n"]
    return [f"- Command {code(command.command)} was refused: the job's command policy does not allow it.\n"]


def _render_outcome(entry: HistoryEntry) -> list[str]:
    out = ["### What Logist did\n"]
    response = entry.response
    if response is not None and response.status == "INVALID":
        out.append("- The answer was refused, nothing from it was applied:\n")
        out.append(quoted(response.error or ""))
    elif response is not None and response.status == "ERROR":
        out.append("- The call failed:\n")
        out.append(quoted(response.error or ""))
    if response is not None and response.files_changed:
        out.append("- Files changed: " + ", ".join(code(p) for p in response.files_changed) + "\n")
    if entry.command is not None:
        out += _render_command(entry)
    after = entry.manifest_after or {}
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


def _footer(entry: HistoryEntry) -> str:
    parts = [f"commit {code(entry.workspace_commit)}" if entry.workspace_commit else "no commit"]
    if entry.request is not None:
        parts.append(f"model {code(entry.request.metadata.model)}")
    for part in (_tokens(entry), _cost(entry)):
        if part:
            parts.append(part)
    if entry.duration_seconds:
        parts.append(f"{entry.duration_seconds:g} s")
    return "*" + " · ".join(parts) + "*\n"


_PERSON_LABELS = {
    "create": "Created the job",
    "answer": "Answered the question",
    "skip": "Skipped the question",
    "approve": "Approved the result",
    "reject": "Rejected the result",
    "resubmit": "Resubmitted the job",
    "approve-command": "Approved the held command",
    "skip-command": "Skipped the held command",
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


def render_entry(entry: HistoryEntry, tracker: PromptTracker) -> str:
    """One entry's Markdown block, without its marker."""
    out = [_heading(entry), _state_line(entry)]
    if entry.kind in ("llm_call", "compaction") and entry.response is not None:
        view = tracker.view(entry)
        if view is not None:
            out += _render_prompt(view)
        out += _render_answer(entry)
        if entry.kind == "llm_call":
            out += _render_outcome(entry)
    else:
        tracker.view(entry)
        if entry.user_input is not None:
            out += _render_person(entry)
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


def _marker(tracker: PromptTracker, sequence: int) -> str:
    return MARKER_PREFIX + json.dumps(tracker.state(sequence), separators=(",", ":")) + MARKER_SUFFIX


def header(job_id: str, objective: Optional[str]) -> str:
    lines = [
        f"# Transcript of job {code(job_id)}\n",
        "\n",
        "Every entry of the job's history in order, written as it is recorded: who acted, the messages "
        "the model had not seen before, its answer, and what Logist did with it. The source of truth is "
        "`jobHistory.json` beside this file (every prompt exactly as sent); "
        f"`logist job transcript {job_id} --rebuild` rewrites this file from it.\n",
    ]
    if objective:
        lines += ["\n", "Objective:\n", "\n", quoted(objective)]
    return "".join(lines)


def render(entries: Iterable[HistoryEntry], job_id: str) -> str:
    """The whole transcript of ``entries``."""
    tracker = PromptTracker()
    parts: list[str] = []
    first = True
    last_sequence = 0
    for entry in entries:
        if first:
            parts.append(header(job_id, (entry.manifest_after or {}).get("objective")))
            first = False
        parts += ["\n", render_entry(entry, tracker), "\n", _marker(tracker, entry.sequence)]
        last_sequence = entry.sequence
    if first:
        parts.append(header(job_id, None) + "\n" + _marker(tracker, last_sequence))
    return "".join(parts)


# -- On disk -------------------------------------------------------------------------------------


def read_marker(path: Path) -> Optional[dict]:
    """The marker ending the file, or None when the file does not end in one."""
    try:
        with open(path, "rb") as handle:
            size = handle.seek(0, os.SEEK_END)
            start = max(0, size - 8192)
            handle.seek(start)
            tail = handle.read().decode("utf-8", errors="replace")
    except FileNotFoundError:
        return None
    if not tail.endswith(MARKER_SUFFIX):
        return None
    at = tail.rfind(MARKER_PREFIX)
    if at < 0:
        return None
    try:
        state = json.loads(tail[at + len(MARKER_PREFIX) : -len(MARKER_SUFFIX)])
    except ValueError:
        return None
    return state if isinstance(state, dict) and isinstance(state.get("seq"), int) else None


def rebuild(job_dir: Path) -> Path:
    """Write the transcript afresh from ``jobHistory.json``; returns its path.

    Call with the job's lock held, or on a job nothing else changes.
    """
    history = load_history(job_dir)
    path = transcript_path(job_dir)
    # errors="replace": a lone surrogate from a model must not make every
    # later step retry (and pay for) a rebuild.
    atomic_write(path, render(history.interactions, history.job_id).encode("utf-8", errors="replace"))
    return path


def append_entry(job_dir: Path, entry: HistoryEntry) -> None:
    """Add ``entry`` (just recorded in the history) to the transcript.

    Costs the size of the entry; rebuilds the whole file instead when it
    does not end right before ``entry`` (see the module docstring).
    """
    path = transcript_path(job_dir)
    if path.exists() and not path.is_file():
        raise OSError(f"{path} is not a file")  # before paying for a rebuild that cannot be written
    state = read_marker(path)
    if state is None or state["seq"] != entry.sequence - 1:
        if state is not None and state["seq"] == entry.sequence:
            return  # already there
        rebuild(job_dir)
        return
    tracker = PromptTracker.from_state(state)
    block = "\n" + render_entry(entry, tracker) + "\n" + _marker(tracker, entry.sequence)
    with open(path, "a", encoding="utf-8", errors="replace") as handle:
        handle.write(block)


def append_safely(job_dir: Path, entry: HistoryEntry) -> None:
    """:func:`append_entry`, but a failure only logs a warning: the
    transcript is derived data and must never fail or undo a step."""
    try:
        append_entry(job_dir, entry)
    except Exception as exc:  # noqa: BLE001 - anything at all: the step is already recorded
        log.warning(
            "could not update %s (%s: %s); the job is fine, and 'logist job transcript --rebuild' rewrites it",
            transcript_path(job_dir), type(exc).__name__, exc,
        )


def is_current(job_dir: Path, last_sequence: int) -> bool:
    """Whether the transcript ends with entry ``last_sequence``."""
    state = read_marker(transcript_path(job_dir))
    return state is not None and state["seq"] == last_sequence
