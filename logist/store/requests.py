"""Rebuilding requests and conversations from the history.

A call entry records its request in full (``prompt``) or as the entry it
continues plus the messages it added (:mod:`logist.store.entries`). The
exact messages of entry N are therefore: follow ``continues`` back to an
entry with a ``prompt``, then, forwards again, each continued entry's
answer (as the assistant message) and the next entry's ``added`` (where a
command's output, the next message the model is sent, is named by the entry
that ran it: ``output_of``).

It also reads back what the person said (:func:`person_inputs`): the
entries a manifest's ``person_inputs`` names, each parsed alone.

The functions here work on parsed entries (``{sequence: entry dict}``), so
the same code serves a job's file (read from the end, only as far back as
needed) and a history held in memory (a fixture, a replay server).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Callable, Optional

from ..errors import CorruptFileError
from .manifest import Turn
from .response_formats import sent
from .seek import entries_since, file_mark, read_entries, still_holds

Entries = dict[int, dict]

#: How far back a step looks for a call whose usage the endpoint reported, to
#: calibrate its request's estimated size (:func:`logist.engine.context.calibration`,
#: each step whose answer came without usage); so a session keeps that many
#: entries behind the conversation it rebuilt, and a step reads only what was appended.
LOOKBACK = 20


def _answer(entry: dict) -> dict:
    return {"role": "assistant", "content": (entry.get("response") or {}).get("raw_response") or ""}


def added_messages(request: dict, output: Callable[[int], Optional[str]]) -> list[dict]:
    """A continuing request's ``added`` messages with their text: a message
    recorded by reference (``output_of``) is its ``prefix``, that entry's
    command output (``output(n)``), then its ``suffix``."""
    messages = []
    for message in request.get("added") or []:
        if "output_of" in message and message.get("content") is None:
            text = output(message["output_of"])
            if text is None:
                raise CorruptFileError(f"history entry {message['output_of']} has no command output to repeat")
            message = {"role": message["role"], "content": message.get("prefix", "") + text + message.get("suffix", "")}
        messages.append(message)
    return messages


def _output_in(entries: Entries, fetch: Optional[Callable[[int], Entries]]) -> Callable[[int], Optional[str]]:
    return lambda n: (_get(entries, n, fetch).get("command") or {}).get("output")


def messages_of(entries: Entries, sequence: int, fetch: Optional[Callable[[int], Entries]] = None) -> list[dict]:
    """The exact ``messages`` sent by call entry ``sequence`` (the message
    dicts are those of ``entries``, shared: do not change them).

    ``fetch(n)`` returns entries from number n on, for when ``entries`` does
    not reach back far enough.
    """
    chain: list[dict] = []
    current = _get(entries, sequence, fetch)
    seen = set()
    while True:
        request = current.get("request")
        if not request:
            raise CorruptFileError(f"history entry {current.get('sequence')} has no request")
        if request.get("prompt") is not None:
            break
        previous = request.get("continues")
        if previous is None or previous in seen or previous >= current.get("sequence", 0):
            raise CorruptFileError(f"history entry {current.get('sequence')} continues no earlier entry")
        seen.add(previous)
        chain.append(current)
        current = _get(entries, previous, fetch)
    messages = list(current["request"]["prompt"])
    for entry in reversed(chain):
        messages.append(_answer(_get(entries, entry["request"]["continues"], fetch)))
        messages.extend(added_messages(entry["request"], _output_in(entries, fetch)))
    return messages


def _get(entries: Entries, sequence: int, fetch: Optional[Callable[[int], Entries]]) -> dict:
    if sequence not in entries and fetch is not None:
        entries.update(fetch(sequence))
    if sequence not in entries:
        raise CorruptFileError(f"the history has no entry {sequence}")
    return entries[sequence]


def request_body(
    model: str,
    messages: list[dict],
    temperature: Optional[float] = None,
    max_tokens: Optional[int] = None,
    response_format: Optional[dict] = None,
    stream: Optional[bool] = None,
) -> dict:
    """A Chat Completions body, the one way Logist builds it (a step's, and
    a recorded one rebuilt): parameters that are not set are left out, so
    the endpoint applies its own defaults. ``stream`` asks for the answer
    as a stream that ends with the usage."""
    body: dict = {"model": model, "messages": messages}
    for key, value in (("temperature", temperature), ("max_tokens", max_tokens), ("response_format", response_format)):
        if value is not None:
            body[key] = value
    if stream:
        body["stream"] = True
        body["stream_options"] = {"include_usage": True}
    return body


def recorded_body(files: "JobFiles", entry: dict, messages: list[dict]) -> dict:
    """The body call entry ``entry`` of the job in ``files`` sent, from its
    rebuilt ``messages`` and its metadata (its response_format read from the
    file it is kept in: :mod:`logist.store.response_formats`)."""
    meta = entry["request"]["metadata"]
    return request_body(meta["model"], messages, meta.get("temperature"), meta.get("max_tokens"),
                        sent(files, meta.get("response_format")), meta.get("stream"))


class HistoryReader:
    """Entries of one job's history, read from the end of the file as far
    back as a question needs, and kept for the next question. Read through
    a session (:class:`~logist.store.session.JobSession`), the entries read
    and the last conversation rebuilt are kept there for the next step, so a round of a long turn costs its new messages, not
    the turn; they are dropped when the file no longer holds what they were
    read from (:func:`logist.store.seek.still_holds`)."""

    def __init__(self, files: "JobFiles"):
        self.files = files
        #: The session that keeps what was read between steps (None: a lock-free reader's).
        self.session = files.reads_kept()
        session = self.session
        if session is None:
            self.entries: Entries = {}
            return
        now = file_mark(self.files)
        if not still_holds(self.files, session.mark, now):
            session.forget()
        session.mark = now
        self.entries = session.entries_read

    def fetch(self, sequence: int) -> Entries:
        if self.entries and sequence > max(self.entries):
            return entries_since(self.files, max(self.entries) + 1)  # what was appended since
        # Read back at least twice as far as last time, so a long chain of
        # small steps back costs a few reads, not one per entry.
        known = min(self.entries) if self.entries else None
        start = sequence if known is None else max(1, min(sequence, known - 2 * (max(self.entries) - known + 1)))
        return entries_since(self.files, start)

    def _continues_kept(self, sequence: int) -> bool:
        """Whether the conversation kept is call ``sequence``'s or the one it continues."""
        kept = self.session.conversation if self.session is not None else None
        if kept is None:
            return False
        return kept[0] == sequence or (self.entry(sequence).get("request") or {}).get("continues") == kept[0]

    def messages(self, sequence: int) -> list[dict]:
        """The exact messages call entry ``sequence`` sent (a new list; the messages are shared)."""
        kept = self.session.conversation if self.session is not None else None
        entry = self.entry(sequence)
        request = entry.get("request") or {}
        if kept and kept[0] == sequence:
            return list(kept[1])
        if kept and request.get("prompt") is None and request.get("continues") == kept[0]:
            messages = kept[1] + [_answer(self.entry(kept[0]))] + added_messages(request, _output_in(self.entries, self.fetch))
        else:
            messages = messages_of(self.entries, sequence, self.fetch)
        if self.session is not None and (kept is None or sequence >= kept[0]):
            self.session.conversation = (sequence, messages)
            # The tail a later round needs: the entries the next step reads again (its calibration: LOOKBACK).
            for number in [n for n in self.entries if n < sequence - LOOKBACK]:
                del self.entries[number]
        return list(messages)

    def entry(self, sequence: int) -> dict:
        return _get(self.entries, sequence, self.fetch)

    def conversation(self, turn: Turn) -> list[dict]:
        """The turn's conversation as the model saw it: the last round's
        request and its answer ([] before the turn's first round)."""
        if turn.last_call is None:
            return []
        if turn.prompt_call is not None and turn.prompt_call not in self.entries \
                and not self._continues_kept(turn.last_call):
            self.entries.update(self.fetch(turn.prompt_call))
        return self.messages(turn.last_call) + [_answer(self.entry(turn.last_call))]

    def person_inputs(self, sequences: list[int]) -> list[PersonInput]:
        """What the person said in entries ``sequences`` (see :func:`person_inputs`)."""
        return person_inputs(self.files, sequences, self.entries)

    def opening(self, turn: Turn) -> Optional[str]:
        """The first user message of the turn (its first call's)."""
        if turn.first_call is None:
            return None
        prompt = messages_of(self.entries, turn.first_call, self.fetch)
        users = [m for m in prompt if m["role"] == "user"]
        return users[0]["content"] if users else None


