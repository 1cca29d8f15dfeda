"""Real OpenAI-compatible HTTP servers on 127.0.0.1, and a scripted model in memory, for tests and the demo.

Tests, the offline demo and people who write their own roles use them to run
jobs through the real ``openai`` client with no network and no key::

    from logist.replay.scripted import ScriptedLLMServer, Reply

    with ScriptedLLMServer(['{"action": "MESSAGE", "message": "hi"}', Reply(status=500)]) as server:
        step_once(job, base_url=server.base_url)

:class:`LLMServer` holds the HTTP side, built on the standard library's
``http.server`` (no hand-written HTTP parsing): routes, JSON bodies, the
Chat Completions answer with its ``usage``, error bodies in OpenAI's shape,
slow answers that end early when the client gives up. What to answer each
request is the one thing a subclass decides (:meth:`LLMServer.reply_for`):

* :class:`ScriptedLLMServer` takes the next item of a script: a string is
  the assistant's content; a :class:`Reply` can also set an HTTP error
  status, a delay (to provoke a client timeout), the usage, or send the
  content as a tool call's arguments, or send a fault: a raw body (an HTML
  page, JSON that is not a chat completion, a stream piece that is not
  JSON) or an answer broken off after some bytes (closed, or reset).

A request with ``"stream": true`` is answered as OpenAI streams: server-sent
events of ``chat.completion.chunk`` pieces, a last chunk with the usage when
``stream_options.include_usage`` asks for it, then ``data: [DONE]``. A
server made with ``streaming="refuse"`` answers such a request with HTTP 400
(as endpoints that do not stream do), and with ``streaming="ignore"`` with
the whole answer as if no stream had been asked for. ``GET /models`` lists
:attr:`LLMServer.models`.
* :class:`logist.replay.server.ReplayLLMServer` answers from a recorded
  ``jobHistory.json``.

:class:`ScriptedModel` answers the same scripts in memory, behind the model
seam (:class:`logist.model.base.Model`): what tests use unless the wire is
what they test.

Every request body is kept in :attr:`LLMServer.requests` (unless it is told not
to: ``keep_requests``). pytest fixtures
built on these servers are in :mod:`logist.replay.pytest_plugin`.
"""

from __future__ import annotations

import json
import select
import socket
import struct
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Iterable, Optional, Union

from .shapes import Reply, completion_body, stream_chunks
from ..errors import LLMCallError
from ..model.base import Model, Request, failed_after, status_kind, status_text
from ..model.client import Endpoints
from ..model.completions import LLMReply, check_size, joined, whole
from ..protocol.answer import EXIT_ACTIONS, Answer
from ..store.calls import HEADER as IDEMPOTENCY_HEADER


Script = Iterable[Union[str, Reply]]

#: Tells the openai client not to retry (it honours this header).
NO_RETRY = {"x-should-retry": "false"}


