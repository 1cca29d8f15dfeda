"""An OpenAI-compatible server that answers from a recorded ``jobHistory.json``.

``logist replay-server``, ``logist demo`` and the tests run jobs live (the
real prompt builder, the real ``openai`` client, real HTTP) against a
recording instead of a model. The HTTP side is :class:`logist.replay.scripted.LLMServer`;
this module only decides what to answer.

Which recorded call answers a request: the recorded LLM calls are kept in one
queue per role, in recorded order, and a request takes the head of its
role's queue. The role is read from the request itself, the line
``--- Role: NAME ---`` of its system message (calls without one, such as
compaction summaries, share one queue), so two jobs' roles never need more
bookkeeping than that.

Before answering, the request is compared with the recorded one: the model
and every message. Three things are expected to differ and are normalised
first, or a recording would only replay where, under the name and against
the port it was made with: the job's workspace path (the recorded
``workspace_path`` stands for whatever path the request has in its place,
the same one everywhere), the job id in the ``# Job ID`` heading (and in a
compaction call's first line), and the endpoint in a failed call's message
(``LLM call to URL failed``), which the model sees after a resubmit.
``[Step N of MAX]`` is deterministic and compared like the rest.
Strict (the default), a difference is an HTTP 400 with
``x-should-retry: false`` whose message names the recorded step and the first
difference; the client records it and the job stops for a person. Lenient,
the recorded answer is sent anyway and the difference logged.

A recorded failure replays as the same failure: ``HTTP NNN: detail`` as
that status and detail (not retried, so it comes back at once with the same
text), a timeout by holding the request until the client gives up, a
connection failure by dropping the connection. Retries of a failed request
get the same failure again.
"""

from __future__ import annotations

import json
import logging
import re
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import Optional, Union

from ..store.history import HISTORY_NAME, HistoryEntry, JobHistory
from .scripted import NO_RETRY, LLMServer, Reply

logger = logging.getLogger("logist.replay.server")

ROLE_LINE = re.compile(r"^--- Role: (.+?) ---$", re.M)
#: The queue of recorded calls whose system message names no role.
NO_ROLE = "(no role)"
#: Held this long at most when replaying a timeout; the client gives up first.
TIMEOUT_HOLD = 600.0

_JOB_HEADING = re.compile(r"^(# Job )(\S+)$", re.M)
_COMPACTION_JOB = re.compile(r"^(Conversation of the .+? in job )(\S+)\.$", re.M)
#: A failed call's message (shown to the model after a resubmit) names the endpoint.
_ENDPOINT = re.compile(r"(LLM call to )\S+( failed| returned)")
_HTTP_ERROR = re.compile(r": HTTP (\d{3})(?:: (.*?))?(?: \(set LOGIST_API_KEY or OPENAI_API_KEY\))?$", re.S)
_EXCERPT = 30
#: History entries that are calls of the model.
CALL_KINDS = ("llm_call", "compaction")


def role_of(messages) -> str:
    """The role a request speaks for: ``--- Role: NAME ---`` in its system message."""
    for message in messages or []:
        if isinstance(message, dict) and message.get("role") == "system":
            found = ROLE_LINE.search(_content(message))
            if found:
                return found.group(1)
    return NO_ROLE


def _content(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, str):
        return content
    return json.dumps(content, ensure_ascii=False)  # content parts, or absent


@dataclass
class RecordedCall:
    """One recorded LLM call, as the replay serves it."""

    entry: HistoryEntry
    role: str
    number: int
    of: int

    @property
    def step(self) -> int:
        return int(self.entry.manifest_after.get("steps") or 0)

    def describe(self) -> str:
        return f"step {self.step} ({self.role} call {self.number} of {self.of}, history entry {self.entry.sequence})"


def _normalise(text: str) -> str:
    """The job id and the endpoint blanked out (see the module docstring)."""
    text = _JOB_HEADING.sub(r"\1<job>", text)
    text = _COMPACTION_JOB.sub(r"\1<job>.", text)
    return _ENDPOINT.sub(r"\1<endpoint>\2", text)


