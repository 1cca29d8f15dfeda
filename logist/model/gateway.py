"""The recording gateway: what a coding agent (aider, Codex, Claude Code, ...)
talks to instead of its model's endpoint.

One gateway serves one agent run::

    with Gateway("http://127.0.0.1:8080/v1", real_key, mode="chat", record=append, budget=check) as gw:
        run_agent(OPENAI_BASE_URL=gw.base_url, OPENAI_API_KEY=gw.token,
                  ANTHROPIC_BASE_URL=gw.root_url, ANTHROPIC_API_KEY=gw.token)

It is a loopback HTTP server (127.0.0.1, a port of the system's choosing) on
the standard library's ``http.server``, so it needs no web framework: a
thread per connection, and agents make one call at a time or a few.

The token
    ``gw.token`` is made per gateway (random, unless one is given) and is the
    only key it takes, as ``Authorization: Bearer`` (OpenAI clients) or
    ``x-api-key`` (Anthropic clients); anything else is answered 401. Only
    ``HEAD /``, which Claude Code sends before anything else to see that the
    server is there, is answered without it: it says nothing else.
The real key
    The gateway alone holds the endpoint's key, sends it upstream and never
    back: every byte it sends an agent and every byte of a record has the key
    (and every other known secret, :mod:`logist.secrets.redact`) replaced by
    ``[redacted]``.
Calls
    ``POST /v1/chat/completions``, ``/v1/responses`` and ``/v1/messages`` are
    forwarded to the same path under the upstream base URL (``mode="passthrough"``),
    or, with ``mode="chat"``, Responses and Messages calls are translated to
    Chat Completions and their answers back (:mod:`logist.model.translate`),
    for endpoints that speak only Chat. ``GET /v1/models`` is the upstream's
    list (an empty one if the upstream has none).
Records
    Each forwarded call is handed to ``record`` as one :class:`Exchange`
    (request, answer with a stream put back together and its events, status,
    usage, duration; in ``chat`` mode the Chat request and answer too), and
    *before* the end of the answer reaches the agent: the terminal event of a
    stream (``[DONE]``, ``response.completed``, ``message_stop``) and a whole
    answer are sent only once ``record`` has returned, so a crash cannot lose
    a call the agent saw end. If ``record`` raises, the connection is closed
    instead (the agent sees a broken answer, not a finished one) and
    :attr:`Gateway.unrecorded` says why. ``record`` is called one call at a
    time. A streamed Chat call that does not ask for its usage
    (``stream_options.include_usage``) is sent asking for it, and the chunk
    that carries it is kept from the agent.
Budgets
    ``budget``, asked before each call with the :class:`Totals` so far, may
    return why the run must stop: that call and every later one is refused
    with that reason in the API's own error shape, with a status the agents
    stop at (:data:`REFUSAL_STATUS`) and ``x-should-retry: false`` (which
    the OpenAI and Anthropic SDKs honour), and :attr:`Gateway.refusal` says
    so to whoever runs the agent.
"""

from __future__ import annotations

import hmac
import json
import os
import secrets
import socket
import sys
import threading
import time
from dataclasses import asdict, dataclass, replace
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Callable, Iterable, Iterator, Optional

from . import apis, translate
from .tls import httpx as _httpx, ssl_context
from .apis import Api, Event, Usage
from ..secrets.redact import MIN_LENGTH, known_secrets, redact, redact_data

PASSTHROUGH = "passthrough"
CHAT = "chat"
MODES = (PASSTHROUGH, CHAT)

