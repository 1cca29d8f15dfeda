"""An OpenAI-compatible server that answers from a recorded ``jobHistory.json``.

``logist replay-server``, ``logist demo`` and the tests run jobs live (the
real prompt builder, the real ``openai`` client, real HTTP) against a
recording instead of a model. The HTTP side is :class:`logist.replay.scripted.LLMServer`;
this module decides what to answer, with :mod:`logist.replay.matching`
(which recorded call a request is).

Which recorded call answers a request: the one whose request it is. A
step sends exactly the body ``job preview --json`` shows and the history
records its model, messages and parameters, so each recorded call has a
canonical request (model, messages, temperature, max_tokens) and a request
is answered by the earliest recorded call not yet served whose canonical
request equals the received one (a dict from digest to calls). A request
holds the whole conversation, so the work per request is kept to C-level
passes over it: a job usually asks its next recorded call, so the body is
first compared as it is with that call's request, and only a request that is
not it is hashed (:func:`~logist.replay.matching.request_digest`). A
server that keeps no request (``logist replay-server``) does not even parse
a request that is, byte for byte, what recorded calls were sent as: it
knows it by the SHA-256 of its bytes (:meth:`ReplayLLMServer.known`),
having rebuilt and encoded each recorded call's body once, as it loaded the
recording (its response_format read from the recording's folder). Nothing is
read out of the prompt text: no role detection, no per-role queues, no
patterns. Prompts do not name the job or the endpoint, so a recording
replays under any job id and against any port; the one job-specific value
a prompt can hold is the workspace path (in a command's output), and it is
replaced by exact known values only: where the recording's commands ran
(``command.cwd``; in files written before paths were relative, the
header's and entries' ``workspace_path``), and :attr:`ReplayLLMServer.workspace` when the caller
says where the replaying job lives. The ``response_format`` is compared by
its digest, which the recording holds even where the file it is kept in
(``response_formats/``) was not copied with the history.

A request no unserved call matches: strict (the default), an HTTP 400 with
``x-should-retry: false`` naming the nearest unserved call (the one whose
messages agree longest with the request) and the first difference; the
client records it and the job stops for a person. Lenient, the nearest call
answers anyway and the difference is logged.

Many jobs at once: each job replays the recording on its own queue. A
request names its job by the ``X-Logist-Job`` header Logist sends
(:data:`logist.model.client.JOB_HEADER`); the prompts cannot tell jobs apart, since
jobs created from one recording ask the very same things. A request without
the header is one more job (the one anonymous queue). :attr:`ReplayLLMServer.ledger`
lists every call served, for which job, in order (``GET /ledger`` returns
it as JSON), so a batch can be checked call by call. ``repeats``: a request
its job already got the answer of, with no unserved call left that matches
it, is answered again with that answer and marked in the ledger as a repeat
(as a gateway that honours an ``Idempotency-Key`` does); without it, such a
request is refused as a mismatch. ``latency``: seconds each answer waits, to
measure a batch against a model's response time (``bench/batch.py``).

A recorded failure replays as the same failure: ``HTTP NNN: detail`` as
that status and detail (not retried, so it comes back at once with the same
text), a timeout by holding the request until the client gives up, a
connection failure by dropping the connection, an answer broken off by
closing (or resetting) the connection once it began. Retries of a failed request
get the same failure again.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import logging
import re
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional, Union

from ..store.history import HistoryEntry, JobHistory
from ..store.session import JobFiles
from ..model.client import JOB_HEADER, TOOL_NOTE
from ..store.calls import HEADER as KEY_HEADER, role_content
from ..errors import CorruptFileError
from ..store.atomic import compact_json
from ..store.requests import request_body
from ..store.response_formats import digest_of, is_reference, sent
from .matching import (PARAMETERS, agreement, canonical_request, digest, first_difference, names_any, recorded_body,
                       request_digest)
from .scripted import NO_RETRY, LLMServer, Reply
from .apply import read_history_file

logger = logging.getLogger("logist.replay.server")

#: Held this long at most when replaying a timeout; the client gives up first.
TIMEOUT_HOLD = 600.0
#: Parses a recorded call's error (not a prompt) back into the failure to replay.
_HTTP_ERROR = re.compile(r": HTTP (\d{3})(?:: (.*?))?"
                         r"(?: \((?:set LOGIST_API_KEY or OPENAI_API_KEY|the key in \w+ was refused|the API key was refused)\))?$",
                         re.S)
#: A recorded answer that came as a tool call, replayed as one.
_TOOL_CALL = re.compile(re.escape(TOOL_NOTE).replace(re.escape("{}"), "(.+?)"))
#: History entries that are calls of the model.
from ..store.entries import CALL_KINDS, FAILED  # noqa: E402  (CALL_KINDS re-exported)


@dataclass(eq=False)  # compared by identity: two calls can ask the same
class RecordedCall:
    """One recorded LLM call, as the replay serves it."""

    entry: HistoryEntry
    #: "Worker", or "Worker summary" for a compaction call of the Worker.
    label: str
    number: int
    of: int
    #: The canonical request (:func:`canonical_request`) and its digest.
    request: dict
    digest: str
    #: Its place among the recording's calls (from 0).
    index: int = 0

    def describe(self) -> str:
        return f"step {self.entry.sequence} ({self.label} call {self.number} of {self.of})"


def recorded_reply(entry: HistoryEntry) -> Reply:
    """The reply that reproduces what the recorded call got."""
    response = entry.response
    if response is not None and response.status == FAILED:
        return failure_reply(response.error or "")
    usage: Union[dict, bool] = False
    recorded = entry.usage
    # Estimated usage was estimated because the endpoint sent none: so does the replay.
    if recorded is not None and not getattr(recorded, "estimated", False) and (
            recorded.prompt_tokens is not None or recorded.completion_tokens is not None):
        usage = {"prompt_tokens": recorded.prompt_tokens or 0, "completion_tokens": recorded.completion_tokens or 0}
    tool = _TOOL_CALL.match(entry.note or "")  # the note may go on (an answer recovered from the journal)
    return Reply(content=(response.raw_response if response else None) or "", usage=usage,
                 tool_call=tool.group(1) if tool else None)


def failure_reply(error: str) -> Reply:
    """The failure that makes the client report ``error`` again (see module doc)."""
    found = _HTTP_ERROR.search(error)
    if found:
        status, detail = int(found.group(1)), found.group(2) or ""
        return Reply(status=status, error_message=detail, error_type="recorded_error", headers=NO_RETRY)
    if "the request timed out" in error:
        return Reply(delay=TIMEOUT_HOLD)
    if "while the answer was being received" in error:
        return Reply(break_after=0, reset=True)
    if "before the whole answer was received" in error:
        return Reply(break_after=0)
    if "cannot connect" in error or "before an answer came" in error:
        return Reply(disconnect=True)
    return Reply(status=500, error_message=error, error_type="recorded_error", headers=NO_RETRY)


def load_recording(source: Union[str, Path, JobHistory]) -> JobHistory:
    """A history, from a ``jobHistory.json``, or a job or fixture folder holding one."""
    if isinstance(source, JobHistory):
        return source

    path = Path(source)
    return read_history_file(JobFiles(path).history_path if path.is_dir() else path)


def recording_folder(source: Union[str, Path, JobHistory]) -> Optional[JobFiles]:
    """The job or fixture folder a recording was read from (its ``response_formats/``
    beside its history), None for a history given in memory."""
    if isinstance(source, JobHistory):
        return None
    path = Path(source)
    return JobFiles(path if path.is_dir() else path.parent)


class Sent(dict):
    """A request known by its bytes (:meth:`ReplayLLMServer.known`): the
    bytes recorded calls were sent as, which it is not parsed for. As a
    dict it holds what a reply reads of a body, the recorded body but its
    messages; :attr:`calls` are the recorded calls that sent these bytes,
    earliest first, and :attr:`raw` the bytes (parsed after all when none
    of the calls is the one to answer)."""

    calls: list[RecordedCall]
    raw: bytes


@dataclass
class _JobQueue:
    """One job's replay of the recording: its unserved calls by digest, earliest first."""

    unserved: dict[str, deque]
    served: list[RecordedCall] = field(default_factory=list)
    #: The places of the calls served, and the first place not served yet (the call a job asks next,
    #: unless it diverged).
    served_at: set[int] = field(default_factory=set)
    next: int = 0
    # The last failure served, so that the client's retries of the same
    # request get it again instead of the next recorded call.
    failing: Optional[tuple[str, Optional[str], Reply]] = None