class _Handler(BaseHTTPRequestHandler):
    server: "_Server"
    protocol_version = "HTTP/1.1"

    def log_message(self, format, *args):  # keep test output clean
        pass

    def _send(self, status: int, body: dict, headers: Optional[dict] = None) -> None:
        data = json.dumps(body).encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout)
            pass

    def _error(self, status: int, message: str, kind: str, headers: Optional[dict] = None) -> None:
        self._send(status, {"error": {"message": message, "type": kind, "code": status}}, headers)

    def _client_left_during(self, seconds: float, release: Optional[threading.Event] = None) -> bool:
        """Wait up to ``seconds``, or until ``release`` is set; True as soon as the client has hung up."""
        deadline = time.monotonic() + seconds
        while not self.server.stopping.is_set():
            left = deadline - time.monotonic()
            if left <= 0 or (release is not None and release.is_set()):
                return False
            readable, _, _ = select.select([self.connection], [], [], min(left, 0.05))
            if readable:
                try:
                    if not self.connection.recv(1, socket.MSG_PEEK):
                        return True
                except OSError:
                    return True
                time.sleep(min(left, 0.05))
        return True

    def _break_off(self, data: bytes, reply: "Reply") -> None:
        """Send the first ``reply.break_after`` bytes of ``data``, then close or reset."""
        try:
            self.wfile.write(data[: reply.break_after])
            self.wfile.flush()
            if reply.reset:  # an abortive close: the client reads ECONNRESET
                self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                self.connection.close()
        except OSError:
            pass
        self.close_connection = True

    def _send_raw(self, reply: "Reply") -> None:
        data = reply.body or b""
        self.send_response(reply.status)
        self.send_header("Content-Type", reply.content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if reply.break_after is not None:
            self._break_off(data, reply)
            return
        try:
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _send_stream(self, chunks: list[dict], delay: float, reply: Optional["Reply"] = None) -> None:
        """Server-sent events, in HTTP/1.1 chunked encoding (the connection stays open)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        events = [f"data: {json.dumps(chunk)}\n\n".encode("utf-8") for chunk in chunks] + [b"data: [DONE]\n\n"]
        framed = [b"%x\r\n%s\r\n" % (len(event), event) for event in events] + [b"0\r\n\r\n"]
        if reply is not None and reply.break_after is not None:
            self._break_off(b"".join(framed), reply)
            return
        try:
            if not delay:  # one write: no wait on the client's delayed ACKs
                self.wfile.write(b"".join(framed))
                return
            for i, piece in enumerate(framed):
                if 1 < i < len(events) - 1 and self._client_left_during(delay, reply.release if reply else None):
                    self.close_connection = True
                    return
                self.wfile.write(piece)
                self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def do_GET(self):
        if self.path.rstrip("/").endswith("/models"):
            models = [{"id": name, "object": "model", "owned_by": "logist"} for name in self.server.owner.models]
            self._send(200, {"object": "list", "data": models})
        elif (extra := self.server.owner.extra_get(self.path)) is not None:
            self._send(200, extra)
        else:
            self._error(404, f"no route {self.path}", "not_found")

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if not self.path.rstrip("/").endswith("/chat/completions"):
            self._error(404, f"no route {self.path}", "not_found")
            return
        owner = self.server.owner
        body = owner.known(raw)
        if body is None:
            try:
                body = json.loads(raw)
                if not isinstance(body, dict):
                    raise ValueError
            except ValueError:
                self._error(400, "request body is not a JSON object", "invalid_request_error")
                return
        if body.get("stream") and owner.streaming == "refuse":
            owner._record(body, dict(self.headers))  # refused: the script's next answer is not used up
            self._error(400, "stream is not supported", "invalid_request_error", NO_RETRY)
            return
        number, reply = owner._next(body, dict(self.headers))
        if reply.delay and self._client_left_during(reply.delay, reply.release):
            self.close_connection = True
            return
        if reply.disconnect:
            self.close_connection = True
            return
        if reply.body is not None:
            self._send_raw(reply)
            return
        if reply.status != 200:
            self._error(reply.status, reply.error_message, reply.error_type, reply.headers or {"retry-after-ms": "10"})
            return
        if body.get("stream") and owner.streaming is True:
            self._send_stream(stream_chunks(body, reply, number), reply.piece_delay, reply)
        elif reply.break_after is not None:
            whole = completion_body(body, reply.content or "", reply.usage, number, reply.tool_call)
            self._send_raw(Reply(body=json.dumps(whole).encode("utf-8"), break_after=reply.break_after,
                                 reset=reply.reset))
        else:
            self._send(200, completion_body(body, reply.content or "", reply.usage, number, reply.tool_call), reply.headers)


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    owner: "LLMServer"
    stopping: threading.Event

    def handle_error(self, request, client_address):
        # A client that closes a kept-alive connection with unread bytes
        # (the SDK does, after a stream's [DONE]) resets it: not an error.
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)

    def get_request(self):
        # Answers are small and written in pieces (headers, body): without
        # TCP_NODELAY each response waits on the client's delayed ACK.
        connection, address = super().get_request()
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection, address


class LLMServer:
    """An OpenAI-compatible server; subclasses decide each reply.

    Use it as a context manager, or call :meth:`start` and :meth:`stop`.
    Binds to 127.0.0.1 on a free port unless told otherwise.
    """

    #: Name of the serving thread, for debugging.
    thread_name = "logist-llm"

    #: What ``GET /models`` lists: the built-in roles' model (it answers any
    #: model named), so a job that names none sends that one, as to OpenAI.
    models: list[str] = ["gpt-4o-mini"]

    def __init__(self, host: str = "127.0.0.1", port: int = 0, streaming: Union[bool, str] = True,
                 keep_requests: bool = True):
        self._lock = threading.Lock()
        #: True: a streamed request is answered with server-sent events;
        #: "refuse": with HTTP 400; "ignore": with the whole answer.
        self.streaming = streaming
        #: Whether each request's body and headers are kept (:attr:`requests`, :attr:`headers`).
        #: False for a server that runs long (``logist replay-server``): a body holds the whole
        #: conversation, so a turn's bodies kept add up to the square of its length.
        self.keep_requests = keep_requests
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        #: Requests received, kept or not.
        self.received = 0
        self._server = _Server((host, port), _Handler)
        self._server.owner = self
        self._server.stopping = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def reply_for(self, body: dict, headers: dict) -> Reply:
        """The reply to one request (called with the server's lock held)."""
        raise NotImplementedError

    def known(self, raw: bytes) -> Optional[dict]:
        """What a subclass knows request body ``raw`` to be without parsing it
        (:class:`logist.replay.server.ReplayLLMServer`: a recorded request's
        bytes), else None: the body is parsed."""
        return None

    def extra_get(self, path: str) -> Optional[dict]:
        """The JSON a subclass answers ``GET path`` with, besides ``/models`` (None: 404)."""
        return None

    def _record(self, body: dict, headers: dict) -> None:
        with self._lock:
            self._count(body, headers)

    def _count(self, body: dict, headers: dict) -> None:
        self.received += 1
        if self.keep_requests:
            self.requests.append(body)
            self.headers.append(headers)

    def _next(self, body: dict, headers: dict) -> tuple[int, Reply]:
        with self._lock:
            self._count(body, headers)
            return self.received, self.reply_for(body, headers)

    @property
    def base_url(self) -> str:
        host, port = self._server.server_address[:2]
        if ":" in host:
            host = f"[{host}]"
        return f"http://{host}:{port}/v1"

    def start(self) -> "LLMServer":
        # A short poll interval: stop() waits for the serving loop to notice.
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.01}, name=self.thread_name, daemon=True
        )
        self._thread.start()
        return self

    def serve_forever(self) -> None:
        """Serve in the calling thread until :meth:`stop` (or Ctrl-C)."""
        self._server.serve_forever()

    def stop(self) -> None:
        self._server.stopping.set()
        if self._thread is not None:
            self._server.shutdown()
        self._server.server_close()

    def __enter__(self):
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def _scripted(item: Union[str, Reply]) -> Reply:
    return item if isinstance(item, Reply) else Reply(content=item)