#: Tells the OpenAI and Anthropic SDKs not to send a refused call again.
NO_RETRY = {"x-should-retry": "false"}
#: The status a budget's refusal is answered with, per API: one the agents
#: stop at rather than retry. Chat and Messages clients (aider, Qwen Code,
#: Claude Code) retry a 429 but show a 402 and stop; Codex, on Responses,
#: retries any error five times except a 429 whose type is
#: ``insufficient_quota`` (OpenAI's own answer when an account's credit is
#: spent), which ends its turn at once ("Quota exceeded").
REFUSAL_STATUS = {apis.CHAT: 402, apis.RESPONSES: 429, apis.MESSAGES: 402}
#: The request headers an agent's call keeps on its way upstream (as-is mode).
KEPT_HEADERS = ("accept", "anthropic-version", "anthropic-beta", "openai-beta")
#: The endpoint's answer headers passed on to the agent: when to try again,
#: the request's id, the rate limits (which Codex and Claude Code show).
PASSED_HEADERS = ("retry-after", "retry-after-ms", "x-should-retry", "x-request-id", "request-id")
PASSED_PREFIXES = ("x-ratelimit-", "anthropic-ratelimit-", "x-codex-")


@dataclass(frozen=True)
class Totals:
    """What a run has used so far: calls forwarded, and the tokens of those answered."""
    calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0


@dataclass
class Exchange:
    """One call the gateway forwarded, as handed to ``record``."""
    #: 1 for the run's first call, in the order the calls were forwarded.
    number: int
    method: str
    #: The path the agent posted to (``/v1/messages?beta=true``).
    path: str
    #: The agent's API: ``chat``, ``responses`` or ``messages``.
    api: str
    mode: str
    #: The agent's request body.
    request: dict
    #: The HTTP status the agent was answered with.
    status: int
    #: The answer as the agent's API shapes it, a stream put back together
    #: (an error's body when the status is not 200); None if there was none.
    response: Optional[dict]
    #: A stream's events as the agent received them (``{"event", "data"}``), else None.
    events: Optional[list] = None
    #: ``{"input_tokens", "output_tokens"}`` as the endpoint reported them; for an answer it
    #: reported none for, estimated from the text (:func:`~logist.model.apis.estimated_usage`)
    #: with ``"estimated": true``; None for a call that was not answered.
    usage: Optional[dict] = None
    #: When the gateway received the call (Unix time) and seconds until it was recorded.
    started: float = 0.0
    duration: float = 0.0
    #: In ``chat`` mode: the Chat request sent and the Chat answer received.
    upstream_request: Optional[dict] = None
    upstream_response: Optional[dict] = None
    #: Why the call failed or its answer was cut short, if it was.
    error: Optional[str] = None

    def to_dict(self) -> dict:
        return asdict(self)


Record = Callable[[Exchange], None]
Budget = Callable[[Totals], Optional[str]]