class ReplayLLMServer(LLMServer):
    """Answers each request with the recorded call whose request it is.

    ``strict`` (default): a request no unserved recorded call matches gets
    an HTTP 400 naming the nearest one and the first difference. Otherwise
    the nearest one answers and the difference is logged
    (``logist.replay.server`` logger) and kept in :attr:`mismatches`.
    ``workspace``: where the replaying job's workspace is, when a command's
    output in the recording names the recorded one. ``keep_requests``: keep
    each request in :attr:`requests` (False for a server that runs long:
    :attr:`ledger` lists the calls served all the same).
    """

    thread_name = "replay-llm"

    def __init__(
        self,
        recording: Union[str, Path, JobHistory],
        *,
        strict: bool = True,
        workspace: Union[str, Path, None] = None,
        host: str = "127.0.0.1",
        port: int = 0,
        repeats: bool = False,
        latency: float = 0.0,
        keep_requests: bool = True,
    ):
        self.history = load_recording(recording)
        self.strict = strict
        self.repeats = repeats
        self.latency = latency
        #: The replaying job's workspace path, replaced like the recorded ones.
        self.workspace: Optional[str] = str(workspace) if workspace else None
        # A call of unknown outcome has no answer to serve: the call made again after it is the one served.
        entries = [e for e in self.history.interactions
                   if e.kind in CALL_KINDS and e.request is not None and not e.unknown_outcome]
        labels = [(e.role or e.request.metadata.role) + (" summary" if e.kind == "compaction" else "") for e in entries]
        #: Recorded calls per label ("Worker", "Worker summary", ...), in order of first appearance.
        self.counts: dict[str, int] = {}
        for label in labels:
            self.counts[label] = self.counts.get(label, 0) + 1
        seen: dict[str, int] = {}
        self.calls: list[RecordedCall] = []
        by_number = {e.sequence: e.dump() for e in self.history.interactions}
        # Every workspace path the recording names (a message can repeat an earlier step's output):
        # where its commands ran (files written before paths were relative: upgraded with the path they named).
        self._recorded_workspaces = tuple(
            {e.command.cwd for e in self.history.interactions if e.command is not None and e.command.cwd})
        #: Each recorded call's body but its messages, by the SHA-256 of the bytes it was sent as, with the calls
        #: that sent them (:meth:`known`).
        self._sent: dict[bytes, tuple[dict, list[RecordedCall]]] = {}
        folder = recording_folder(recording)
        #: Each response_format file the recording names, read once (None: not at hand).
        formats: dict[str, Optional[dict]] = {}
        for entry, label in zip(entries, labels):
            seen[label] = seen.get(label, 0) + 1
            body = recorded_body(entry, by_number)
            request = canonical_request(body, self._recorded_workspaces)
            call = RecordedCall(entry, label, seen[label], self.counts[label], request, digest(request),
                                len(self.calls))
            self.calls.append(call)
            self._index_sent(call, body["messages"], folder, formats)
        #: Requests answered by their bytes (:meth:`known`), not parsed.
        self.known_requests = 0
        self.total = len(self.calls)
        #: Each job's queue, by the job's id ("" for requests that name none).
        self.queues: dict[str, _JobQueue] = {}
        #: Recorded calls answered so far (every job's), in the order they were served.
        self.served: list[RecordedCall] = []
        #: Every call served: ``{"job", "call", "sequence", "outcome", "repeat", "key"}``, in order
        #: (``key``: the request's ``Idempotency-Key``, so a test can tell a call sent again from a new one).
        self.ledger: list[dict] = []
        #: Every difference found (strict: refused; lenient: answered anyway).
        self.mismatches: list[str] = []
        super().__init__(host, port, keep_requests=keep_requests)
        self.models = sorted({call.request["model"] for call in self.calls if call.request["model"]}) or self.models

    def _index_sent(self, call: RecordedCall, messages: list, folder: Optional[JobFiles],
                    formats: dict[str, Optional[dict]]) -> None:
        """Index the bytes ``call`` was sent as (the body rebuilt as Logist builds one,
        :func:`~logist.store.requests.request_body`, encoded as the SDK sends it). A call
        whose response_format file is not at hand is left out: its requests are parsed.
        ``formats``: the files read so far (a long turn names the same one at every call)."""
        metadata = call.entry.request.metadata
        response_format = metadata.response_format
        if is_reference(response_format):
            name = response_format["file"]
            if name not in formats:
                try:
                    formats[name] = sent(folder, response_format) if folder is not None else None
                except CorruptFileError:
                    formats[name] = None
            response_format = formats[name]
            if response_format is None:
                return
        body = request_body(metadata.model, messages, metadata.temperature, metadata.max_tokens, response_format,
                            metadata.stream)
        rest = {key: value for key, value in body.items() if key != "messages"}
        self._sent.setdefault(hashlib.sha256(compact_json(body)).digest(), (rest, []))[1].append(call)

    def known(self, raw: bytes) -> Optional[dict]:
        """A request that is, byte for byte, what recorded calls were sent as:
        a :class:`Sent`, found by the SHA-256 of its bytes instead of
        parsing it (a request holds the whole conversation: at round 1,000
        of a turn, parsing it cost more than anything else the server does). A
        server that keeps its requests parses each."""
        if self.keep_requests:
            return None
        found = self._sent.get(hashlib.sha256(raw).digest())
        if found is None:
            return None
        body = Sent(found[0])
        body.calls, body.raw = found[1], raw
        return body

    def _sent_call(self, queue: "_JobQueue", body: Sent, idempotency: Optional[str]) -> Optional[RecordedCall]:
        """The call to answer a :class:`Sent` request with, when it is the one
        matching would find (the job's earliest unserved call whose canonical
        request is the body's) and the request is no retry of a failure; else None."""
        call = next((c for c in body.calls if c.index not in queue.served_at), None)
        if call is None:
            return None
        waiting = queue.unserved.get(call.digest)
        if not waiting or waiting[0] is not call or (queue.failing and queue.failing[:2] == (call.digest, idempotency)):
            return None
        return call

    def queue(self, job: str) -> _JobQueue:
        """Job ``job``'s queue, made on its first request."""
        if job not in self.queues:
            unserved: dict[str, deque] = {}
            for call in self.calls:
                unserved.setdefault(call.digest, deque()).append(call)
            self.queues[job] = _JobQueue(unserved)
        return self.queues[job]

    @property
    def remaining(self) -> int:
        """Calls not yet served to the jobs that have asked (the whole
        recording while none has)."""
        if not self.queues:
            return self.total
        return sum(len(calls) for queue in self.queues.values() for calls in queue.unserved.values())

    def extra_get(self, path: str) -> Optional[dict]:
        if path.rstrip("/").endswith("/ledger"):
            return {"ledger": list(self.ledger), "recorded_calls": self.total, "jobs": len(self.queues)}
        return None

    def summary(self) -> str:
        """``4 recorded calls (Worker: 2, Supervisor: 2)``."""
        per_role = ", ".join(f"{label}: {count}" for label, count in self.counts.items())
        return f"{self.total} recorded call{'s' if self.total != 1 else ''}" + (f" ({per_role})" if per_role else "")

    def _workspaces(self) -> tuple[str, ...]:
        return self._recorded_workspaces + ((self.workspace,) if self.workspace else ())

    def canonical(self, body: dict) -> dict:
        """A received body's canonical request (see :func:`canonical_request`)."""
        return canonical_request(body, self._workspaces())

    def _refuse(self, message: str, kind: str) -> Reply:
        # INFO: the client gets (and records) the message; a server run on
        # its own (``logist replay-server``) shows INFO too.
        logger.info(message)
        return Reply(status=400, error_message=message, error_type=kind, headers=NO_RETRY)

    def _expected(self, queue: _JobQueue, body: dict) -> Optional[RecordedCall]:
        """The job's earliest unserved call when ``body`` asks exactly what it
        recorded: the model, the parameters and the messages as they are (a
        C-level compare of the lists, naming no workspace path); else None, and
        the request is matched by its digest. The same call the digest finds:
        the earliest unserved one whose canonical request is the body's."""
        while queue.next in queue.served_at:
            queue.next += 1
        if queue.next >= len(self.calls):
            return None
        call = self.calls[queue.next]
        recorded = call.request
        if body.get("model") != recorded["model"] or body.get("messages") != recorded["messages"] or \
                any(body.get(key) != recorded[key] for key in PARAMETERS if key != "response_format") or \
                digest_of(body.get("response_format")) != recorded["response_format"]:
            return None
        workspaces = [w for w in self._workspaces() if w]
        if workspaces:
            parts = role_content(body["messages"])
            if parts is None or names_any(parts, workspaces):
                return None  # its canonical request is not the body as it is
        return call

    def _nearest(self, queue: _JobQueue, request: dict) -> Optional[RecordedCall]:
        """The job's unserved call that agrees longest with ``request`` (the
        earliest among equals)."""
        pending = [c for c in self.calls if c in queue.unserved.get(c.digest, ())]
        return max(pending, key=lambda c: agreement(c.request, request), default=None)

    def _answer(self, job: str, call: RecordedCall, repeat: bool = False, key: Optional[str] = None) -> Reply:
        outcome = call.entry.response.status if call.entry.response else "?"
        self.ledger.append({"job": job or None, "call": call.describe(), "sequence": call.entry.sequence,
                            "outcome": outcome, "repeat": repeat, "key": key})
        logger.info(f"{call.describe()}{' for job ' + job if job else ''}: answered as recorded ({outcome})"
                    + (", again" if repeat else ""))
        reply = recorded_reply(call.entry)
        if self.latency and reply.status == 200 and not reply.delay and not reply.disconnect:
            reply = dataclasses.replace(reply, delay=self.latency)
        return reply

    def reply_for(self, body: dict, headers: dict) -> Reply:
        # Each request holds the whole conversation: what is done with it here is done by its bytes' digest
        # (known) or its digest (C-level maps over the messages), and the canonical request is built only for
        # a mismatch.
        job = next((value for name, value in headers.items() if name.lower() == JOB_HEADER.lower()), "")
        idempotency = next((value for name, value in headers.items() if name.lower() == KEY_HEADER.lower()), None)
        if isinstance(body, Sent):
            queue = self.queue(job)
            call = self._sent_call(queue, body, idempotency)
            if call is not None:
                self.known_requests += 1
                return self._serve(job, queue, call, call.digest, idempotency)
            body = json.loads(body.raw)
        messages = body.get("messages")
        if not isinstance(messages, list) or not all(map(isinstance, messages, itertools.repeat(dict))):
            return self._refuse("the request has no list of messages", "invalid_request_error")
        queue = self.queue(job)
        expected = self._expected(queue, body)
        key = expected.digest if expected is not None else request_digest(body, self._workspaces())
        if queue.failing and queue.failing[:2] == (key, idempotency):
            # The client's retry of a request that failed (the same Idempotency-Key): the same failure. The
            # call made again in a later step asks the same and is no retry: its key is another.
            return queue.failing[2]
        matching = queue.unserved.get(key)
        if expected is not None:
            call = expected
        elif matching:
            call = matching[0]
        else:
            again = next((c for c in reversed(queue.served) if c.digest == key), None)
            if again is not None and self.repeats:
                return self._answer(job, again, repeat=True, key=idempotency)
            request = self.canonical(body)
            call = self._nearest(queue, request)
            if call is None:
                return self._refuse(
                    f"the recording has no call left: all {self.total} were answered", "replay_exhausted"
                )
            text = f"replay mismatch at {call.describe()}: {first_difference(call.request, request, call.entry)}"
            if again is not None:
                text += f" (the request is that of {again.describe()}, already answered)"
            self.mismatches.append(text)
            if self.strict:
                return self._refuse(text, "replay_mismatch")
            logger.warning(f"{text} (answered with the recorded answer anyway)")
        return self._serve(job, queue, call, key, idempotency)

    def _serve(self, job: str, queue: _JobQueue, call: RecordedCall, key: str, idempotency: Optional[str]) -> Reply:
        """Answer with recorded call ``call`` (asked with digest ``key``) and mark it served for the job."""
        queue.unserved[call.digest].remove(call)
        queue.served.append(call)
        queue.served_at.add(call.index)
        self.served.append(call)
        reply = self._answer(job, call, key=idempotency)
        failed = reply.status != 200 or reply.disconnect or (reply.delay and reply.delay != self.latency)
        queue.failing = (key, idempotency, reply) if failed else None
        return reply