def _exhausted(number: int) -> str:
    return f"the script has no answer left for request {number}"


class ScriptedLLMServer(LLMServer):
    """An OpenAI-compatible server answering from ``script`` in order."""

    thread_name = "scripted-llm"

    def __init__(self, script: Script = (), host: str = "127.0.0.1", port: int = 0, *,
                 streaming: Union[bool, str] = True, models: Optional[list[str]] = None):
        super().__init__(host, port, streaming)
        if models is not None:
            self.models = list(models)
        self._script = [_scripted(s) for s in script]

    def add(self, *items: Union[str, Reply]) -> None:
        with self._lock:
            self._script.extend(_scripted(s) for s in items)

    @property
    def remaining(self) -> int:
        return len(self._script)

    def reply_for(self, body: dict, headers: dict) -> Reply:
        if self._script:
            return self._script.pop(0)
        return Reply(status=500, error_message=_exhausted(len(self.requests)), error_type="script_exhausted",
                     headers=NO_RETRY)


#: The Reply fields that are faults of the wire, which only :class:`ScriptedLLMServer` can send.
WIRE_FAULTS = ("delay", "piece_delay", "disconnect", "body", "break_after", "reset")


class ScriptedModel(Model):
    """A model in memory answering from ``script`` in order, as
    :class:`ScriptedLLMServer` does without the wire: no socket, no thread.
    Give it to the engine with ``logist.open(path, model=scripted)`` or
    ``step_once(job, endpoints=scripted.endpoints)``.

    An answer goes through the same shapes the server sends and the same
    reading a client does (:func:`~logist.replay.shapes.completion_body`,
    :func:`~logist.model.completions.whole`; a streamed request's
    :func:`~logist.replay.shapes.stream_chunks` joined by
    :func:`~logist.model.completions.joined`, each piece told to the
    call's ``on_tokens``), so a call is recorded as one through the wire:
    the same content, usage (the script's, else estimated as the server
    estimates it), tool and finish reason. A :class:`Reply` with an HTTP
    error ``status`` fails the call as the endpoint's error would after one
    attempt (this model makes no retries and sends no response headers:
    those are the wire's, as are timeouts, broken connections and raw
    bodies, which it refuses when scripted: :data:`WIRE_FAULTS`).
    ``max_answer_bytes`` is held to.

    Every request body is kept in :attr:`requests`, and the headers an
    endpoint would have been sent (the job's, the ``Idempotency-Key``) in
    :attr:`headers`."""

    #: What the model calls itself (as ``GET /models`` lists the server's).
    models: list[str] = ["logist"]

    def __init__(self, script: Script = (), *, streaming: bool = True):
        self._lock = threading.Lock()
        #: True: a request that asks for a stream is answered in pieces; False: whole.
        self.streaming = streaming
        self.requests: list[dict] = []
        self.headers: list[dict] = []
        self._script: list[Reply] = []
        self._endpoints: Optional[Endpoints] = None
        self.add(*script)

    def add(self, *items: Union[str, Reply]) -> None:
        replies = [_scripted(s) for s in items]
        for reply in replies:
            wire = [name for name in WIRE_FAULTS if getattr(reply, name) != getattr(_PLAIN, name)]
            if wire:
                raise ValueError(f"{', '.join(wire)}: a fault of the wire, which ScriptedLLMServer sends; "
                                 "ScriptedModel answers in memory")
        with self._lock:
            self._script.extend(replies)

    @property
    def remaining(self) -> int:
        return len(self._script)

    @property
    def endpoints(self) -> Endpoints:
        """The :class:`~logist.model.client.Endpoints` that makes every call to this model (the engine's functions take one)."""
        if self._endpoints is None:
            self._endpoints = Endpoints(model=self)
        return self._endpoints

    def complete(self, request: Request) -> LLMReply:
        body = request.body
        headers = dict(request.headers)
        if request.key_for is not None:
            headers[IDEMPOTENCY_HEADER] = request.key_for(body)
        with self._lock:
            self.requests.append(body)
            self.headers.append(headers)
            number = len(self.requests)
            reply = self._script.pop(0) if self._script else None
        if reply is None:
            raise LLMCallError(failed_after(1, status_text(500, _exhausted(number))), kind=status_kind(500))
        if reply.status != 200:
            raise LLMCallError(failed_after(1, status_text(reply.status, reply.error_message)),
                               kind=status_kind(reply.status))
        if body.get("stream") and self.streaming:
            answered = joined(iter(stream_chunks(body, reply, number)), request.on_tokens, request.max_answer_bytes)
        else:  # the whole answer, to a streamed request too (as an endpoint that ignores the stream)
            answered = whole(completion_body(body, reply.content or "", reply.usage, number, reply.tool_call),
                             streamed=bool(body.get("stream")))
        answered.key = headers.get(IDEMPOTENCY_HEADER)
        return check_size(answered, request.max_answer_bytes)


_PLAIN = Reply()


def serve_forever(script: Script, host: str = "127.0.0.1", port: int = 0) -> None:  # pragma: no cover - CLI helper
    server = ScriptedLLMServer(script, host, port)
    print(server.base_url, flush=True)
    server.serve_forever()


def answer(action: str = "COMPLETED", summary: str = "done", evidence=(), **fields) -> str:
    """One protocol answer as JSON, with the exit fields filled in for
    COMPLETED / STUCK / RETRY: ``answer("MESSAGE", message="hi")``.

    Built through :class:`logist.protocol.answer.Answer`, so an answer the protocol's
    shape refuses raises ``ValueError`` here instead of reaching a test as a
    silent refusal. Paths are kept as given: the path rules are the engine's
    to enforce, and tests send bad paths on purpose to see them refused.
    """
    data = {"action": action, **fields}
    if action in EXIT_ACTIONS:
        data.setdefault("evidence_files", list(evidence))
        data.setdefault("summary_for_supervisor", summary)
    built = Answer.model_validate(data).model_dump(mode="json", exclude_unset=True)
    # The caller's key order, so a test reads the JSON in the order it wrote it.
    return json.dumps({name: built[name] for name in data})
