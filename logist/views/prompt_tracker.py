"""How the views show a call's prompt: only what the reader has not seen.

A history entry already says what is new (:mod:`logist.store.entries`): a
call either sends its prompt in full (``request.prompt``: the first call of
a turn, a summary call, the first call after a compaction) or continues an
earlier entry and holds only the messages it added (``continues`` +
``added``). The views show exactly that: the whole prompt, system prompt
included, where a conversation starts (so once per turn, and each turn
reads on its own), and otherwise "continues #N" and the added messages.

One repetition is left: a command's output is shown in the entry that ran
it (a call, or a person's ``approve-command``), and the next call sends it
back as its user message. :class:`PromptTracker` remembers the outputs of
the last :data:`OUTPUT_WINDOW` entries and shows such a message as "the
command output shown in #N". The rule depends on the entries alone, so the
transcript appended entry by entry (which reads back the few entries the
window needs, :func:`context_start`) is exactly the transcript rebuilt in
one pass, and the memory stays bounded on any history.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Optional

from ..errors import CorruptFileError
from ..store.history import HistoryEntry

#: How many entries back a command output is remembered. An output repeated
#: later than that (rare: a Planner resuming after a long delegated turn) is
#: shown again, which is only longer.
OUTPUT_WINDOW = 32
#: The "[Step N of MAX]" line ending a user message (a job recorded earlier: "[Call N of MAX]").
STEP_MARKER = re.compile(r"\n\n\[(?:Step|Call) \d+ of \d+\]\Z")


@dataclass
class PromptView:
    """How to show one call's prompt to someone who read the entries before."""

    #: The system prompt of a prompt sent in full, or None.
    system: Optional[str]
    #: The call whose conversation (and answer) this prompt continues, or None.
    continues: Optional[int]
    #: The messages to show: the new ones, or all of them after the system prompt.
    messages: list[dict]
    #: For each message, the entry whose command output it repeats (or None).
    repeats_output_of: list[Optional[int]]


def _repeat_candidates(entry: HistoryEntry) -> Optional[int]:
    """The first entry whose command output ``entry``'s prompt may repeat, or
    None when it can repeat none (it sends no user message after an earlier call)."""
    request = entry.request
    if request is None or request.continues is None:
        return None
    if not any(m.role == "user" for m in request.added or []):
        return None
    return max(request.continues, entry.sequence - OUTPUT_WINDOW)


def context_start(entry: HistoryEntry) -> int:
    """The first entry a tracker must have seen to view ``entry`` (``entry``
    itself when it needs none before it)."""
    start = _repeat_candidates(entry)
    return entry.sequence if start is None else min(start, entry.sequence)


@dataclass
class PromptTracker:
    """Command outputs of the last :data:`OUTPUT_WINDOW` entries, by entry number."""

    outputs: dict[int, str] = field(default_factory=dict)

    def remember(self, entry: HistoryEntry) -> None:
        """Take in an entry the reader has seen (without viewing it)."""
        if entry.command is not None and entry.command.output:
            self.outputs[entry.sequence] = entry.command.output
        oldest = entry.sequence - OUTPUT_WINDOW
        for sequence in [s for s in self.outputs if s < oldest]:
            del self.outputs[sequence]

    def view(self, entry: HistoryEntry) -> Optional[PromptView]:
        """The view of ``entry``'s prompt (None: it has none); then remember it."""
        request = entry.request
        if request is None:
            self.remember(entry)
            return None
        if request.prompt is not None:
            prompt = request.prompt
            system = prompt[0].content if prompt and prompt[0].role == "system" else None
            shown = prompt[1:] if system is not None else list(prompt)
        else:
            system, shown = None, list(request.added or [])
        start = _repeat_candidates(entry)
        messages, repeats = [], []
        for m in shown:
            if m.content is None:  # recorded by reference to the entry that ran the command
                if m.output_of not in self.outputs:
                    raise CorruptFileError(f"history entry {m.output_of} has no command output to repeat")
                messages.append({"role": m.role, "content": m.prefix + self.outputs[m.output_of] + m.suffix})
                repeats.append(m.output_of)
            else:
                messages.append({"role": m.role, "content": m.content})
                repeats.append(self._repeated_output(messages[-1], start, entry.sequence))
        self.remember(entry)
        return PromptView(system, request.continues, messages, repeats)

    def _repeated_output(self, message: dict, start: Optional[int], before: int) -> Optional[int]:
        if start is None or message["role"] != "user":
            return None
        text = STEP_MARKER.sub("", message["content"])
        found = [s for s, output in self.outputs.items() if start <= s < before and output == text]
        return max(found) if found else None