def _received_workspace(recorded: list[str], received: list[str], workspace: str) -> Optional[str]:
    """The path the request has where the recording has ``workspace``."""
    pairs = [(r, g) for r, g in zip(recorded, received) if workspace in r]
    for rec, got in pairs:  # a message that matches once the path is a wildcard
        parts = [re.escape(p) for p in rec.split(workspace)]
        found = re.fullmatch(parts[0] + r"(?P<ws>.+?)" + r"(?P=ws)".join(parts[1:]), got, re.S)
        if found:
            return found.group("ws")
    for rec, got in pairs:  # else the first place it would be, for the error message
        before, after = rec.split(workspace, 1)
        found = re.match(re.escape(before) + r"(.+?)" + re.escape(after[:_EXCERPT]), got, re.S)
        if found:
            return found.group(1)
    return None


def _excerpt(text: str, at: int) -> str:
    start = max(0, at - 10)
    piece = text[start : at + _EXCERPT]
    quoted = json.dumps(piece, ensure_ascii=False)
    return ("..." if start else "") + quoted + ("..." if at + _EXCERPT < len(text) else "")


def first_difference(recorded: list[dict], received: list[dict], model: tuple[str, str], workspace: str) -> Optional[str]:
    """Where ``received`` first differs from ``recorded``, in words; None if
    they are the same once the workspace path, job id and endpoint are
    normalised. ``model`` is (recorded, received)."""
    recorded_model, received_model = model
    if recorded_model != received_model:
        return f"the model is {json.dumps(received_model)}, the recording used {json.dumps(recorded_model)}"
    rec_texts = [_normalise(_content(m)) for m in recorded]
    got_texts = [_normalise(_content(m)) for m in received]
    if workspace and any(workspace in t for t in rec_texts):
        theirs = _received_workspace(rec_texts, got_texts, workspace)
        rec_texts = [t.replace(workspace, "<workspace>") for t in rec_texts]
        if theirs:
            got_texts = [t.replace(theirs, "<workspace>") for t in got_texts]
    for index, (rec, got) in enumerate(zip(recorded, received)):
        if rec.get("role") != got.get("role"):
            return f"message {index} has role {json.dumps(got.get('role'))}, the recording {json.dumps(rec.get('role'))}"
        a, b = rec_texts[index], got_texts[index]
        if a != b:
            at = next((i for i, (x, y) in enumerate(zip(a, b)) if x != y), min(len(a), len(b)))
            return (
                f"message {index} ({rec.get('role')}) differs at character {at}: "
                f"recorded {_excerpt(a, at)}, received {_excerpt(b, at)}"
            )
    if len(recorded) != len(received):
        return f"the request has {len(received)} messages, the recording {len(recorded)}"
    return None


def recorded_reply(entry: HistoryEntry) -> Reply:
    """The reply that reproduces what the recorded call got."""
    response = entry.response
    if response is not None and response.status == "ERROR":
        return failure_reply(response.error or "")
    usage: Union[dict, bool] = False
    recorded = entry.usage
    if recorded is not None and (recorded.prompt_tokens is not None or recorded.completion_tokens is not None):
        usage = {"prompt_tokens": recorded.prompt_tokens or 0, "completion_tokens": recorded.completion_tokens or 0}
    return Reply(content=(response.raw_response if response else None) or "", usage=usage)


def failure_reply(error: str) -> Reply:
    """The failure that makes the client report ``error`` again (see module doc)."""
    found = _HTTP_ERROR.search(error)
    if found:
        status, detail = int(found.group(1)), found.group(2) or ""
        return Reply(status=status, error_message=detail, error_type="recorded_error", headers=NO_RETRY)
    if error.endswith("the request timed out"):
        return Reply(delay=TIMEOUT_HOLD)
    if "cannot connect" in error:
        return Reply(disconnect=True)
    return Reply(status=500, error_message=error, error_type="recorded_error", headers=NO_RETRY)


def load_recording(source: Union[str, Path, JobHistory]) -> JobHistory:
    """A history, from a ``jobHistory.json``, or a job or fixture folder holding one."""
    if isinstance(source, JobHistory):
        return source
    from .apply import read_history_file

    path = Path(source)
    return read_history_file(path / HISTORY_NAME if path.is_dir() else path)