class Gateway:
    """A recording gateway for one agent run (see the module's doc)."""

    def __init__(self, upstream_base_url: str, upstream_api_key: Optional[str] = None, *,
                 mode: str = PASSTHROUGH, token: Optional[str] = None, budget: Optional[Budget] = None,
                 record: Optional[Record] = None, timeout: float = 600.0, host: str = "127.0.0.1"):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
        self.upstream = upstream_base_url.rstrip("/")
        self.mode = mode
        self.token = token or "logist-" + secrets.token_urlsafe(32)
        self.totals = Totals()
        #: Why the budget stopped the run, once it has, and how many calls it refused.
        self.refusal: Optional[str] = None
        self.refused = 0
        #: The calls ``record`` failed on (their answers were withheld from the agent), and why.
        self.unrecorded: list[str] = []
        self._key = upstream_api_key or None
        self._budget = budget
        self._record = record
        self._timeout = timeout
        self._lock = threading.Lock()
        self._recording = threading.Lock()
        self._numbers = 0
        extra = [upstream_api_key] if upstream_api_key and len(upstream_api_key.strip()) >= MIN_LENGTH else []
        self._secrets = sorted(set(known_secrets(extra=extra)) | set(extra), key=len, reverse=True)
        # Each as written and as it reads inside a JSON string: a quick look for any before redacting.
        self._forms = sorted({form for secret in self._secrets for form in (secret, json.dumps(secret)[1:-1])})
        self._server = _Server((host, 0), _Handler)
        self._server.gateway = self
        self._client = None
        self._thread: Optional[threading.Thread] = None

    # --- the server ----------------------------------------------------------------

    @property
    def root_url(self) -> str:
        """The server's address without ``/v1`` (Anthropic clients' base URL)."""
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def base_url(self) -> str:
        """The base URL OpenAI clients are given: ``http://127.0.0.1:PORT/v1``."""
        return self.root_url + "/v1"

    def start(self) -> "Gateway":
        httpx = _httpx()
        self._client = httpx.Client(timeout=httpx.Timeout(self._timeout, connect=10.0),
                                    verify=ssl_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")))
        self._thread = threading.Thread(target=self._server.serve_forever, kwargs={"poll_interval": 0.05},
                                        name="logist-gateway", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._thread is not None:
            self._server.shutdown()
            self._thread = None
        self._server.server_close()
        if self._client is not None:
            self._client.close()

    def __enter__(self) -> "Gateway":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # --- what a request may do ------------------------------------------------------

    def authorised(self, headers) -> bool:
        given = headers.get("x-api-key") or ""
        bearer = headers.get("authorization") or ""
        if bearer[:7].lower() == "bearer ":
            given = given or bearer[7:].strip()
        return bool(given) and hmac.compare_digest(given.encode("utf-8"), self.token.encode("utf-8"))

    def _admit(self) -> tuple[Optional[str], int]:
        """Why this call is refused (None: forwarded), and its number."""
        with self._lock:
            if self.refusal is None and self._budget is not None:
                self.refusal = self._budget(self.totals) or None
            if self.refusal is not None:
                self.refused += 1
                return self.refusal, 0
            self.totals = replace(self.totals, calls=self.totals.calls + 1)
            self._numbers += 1
            return None, self._numbers

    def _recorded(self, exchange: Exchange, raw: bytes) -> None:
        """Count the call's usage and hand it to ``record`` (its exceptions propagate).

        What the endpoint sent was cleaned as it came (:meth:`_clean`); the
        agent's request (``raw``) is looked through here."""
        if self._secret_in(raw.decode("utf-8", "replace")):
            exchange = replace(exchange, request=redact_data(exchange.request, self._secrets),
                               upstream_request=redact_data(exchange.upstream_request, self._secrets))
        exchange.error = redact(exchange.error, self._secrets)
        if exchange.usage is None and exchange.status == 200 and exchange.response is not None:
            # Counted all the same: the job's totals and the budgets the gateway holds go by it.
            estimated = apis.estimated_usage(exchange.upstream_request or exchange.request,
                                             exchange.upstream_response or exchange.response)
            exchange.usage = {**_usage(estimated), "estimated": True}
        with self._recording:
            if exchange.usage:
                with self._lock:
                    self.totals = replace(self.totals, input_tokens=self.totals.input_tokens + exchange.usage["input_tokens"],
                                          output_tokens=self.totals.output_tokens + exchange.usage["output_tokens"])
            if self._record is not None:
                self._record(exchange)

    def _secret_in(self, text: str) -> bool:
        return any(form in text for form in self._forms)

    def _clean(self, text: str) -> str:
        """``text`` from the endpoint, every known secret in it replaced."""
        return redact(text, self._secrets) if self._secret_in(text) else text

    def _cleaned(self, batches: Iterable[list[Event]]) -> Iterator[list[Event]]:
        """The endpoint's events, each one with a secret in it read again from its cleaned text."""
        for batch in batches:
            yield [event if not self._secret_in(event.text) else next(apis.read_events([self._clean(event.text).encode()]))[0]
                   for event in batch]

    # --- upstream --------------------------------------------------------------------

    def _url(self, path: str) -> str:
        return self.upstream + (path[3:] if path.startswith("/v1/") else path)

    def _headers(self, agent_headers, anthropic: bool) -> dict:
        headers = {"content-type": "application/json"}
        for name in KEPT_HEADERS:
            if agent_headers.get(name):
                headers[name] = agent_headers[name]
        if self._key and anthropic:
            headers["x-api-key"] = self._key
            headers.setdefault("anthropic-version", "2023-06-01")
        elif self._key:
            headers["authorization"] = f"Bearer {self._key}"
        return headers

    def models(self, agent_headers) -> dict:
        """The upstream's list of models, or an empty list."""
        try:
            answer = self._client.get(self._url("/v1/models"), headers=self._headers(agent_headers, "x-api-key" in agent_headers))
            listed = answer.json() if answer.status_code == 200 else None
        except Exception:  # noqa: BLE001 - an endpoint with no list: say so by an empty one
            listed = None
        return redact_data(listed, self._secrets) if isinstance(listed, dict) else {"object": "list", "data": []}

    # --- one call --------------------------------------------------------------------

    def call(self, handler: "_Handler", api: Api, raw: bytes) -> None:
        """Forward one call and answer the agent (the handler's POST)."""
        started, clock = time.time(), time.monotonic()
        try:
            body = json.loads(raw)
            if not isinstance(body, dict):
                raise ValueError
        except ValueError:
            handler.send_json(400, apis.error_body(api.name, 400, "the request body is not a JSON object",
                                                   "invalid_request_error"))
            return
        translating = self.mode == CHAT and api.name != apis.CHAT
        streamed = bool(body.get("stream"))
        hide_usage = False
        try:
            if translating:
                upstream_body, path = translate.to_chat(api.name, body), apis.APIS[apis.CHAT].path
                sent = json.dumps(upstream_body).encode("utf-8")
            else:
                upstream_body, path, sent = body, handler.path, raw
                options = body.get("stream_options")
                if api.name == apis.CHAT and streamed and not (isinstance(options, dict) and options.get("include_usage")):
                    # The usage comes only when asked for: asked here, and its chunk kept from the agent.
                    upstream_body = {**body, "stream_options": {**(options or {}), "include_usage": True}}
                    sent, hide_usage = json.dumps(upstream_body).encode("utf-8"), True
        except translate.TranslationError as exc:
            handler.send_json(400, apis.error_body(api.name, 400, str(exc), "invalid_request_error"))
            return
        refusal, number = self._admit()
        if refusal is not None:
            message = f"Logist stopped this run at its budget: {refusal}"
            status = REFUSAL_STATUS[api.name]
            handler.send_json(status, apis.error_body(api.name, status, message, "insufficient_quota", "insufficient_quota"),
                              NO_RETRY)
            return
        exchange = Exchange(number, "POST", handler.path, api.name, self.mode, body, 0, None, started=started,
                            upstream_request=upstream_body if translating else None)
        httpx = _httpx()
        anthropic = api.name == apis.MESSAGES and not translating
        request = self._client.build_request("POST", self._url(path if not translating else "/v1" + path),
                                             content=sent, headers=self._headers(handler.headers, anthropic))
        try:
            answer = self._client.send(request, stream=True)
        except httpx.HTTPError as exc:
            exchange.status, exchange.error = 502, self._clean(f"the model's endpoint could not be reached: {exc}")
            exchange.response = apis.error_body(api.name, 502, exchange.error, "upstream_error")
            exchange.duration = time.monotonic() - clock
            if self._keep(handler, exchange, raw):
                handler.send_json(502, exchange.response)
            return
        handler.passed = {name: self._clean(value) for name, value in answer.headers.items()
                          if name.lower() in PASSED_HEADERS or name.lower().startswith(PASSED_PREFIXES)}
        try:
            kind = answer.headers.get("content-type", "")
            if answer.status_code == 200 and "text/event-stream" in kind:
                source = self._cleaned(apis.read_events(answer.iter_bytes()))
                self._relay_stream(handler, api, exchange, raw, source, translating, hide_usage, clock)
                return
            text = self._clean(answer.read().decode("utf-8", "replace"))
        except httpx.HTTPError as exc:
            exchange.status, exchange.error = 502, self._clean(f"the model's answer broke off: {exc}")
            exchange.response = apis.error_body(api.name, 502, exchange.error, "upstream_error")
            exchange.duration = time.monotonic() - clock
            if self._keep(handler, exchange, raw):
                handler.send_json(502, exchange.response)
            return
        finally:
            answer.close()
        self._relay_whole(handler, api, exchange, raw, answer.status_code, kind, text, translating, streamed, clock)

    def _keep(self, handler: "_Handler", exchange: Exchange, raw: bytes) -> bool:
        """Record ``exchange``; False (and the connection dropped) if that failed."""
        try:
            self._recorded(exchange, raw)
            return True
        except Exception as exc:  # noqa: BLE001 - the agent must not see the end of an unrecorded call
            with self._lock:
                self.unrecorded.append(f"call {exchange.number}: {type(exc).__name__}: {exc}")
            handler.close_connection = True
            return False

    def _relay_whole(self, handler: "_Handler", api: Api, exchange: Exchange, raw: bytes, status: int, kind: str,
                     text: str, translating: bool, streamed: bool, clock: float) -> None:
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        exchange.status = status
        if status == 200 and isinstance(data, dict) and translating:
            exchange.upstream_response = data
            if streamed:  # the endpoint answered a streamed request whole: streamed to the agent all the same
                chunks = [apis.sse(chunk) for chunk in translate.as_chunks(data)] + [apis.sse("[DONE]")]
                self._relay_stream(handler, api, exchange, raw, [chunks], True, False, clock)
                return
            exchange.response = translate.from_chat(api.name, data, exchange.request)
            exchange.usage = _usage(apis.usage_of(apis.CHAT, data))
            text, kind = json.dumps(exchange.response), "application/json"
        elif status == 200 and isinstance(data, dict):
            exchange.response = data
            exchange.usage = _usage(apis.usage_of(api.name, data))
        else:
            message = apis.error_message(data) or text[:2000] or f"HTTP {status}"
            exchange.error = f"the model's endpoint answered {status}: {message}"
            exchange.response = data if isinstance(data, dict) else {"text": text[:2000]}
            if translating and api.name == apis.MESSAGES:
                exchange.response = apis.error_body(api.name, status, message, "api_error")
                text, kind = json.dumps(exchange.response), "application/json"
        exchange.duration = time.monotonic() - clock
        if self._keep(handler, exchange, raw):
            handler.send_bytes(status, text.encode("utf-8"), kind or "application/json")

    def _relay_stream(self, handler: "_Handler", api: Api, exchange: Exchange, raw: bytes,
                      source: Iterable[list[Event]], translating: bool, hide_usage: bool, clock: float) -> None:
        """Pass a stream on as it comes, each network read's events in one write,
        its terminal event held back until the call is recorded."""
        httpx = _httpx()
        translator = translate.stream_from_chat(api.name, exchange.request) if translating else None
        upstream: list[Event] = []  # the endpoint's events (chat mode)
        seen: list[Event] = []  # the agent's API's events, as sent (or held)
        held: list[Event] = []
        handler.start_stream()

        def emit(events: list[Event], last: bool = False) -> None:
            out = []
            for event in events:
                seen.append(event)
                if last or held or event.kind in api.terminal:
                    held.append(event)
                elif not (hide_usage and _usage_only(event)):
                    out.append(event.text)
            if out:
                handler.send_chunk("".join(out).encode("utf-8"))

        fault = None
        try:
            if translator is not None:
                emit(translator.start())
            for batch in source:
                if translator is None:
                    emit(batch)
                    continue
                upstream += batch
                emit([made for event in batch if isinstance(event.data, dict) for made in translator.feed(event.data)])
        except (httpx.HTTPError, translate.TranslationError) as exc:
            fault = f"the model's answer broke off: {exc}"
        except OSError as exc:  # the agent hung up: the endpoint's answer is dropped too
            fault = f"the agent closed the connection: {exc}"
            handler.close_connection = True
        if translator is not None:
            emit(translator.finish(fault), last=True)
        elif fault is None and not any(e.kind in api.terminal for e in seen):
            fault = "the model's stream ended before its answer did"
        exchange.status, exchange.error = 200, fault
        exchange.events = [event.as_record() for event in seen if not (hide_usage and _usage_only(event))]
        exchange.response = apis.reassemble(api.name, seen)
        if translator is not None:
            exchange.upstream_response = apis.reassemble(apis.CHAT, upstream)
            exchange.usage = _usage(apis.usage_of(apis.CHAT, exchange.upstream_response))
        else:
            exchange.usage = _usage(apis.usage_of(api.name, exchange.response))
        exchange.duration = time.monotonic() - clock
        if not self._keep(handler, exchange, raw) or handler.close_connection:
            return
        try:
            shown = [event.text for event in held if not (hide_usage and _usage_only(event))]
            handler.end_stream("".join(shown).encode("utf-8"))
        except OSError:
            handler.close_connection = True


def _usage(usage: Optional[Usage]) -> Optional[dict]:
    return None if usage is None else {"input_tokens": usage.input_tokens, "output_tokens": usage.output_tokens}


def _usage_only(event: Event) -> bool:
    """A Chat chunk that carries only the usage (``choices`` empty)."""
    return isinstance(event.data, dict) and not event.data.get("choices") and "usage" in event.data


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    gateway: Gateway

    def get_request(self):
        # Answers go out in pieces (headers, then events): without TCP_NODELAY
        # each piece waits on the agent's delayed ACK.
        connection, address = super().get_request()
        connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return connection, address

    def handle_error(self, request, client_address):
        if not isinstance(sys.exc_info()[1], (ConnectionResetError, BrokenPipeError)):
            super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    server: _Server
    protocol_version = "HTTP/1.1"
    #: The endpoint's headers this answer passes on (:data:`PASSED_HEADERS`).
    passed: dict = {}

    def log_message(self, format, *args):  # the agent's output is what a person reads
        pass

    # --- answering ----------------------------------------------------------------

    def send_bytes(self, status: int, data: bytes, kind: str = "application/json",
                   headers: Optional[dict] = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(data)))
        for name, value in {**self.passed, **(headers or {})}.items():
            self.send_header(name, value)
        self.end_headers()
        try:
            self.wfile.write(data)
        except OSError:
            self.close_connection = True

    def send_json(self, status: int, body: dict, headers: Optional[dict] = None) -> None:
        self.send_bytes(status, json.dumps(body).encode("utf-8"), headers=headers)

    def start_stream(self) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        for name, value in self.passed.items():
            self.send_header(name, value)
        self.end_headers()

    def send_chunk(self, data: bytes) -> None:
        if data:  # an empty chunk would end the stream
            self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))

    def end_stream(self, data: bytes = b"") -> None:
        """The last of the stream, and its end, in one write."""
        self.wfile.write((b"%x\r\n%s\r\n" % (len(data), data) if data else b"") + b"0\r\n\r\n")

    # --- routes -------------------------------------------------------------------

    def _body(self) -> bytes:
        if "chunked" in (self.headers.get("Transfer-Encoding") or "").lower():
            data = b""
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return data
                data += self.rfile.read(size)
                self.rfile.readline()
        return self.rfile.read(int(self.headers.get("Content-Length") or 0))

    def _api_shape(self) -> Optional[str]:
        anthropic = "x-api-key" in self.headers or "anthropic-version" in self.headers
        return apis.MESSAGES if anthropic or self.path.split("?")[0].endswith("/messages") else None

    def _refuse(self) -> None:
        body = apis.error_body(self._api_shape(), 401, "this gateway takes only the token it gave this run",
                               "invalid_request_error", "invalid_api_key")
        self.send_json(401, body, NO_RETRY)

    def _not_found(self) -> None:
        self.send_json(404, apis.error_body(self._api_shape(), 404, f"no route {self.command} {self.path}",
                                            "invalid_request_error", "not_found"))

    def do_HEAD(self):
        if self.path.split("?")[0] in ("", "/"):
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()
            return
        self.send_response(200 if self.server.gateway.authorised(self.headers) else 401)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_GET(self):
        gateway = self.server.gateway
        if not gateway.authorised(self.headers):
            self._refuse()
        elif self.path.split("?")[0].rstrip("/") in ("/v1/models", "/models"):
            self.send_json(200, gateway.models(self.headers))
        else:
            self._not_found()

    def do_POST(self):
        self.passed = {}
        raw = self._body()  # read first: the connection stays usable whatever the answer
        gateway = self.server.gateway
        if not gateway.authorised(self.headers):
            self._refuse()
            return
        api = apis.api_for_path(self.path)
        if api is None:
            self._not_found()
            return
        gateway.call(self, api, raw)