@dataclass(frozen=True)
class PersonInput:
    """Something the person said to the job: an answer (with the question
    it answers) or the feedback of a reject or a resubmit."""

    sequence: int
    #: The person's command: answer, reject or resubmit.
    action: str
    text: str
    #: The role whose turn it was.
    role: str
    #: For an answer: the question, as the job held it just before.
    question: Optional[str] = None


def person_inputs(files: "JobFiles", sequences: list[int], known: Optional[Entries] = None) -> list[PersonInput]:
    """The person's inputs recorded in entries ``sequences`` (a manifest's
    ``person_inputs``), reading those entries and, for an answer, the one
    before it (whose state holds the question), and nothing else."""
    known = known or {}
    wanted = set(sequences) | {s - 1 for s in sequences}
    entries = {s: known[s] for s in wanted if s in known}
    if wanted - set(entries):
        entries.update(read_entries(files, wanted - set(entries)))
    found = []
    for sequence in sequences:
        entry = entries.get(sequence) or {}
        said = entry.get("user_input") or {}
        if not said.get("text"):
            continue
        question = None
        if said.get("action") == "answer":
            before = ((entries.get(sequence - 1) or {}).get("state") or {}).get("question") or {}
            question = before.get("text")
        found.append(PersonInput(sequence, said.get("action", ""), said["text"], entry.get("role") or "", question))
    return found


def rounds_of(conversation: list[dict], turn: Turn) -> list[tuple[int, str, str]]:
    """``(round number, user message, answer)`` of each round in a
    conversation from :meth:`HistoryReader.conversation` (the system message
    left out); the last round is the turn's ``rounds``-th."""
    body = [m for m in conversation if m["role"] != "system"]
    pairs = [(body[i]["content"], body[i + 1]["content"]) for i in range(0, len(body) - 1, 2)]
    first = turn.rounds - len(pairs) + 1
    return [(first + i, user, answer) for i, (user, answer) in enumerate(pairs)]
