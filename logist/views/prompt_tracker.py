"""What a reader of a job has already seen, so each view shows every prompt part once.

A prompt repeats the whole conversation so far, and every call of a job
shares one of a few system prompts, so a view that showed each prompt whole
would grow with the square of a turn's length and say the same thing again
and again. Both the transcript and the HTML report therefore show, per
call, only what is new: the system prompt where it first appears (later:
"as in #N"), and the messages added since the call whose conversation it
continues (found by a digest of the conversation that call saw plus its
answer). A command's output that the next prompt repeats is shown once too.

The memory is a few small tables of digests → entry numbers
(:class:`PromptTracker`). The transcript keeps them, bounded by
:data:`MARKER_MEMORY`, in the marker ending the file, so an append needs no
earlier entry; the report is built in one pass and keeps them all.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass, field
from typing import Optional

from ..store.history import HistoryEntry

#: How many system prompts and conversations the transcript's marker
#: remembers. A conversation older than that is shown whole again, which is
#: only longer.
MARKER_MEMORY = 16
#: The "[Call N of MAX]" line ending a user message.
STEP_MARKER = re.compile(r"\n\n\[Call \d+ of \d+\]\Z")



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
        request = entry.request
        system, system_seen_in, continues = None, None, request.continues
        if request.prompt is not None:
            prompt = request.prompt
            system = prompt[0].content if prompt and prompt[0].role == "system" else None
            shown = prompt[1:] if system is not None else list(prompt)
            if system is not None:
                key = _text_digest(system)
                system_seen_in = self.systems.get(key)
                if system_seen_in is None:
                    self.systems[key] = entry.sequence
        else:
            shown = list(request.added or [])
        messages = [{"role": m.role, "content": m.content} for m in shown]
        repeats = [self._repeated_output(m) for m in messages]
        self._remember_output(entry)
        self._trim()
        return PromptView(system, system_seen_in, continues, messages, repeats)

    def _repeated_output(self, message: dict) -> Optional[int]:
        if message["role"] != "user":
            return None
        text = STEP_MARKER.sub("", message["content"])
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