class ReplayLLMServer(LLMServer):
    """Answers each role's requests with its recorded calls, in order.

    ``strict`` (default): a request that differs from the recorded one gets
    an HTTP 400 naming the step and the first difference. Otherwise it gets
    the recorded answer and the difference is logged (``logist.replay.server``
    logger) and kept in :attr:`mismatches`.
    """

    thread_name = "replay-llm"

    def __init__(
        self, recording: Union[str, Path, JobHistory], *, strict: bool = True, host: str = "127.0.0.1", port: int = 0
    ):
        self.history = load_recording(recording)
        self.strict = strict
        calls = [e for e in self.history.interactions if e.kind in CALL_KINDS and e.request is not None]
        by_role: dict[str, list[HistoryEntry]] = {}
        for entry in calls:
            by_role.setdefault(role_of([m.model_dump() for m in entry.request.prompt]), []).append(entry)
        self.queues: dict[str, deque[RecordedCall]] = {
            role: deque(RecordedCall(e, role, n, len(entries)) for n, e in enumerate(entries, 1))
            for role, entries in by_role.items()
        }
        self.total = len(calls)
        self.counts = {role: len(entries) for role, entries in by_role.items()}
        #: Recorded calls answered so far, in the order they were served.
        self.served: list[RecordedCall] = []
        #: Every difference found (strict: refused; lenient: answered anyway).
        self.mismatches: list[str] = []
        # The last failure served per role, so that the client's retries of
        # the same request get it again instead of the next recorded call.
        self._failing: dict[str, tuple[str, Reply]] = {}
        super().__init__(host, port)

    @property
    def remaining(self) -> int:
        return sum(len(q) for q in self.queues.values())

    def summary(self) -> str:
        """``4 recorded calls (Worker: 2, Supervisor: 2)``."""
        per_role = ", ".join(f"{role}: {count}" for role, count in self.counts.items())
        return f"{self.total} recorded call{'s' if self.total != 1 else ''}" + (f" ({per_role})" if per_role else "")

    def _refuse(self, message: str, kind: str) -> Reply:
        # INFO: the client gets (and records) the message; a server run on
        # its own (``logist replay-server``) shows INFO too.
        logger.info(message)
        return Reply(status=400, error_message=message, error_type=kind, headers=NO_RETRY)

    def reply_for(self, body: dict, headers: dict) -> Reply:
        messages = body.get("messages")
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            return self._refuse("the request has no list of messages", "invalid_request_error")
        role = role_of(messages)
        fingerprint = json.dumps(body, sort_keys=True, ensure_ascii=False)
        failing = self._failing.get(role)
        if failing and failing[0] == fingerprint:
            return failing[1]
        queue = self.queues.get(role)
        if not queue:
            if role in self.counts:
                return self._refuse(
                    f"the recording has no {role} call left: all {self.counts[role]} were answered", "replay_exhausted"
                )
            known = ", ".join(self.counts) or "none"
            return self._refuse(f"the recording has no call for role {json.dumps(role)} (it has: {known})", "replay_exhausted")
        call = queue[0]
        recorded = [m.model_dump() for m in call.entry.request.prompt]
        model = (call.entry.request.metadata.model, body.get("model"))
        difference = first_difference(recorded, messages, model, call.entry.workspace_path)
        if difference:
            text = f"replay mismatch at {call.describe()}: {difference}"
            self.mismatches.append(text)
            if self.strict:
                return self._refuse(text, "replay_mismatch")
            logger.warning(f"{text} (answered with the recorded answer anyway)")
        queue.popleft()
        self.served.append(call)
        reply = recorded_reply(call.entry)
        if reply.status != 200 or reply.delay or reply.disconnect:
            self._failing[role] = (fingerprint, reply)
        else:
            self._failing.pop(role, None)
        outcome = call.entry.response.status if call.entry.response else "?"
        logger.info(f"{call.describe()}: answered as recorded ({outcome})")
        return reply
