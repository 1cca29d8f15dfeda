"""The one module that talks to the model, through the ``openai`` SDK.

``openai`` is imported only when a call is made, and one client is built per
endpoint by the :class:`Endpoints` the calls share (its owner: a
:class:`logist.api.Jobs`, a ``logist`` command's run): building one loads
the SSL certificates, which costs more than the rest of a step.

Retries are the SDK's own, configured, not patched: it retries connection
failures, connect timeouts, 408, 409, 429 and 5xx with exponential backoff
and honours ``Retry-After``; Logist bounds the count (``max_retries`` in
config.json). A *read* timeout (the endpoint had the whole request and sent
nothing for ``request_timeout`` seconds) is never sent again: the model may
still be working on it, and a paid call is not made twice. The client's
HTTP transport reports such a timeout as the SDK's own
``APITimeoutError``, which the SDK raises at once instead of retrying.
When a call fails it raises :class:`~logist.errors.LLMCallError` with one
line saying what happened and, for a timeout, which setting raises the
limit; the API key never appears in it, nor does the endpoint.

Streaming: a body that asks for a stream (``"stream": true``, see
:func:`logist.store.requests.request_body`) is read piece by piece, each
piece reported to ``on_tokens``, and the pieces joined into the whole
answer. An endpoint that refuses a stream (HTTP 400, 404, 415, 422 or 501
to a streamed request, with an error that mentions "stream") is asked
again once without it, and an endpoint that
answers a streamed request with a whole answer is read as such; either way
it is remembered (:meth:`Endpoints.streams`), so its later calls go
out plain. :attr:`LLMReply.streamed` says what the body sent was.

Faults after the endpoint began to answer are final, never sent again (the
answer was being paid for) and named: a connection reset or closed while
the answer was being received, an HTTP 200 whose body is not JSON or not a
chat completion, a streamed piece that is not JSON. Each is one line of
:class:`~logist.errors.LLMCallError`, recorded as the step's failed call.
An answer longer than ``max_answer_bytes`` is refused the same way; the
error's ``reply`` holds its first ``max_answer_bytes`` bytes (a stream is
not read past them), so the history keeps it once, cut, with its size.

What is sent is decided elsewhere: :func:`chat` sends the request body it is
given, key for key (less the stream fields when the endpoint does not
stream), so ``job preview --json`` shows what goes out.

Each request carries an ``Idempotency-Key`` header (``key_for(body)``, see
:mod:`logist.store.calls`): the SDK's retries of a request resend its
headers, so every retry of a call carries the same key, and a gateway that
honours the header charges for the call once. A request asked again
without the stream fields is another body, so it gets its own key (a
gateway must not answer it with the refusal it keeps for the first).
"""

from __future__ import annotations

import json
import os
import re
import threading
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from typing import Callable, Optional, Union

from .agent import AgentModel, AgentTask
from .base import Model, Request, failed_after, status_kind, status_retried, status_text
from .tls import httpx as _httpx, ssl_context as _ssl_context
from .completions import (STREAM_CUT, AnswerFault, LLMReply, answer_json, check_size, chunks, error_text, excerpt,
                          joined, whole)
from ..protocol.decoding import form_name, response_formats
from ..errors import LLMCallError
from ..secrets.redact import url_passwords
#: The header that names a call, the same on each of its retries (one definition: :mod:`logist.store.calls`).
from ..store.calls import HEADER as IDEMPOTENCY_HEADER
from ..store.config import key_variable
from ..secrets import environment

#: The body keys that ask for a stream (one definition: store/requests.py adds them).
STREAM_KEYS = ("stream", "stream_options")
#: What an endpoint that does not stream answers a streamed request with.
_STREAM_REFUSED = (400, 404, 415, 422, 501)


class Endpoints:
    """What calls learn of their endpoints, for as long as its owner lives:
    a client per endpoint and key, the endpoints found not to stream, the
    response_format forms each refused and answered, what each told of its
    models. :func:`logist.api.open` makes one per :class:`~logist.api.Jobs`
    and each ``logist`` command one for its run (closed with it); every
    :class:`LLMSettings` carries the one its calls use (a new one when none
    is given: nothing learned outlives those settings). Steps on threads
    (``job run --all --engine threads``) share one.

    It is also where a call's model is found (:meth:`model_for`): the
    :class:`~logist.model.base.Model` its owner was given (``model``: an
    in-memory one, another source of answers), else the endpoint the call's
    settings name (:class:`OpenAICompatible`)."""

    #: The clients kept: the last this many endpoints used (a long-lived
    #: owner that talks to many does not keep a connection to each).
    KEEP_CLIENTS = 8

    def __init__(self, model: Optional[Model] = None) -> None:
        #: The model every call of this owner is made to (None: each call's endpoint).
        self.model = model
        self._clients: dict[tuple[str, Optional[str]], object] = {}
        self._clients_lock = threading.Lock()
        #: Endpoints found not to stream.
        self.plain: set[str] = set()
        #: Endpoint -> the response_format forms (:func:`logist.protocol.decoding.form_name`) it refused.
        self.refused: dict[str, set[str]] = {}
        #: (endpoint, form) pairs an endpoint answered.
        self.proven: set[tuple[str, str]] = set()
        #: (endpoint, model) -> its facts, found once.
        self.facts: dict[tuple[str, str], "EndpointFacts"] = {}
        self.facts_lock = threading.Lock()
        #: Endpoint -> the calls to it in flight now (:meth:`in_flight`).
        self._flying: dict[str, list[set]] = {}
        #: Endpoint -> the models it lists, or None: it did not say (:meth:`served_models`).
        self._served: dict[str, Optional[list[str]]] = {}

    def model_for(self, settings: "LLMSettings", agent: Optional[AgentTask] = None) -> Model:
        """Who answers a call made with ``settings``: the model given, else the
        role's coding agent (``agent``: its run of this step, through a gateway
        to the endpoint), else the endpoint's model."""
        if self.model is not None:
            return self.model
        if agent is not None:
            return AgentModel(agent, settings.base_url, settings.api_key, settings.timeout)
        return OpenAICompatible(settings)

    def client(self, base_url: str, api_key: Optional[str]):
        """The client for ``base_url`` (built on first use)."""
        key = (base_url, api_key)
        with self._clients_lock:
            if key not in self._clients:
                openai = sdk()

                while len(self._clients) >= self.KEEP_CLIENTS:
                    self._clients.pop(next(iter(self._clients))).close()
                self._clients[key] = openai.OpenAI(
                    base_url=base_url, api_key=api_key or NO_KEY,
                    http_client=openai.DefaultHttpxClient(transport=_transport()),
                )
            else:
                self._clients[key] = self._clients.pop(key)  # the most recently used last
            return self._clients[key]

    def streams(self, base_url: str) -> bool:
        """False once ``base_url`` was found not to stream."""
        return base_url not in self.plain

    def usable_formats(self, base_url: str, formats: list) -> list:
        """``formats`` less those ``base_url`` refused (the last always kept)."""
        refused = self.refused.get(base_url, set())
        kept = [f for f in formats if form_name(f) not in refused]
        return kept or formats[-1:]

    def learn_window(self, base_url: str, model: str, error: str) -> Optional[int]:
        """The window an endpoint's error names ("... exceed context window of
        2048", llama-cpp-python), remembered; None if it names none."""
        match = re.search(r"context (?:window|length|size) of (\d+)", error or "") or \
            re.search(r"maximum context length is (\d+)", error or "") or \
            re.search(r"the server's context size ([\d,]+)", error or "")
        if not match:
            return None
        with self.facts_lock:
            facts = self.facts.setdefault((base_url, model), EndpointFacts())
            facts.context_window, facts.window_from = int(match.group(1).replace(",", "")), "its error"
        return facts.context_window

    def served_models(self, settings: "LLMSettings") -> Optional[list[str]]:
        """The models ``settings``' endpoint lists (``GET /models``), asked
        once; None when it does not answer with a list (unknown)."""
        with self.facts_lock:
            if settings.base_url in self._served:
                return self._served[settings.base_url]
        try:
            served: Optional[list[str]] = list_models(replace(settings, timeout=min(settings.timeout, FACTS_TIMEOUT),
                                                              max_retries=0))
        except LLMCallError:
            served = None
        with self.facts_lock:
            self._served[settings.base_url] = served
        return served

    @contextmanager
    def in_flight(self, base_url: str):
        """Around one call to ``base_url``: yields a set that holds ``base_url``
        once another call to it was in flight at the same time (a server that
        interrupts a request for a newer one cuts the first: :func:`cut_stream_hint`)."""
        overlapped: set = set()
        with self.facts_lock:
            flying = self._flying.setdefault(base_url, [])
            if flying:
                overlapped.add(base_url)
                for other in flying:
                    other.add(base_url)
            flying.append(overlapped)
        try:
            yield overlapped
        finally:
            with self.facts_lock:
                self._flying[base_url] = [o for o in self._flying[base_url] if o is not overlapped]

    def close(self) -> None:
        """Close the clients (their connections); what was learned is kept."""
        with self._clients_lock:
            while self._clients:
                self._clients.popitem()[1].close()


@dataclass
class LLMSettings:
    base_url: str
    api_key: Optional[str]
    timeout: float = 30.0
    max_retries: int = 3
    #: Answers longer than this (UTF-8 bytes of the content) are refused; None: no limit.
    max_answer_bytes: Optional[int] = None
    #: Extra request headers (:data:`JOB_HEADER`).
    headers: dict = field(default_factory=dict)
    #: What the calls made with these settings learn of their endpoints (and the clients).
    endpoints: Endpoints = field(default_factory=Endpoints, repr=False, compare=False)


#: The header that names the job a request is for. Prompts do not name the
#: job, so a server that serves many jobs at once (the replay server) tells
#: them apart by it; other endpoints ignore it.
JOB_HEADER = "X-Logist-Job"



#: What a history entry's note says of an answer sent as a tool call (the
#: replay server reads the tool's name back from it).
TOOL_NOTE = "the answer came as a call of tool '{}'; its arguments were read as the answer"


# Local servers (Ollama, vLLM, LM Studio) accept any key; the SDK insists on
# one, so a fixed placeholder is sent when none is configured.
NO_KEY = "no-key-set"



def scrub(text: str, secret: Optional[str]) -> str:
    """Remove the key from anything an endpoint sent back (error bodies can
    echo it), since what comes back is recorded and printed."""
    if secret and len(secret) >= 4 and text:
        return text.replace(secret, "[redacted]")
    return text


def without_stream(body: dict) -> dict:
    return {key: value for key, value in body.items() if key not in STREAM_KEYS}


def sdk():
    """The ``openai`` SDK, imported by the first call that needs it: it takes
    about 0.35 s to import, and most commands make no call."""
    import openai  # lazy: see the docstring

    return openai


def _transport():
    """An HTTP transport that reports a read timeout as ``APITimeoutError``,
    which the SDK raises as it is: a read timeout is not retried (module doc),
    and a connection that fails once the answer began as an AnswerFault."""
    openai = sdk()

    httpx = _httpx()

    class _Guarded(httpx.SyncByteStream):
        def __init__(self, stream, request):
            self._stream, self._request = stream, request

        def __iter__(self):
            try:
                yield from self._stream
            except httpx.ReadTimeout as exc:
                raise openai.APITimeoutError(request=self._request) from exc
            except httpx.TransportError as exc:  # headers came: the model was answering
                raise AnswerFault(_broke_off(exc)) from None

        def close(self) -> None:
            _take_the_end(self._stream)
            self._stream.close()

    class ReadTimeoutsAreFinal(httpx.HTTPTransport):
        def handle_request(self, request):
            try:
                response = super().handle_request(request)
            except httpx.ReadTimeout as exc:
                raise openai.APITimeoutError(request=request) from exc
            response.stream = _Guarded(response.stream, request)
            return response

    return ReadTimeoutsAreFinal(verify=_ssl_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR")))


def _take_the_end(stream) -> None:
    """Take a streamed answer's end of body (HTTP/1.1's last, empty chunk)
    when it has arrived already, so that closing the response gives its
    connection back to the client's pool. The SDK stops reading at the
    answer's last event (``data: [DONE]``) and closes the response there,
    one read before the body's end: the connection was then closed, and
    the next call opened another (a TCP connect, and for an https endpoint
    a TLS handshake, at every call). Only what was received is looked at:
    nothing is waited for, and a body that goes on, or anything unexpected,
    leaves the connection to be closed as before."""
    try:
        connection = stream._httpcore_stream._stream._connection
        state, lock = connection._h11_state, connection._state_lock
        import h11  # httpcore's, as it is the transport's
    except (AttributeError, ImportError):
        return
    with lock:
        try:
            if state.their_state is h11.SEND_BODY and isinstance(state.next_event(), h11.EndOfMessage):
                return  # their side is DONE: the connection goes back to the pool
        except h11.ProtocolError:
            pass


def _broke_off(exc: Exception) -> str:
    name = type(exc).__name__
    if name == "ReadError" or isinstance(exc.__context__ or exc.__cause__, ConnectionResetError):
        what = "the connection was reset while the answer was being received"
    else:
        what = "the connection was closed before the whole answer was received"
    return f"{what} ({name}); not sent again, as the answer had begun"


def _retried(exc: Exception) -> bool:
    """Whether the SDK's retry rules send ``exc``'s request again: 408, 409,
    429, 5xx, connection failures and connect timeouts (a read timeout never)."""
    openai = sdk()

    if isinstance(exc, openai.APIStatusError):
        return status_retried(exc.status_code)
    if isinstance(exc, openai.APITimeoutError):
        return type(exc.__cause__).__name__ != "ReadTimeout"  # a connect timeout is retried
    return isinstance(exc, openai.APIConnectionError)


def _attempts(exc: Exception, settings: LLMSettings) -> int:
    """How many times the request was sent, as the retry rules say (the
    replay server replays a failure at once, so it is not counted off the
    wire: a recording and its replay must say the same)."""
    return settings.max_retries + 1 if _retried(exc) else 1


def _kind(exc: Exception) -> str:
    """What kind of failure ``exc`` is (:data:`logist.errors.FAULTS`): nothing
    could be asked (no server there, the key or the URL refused), a failure
    for now (what the SDK retries, and a read timeout), or any other."""
    openai = sdk()

    if isinstance(exc, openai.APIConnectionError) and not isinstance(exc, openai.APITimeoutError):
        name = type(exc.__cause__ or exc).__name__
        if name in ("ConnectError", "UnsupportedProtocol", "LocalProtocolError", "InvalidURL"):
            return "setup"
    if isinstance(exc, openai.APIStatusError):
        return status_kind(exc.status_code)
    return "transient" if _retried(exc) or isinstance(exc, openai.APITimeoutError) else "failed"


def _describe(exc: Exception, settings: LLMSettings) -> str:
    openai = sdk()

    if isinstance(exc, openai.APITimeoutError):
        return (f"the request timed out: no answer within {settings.timeout:g} s, not sent again "
                f"(request_timeout in config.json or --request-timeout raises the limit)")
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        name = type(cause).__name__
        if name in ("ReadError", "RemoteProtocolError", "WriteError"):
            # Connected and sent; no answer began (a reset mid-answer is an AnswerFault).
            return f"the connection was reset or closed before an answer came ({name})"
        if name == "ConnectError":
            reason = str(cause).lower()
            told = "connection refused" if "refused" in reason else " ".join(str(cause).split())[:120] or name
            return f"cannot connect: {told} (is the server running?)"
        return f"cannot connect ({name})"
    if isinstance(exc, openai.APIStatusError):
        return status_text(exc.status_code, endpoint_words(exc.body), settings.base_url, _key_from(settings))
    if isinstance(exc, openai.APIError):  # an error object sent inside a stream (llama.cpp: the request did not fit)
        return f"the endpoint sent an error instead of the answer: {endpoint_words(exc.body) or exc.message}"
    return f"{type(exc).__name__}: {exc}"


def _key_from(settings: LLMSettings) -> Optional[str]:
    """The variable the key sent was read from ("": given otherwise; None: no key was sent)."""
    if not settings.api_key:
        return None
    variable = key_variable()
    return variable if variable and environment.get(variable) == settings.api_key else ""


def endpoint_words(body) -> str:
    """What an endpoint said in an error body, in its own words
    (:func:`~logist.model.completions.error_text`): an OpenAI error object
    (llama.cpp's, vLLM's ``{"object": "error", "message": ...}``), Ollama's
    ``{"error": "..."}``, a plain string; "" when it said nothing."""
    inner = body.get("error", body) if isinstance(body, dict) else body
    if isinstance(inner, dict) and not inner.get("message"):
        return ""
    return error_text(inner) if isinstance(inner, (dict, str)) and inner else ""


def _failure(exc: Exception, settings: LLMSettings) -> LLMCallError:
    message = scrub(failed_after(_attempts(exc, settings), _describe(exc, settings)), settings.api_key)
    # An endpoint refusing credentials may say back the password of its own
    # URL (given by --base-url or config.json, so no known secret).
    for password in url_passwords(settings.base_url):
        message = scrub(message, password)
    return LLMCallError(message, kind=_kind(exc))


def _check_size(reply: LLMReply, settings: LLMSettings, complete: bool = True) -> LLMReply:
    """``reply``; over ``max_answer_bytes``, the refusal of :func:`~logist.model.completions.check_size`
    (the part kept scrubbed of the key)."""
    try:
        return check_size(reply, settings.max_answer_bytes, complete)
    except LLMCallError as exc:
        exc.reply.content = scrub(exc.reply.content, settings.api_key)
        raise


def _read_stream(stream, settings: LLMSettings, on_tokens: Optional[Callable[[int], None]]) -> LLMReply:
    """Join a streamed answer's pieces (:func:`~logist.model.completions.joined`);
    a whole answer sent instead is read as one."""
    if "text/event-stream" not in stream.response.headers.get("content-type", ""):
        settings.endpoints.plain.add(settings.base_url)
        try:
            return whole(answer_json(stream.response), streamed=True)
        finally:
            stream.close()
    try:
        reply = joined(chunks(stream), on_tokens, settings.max_answer_bytes)
    except LLMCallError as exc:
        stream.close()  # not read further: the answer is refused either way
        if exc.reply is not None:
            exc.reply.content = scrub(exc.reply.content, settings.api_key)
        raise LLMCallError(scrub(str(exc), settings.api_key), exc.reply, kind=exc.kind) from None
    reply.content = scrub(reply.content, settings.api_key)
    return reply


def _refuses_format(exc: Exception) -> bool:
    """The endpoint refused the request's response_format (400/422, or a
    500 from a server that failed on it: llama-cpp-python's validation)."""
    openai = sdk()

    if not isinstance(exc, openai.APIStatusError) or exc.status_code not in (400, 422, 500, 501):
        return False
    error = exc.body.get("error", exc.body) if isinstance(exc.body, dict) else None
    if isinstance(error, dict) and str(error.get("type") or "").startswith("replay_"):
        return False  # Logist's replay server: the request is not the recorded one (it names where it differs)
    said = f"{exc.body or ''} {exc.message}".lower()
    return any(word in said for word in ("response_format", "json_schema", "grammar"))


def chat(settings: LLMSettings, body: dict, on_tokens: Optional[Callable[[int], None]] = None,
         key_for: Optional[Callable[[dict], str]] = None, formats: Optional[list] = None,
         encoded: Optional[Callable[[dict], bytes]] = None) -> LLMReply:
    """One Chat Completions call of ``body`` as given (see
    :func:`logist.engine.prepare.prepare`), with the SDK's bounded retries;
    streamed when ``body`` asks for it and the endpoint streams.

    ``on_tokens(n)``: called as a streamed answer arrives, with the pieces
    (about one token each) received so far. ``key_for(body)``: the
    ``Idempotency-Key`` of the body sent (none sent without it).
    ``encoded(body)``: the bytes the body is sent as (the key is their
    digest: encoded once, for both); without it the SDK encodes the body.
    ``formats``: the ``response_format`` values the body may carry,
    strongest first, the body carrying the first; an endpoint that refuses
    one is asked again with the next (not paid: it was refused), and what
    it refused is remembered (:meth:`Endpoints.usable_formats`). A
    form not yet seen accepted here is sent once without retries, so that
    a server that fails on it with a 500 (llama-cpp-python) is not retried
    first; any other failure is then sent again with the retries left.

    The error message names neither the endpoint nor the key: it is
    recorded as the step's reason, and a resubmitted job shows that reason
    to the model, which has no business knowing where it is served from
    (and a recording replays against another port). The CLI adds the
    endpoint where a person reads the error.
    """
    openai = sdk()

    endpoints = settings.endpoints
    api = endpoints.client(settings.base_url, settings.api_key)
    wants_stream = bool(body.get("stream"))
    if wants_stream and not endpoints.streams(settings.base_url):
        body, wants_stream = without_stream(body), False
    formats = list(formats) if formats else [body.get("response_format")]
    while True:
        form = form_name(formats[0])
        probing = len(formats) > 1 and (settings.base_url, form) not in endpoints.proven
        try:
            reply, sent = _send(api, settings, body, wants_stream, on_tokens, key_for, encoded,
                                retries=0 if probing else settings.max_retries)
        except openai.OpenAIError as exc:
            refused = _refuses_format(exc)
            if refused and len(formats) > 1:
                endpoints.refused.setdefault(settings.base_url, set()).add(form)
                formats = formats[1:]
                body = with_format(body, formats[0])
                continue
            if refused:
                raise LLMCallError(scrub(f"the endpoint refused the response_format {form} "
                                         f"({_describe(exc, settings)}); set structured_output to another form "
                                         "(auto tries each) in the role or in config.json's model_settings",
                                         settings.api_key), kind="setup") from None
            if not (probing and _retried(exc) and settings.max_retries > 0):
                raise _failure(exc, settings) from None
            # A failure for now, not a refusal: the retries the first send did not make.
            try:
                reply, sent = _send(api, settings, body, wants_stream, on_tokens, key_for, encoded,
                                    retries=settings.max_retries - 1)
            except openai.OpenAIError as again:
                raise _failure(again, settings) from None
            except AnswerFault as again:  # not caught by the clause below: raised while handling
                raise LLMCallError(scrub(f"LLM call failed: {again}", settings.api_key)) from None
        except AnswerFault as exc:
            raise LLMCallError(scrub(f"LLM call failed after 1 attempt: {exc}", settings.api_key)) from None
        break
    endpoints.proven.add((settings.base_url, form))
    reply.content = scrub(reply.content, settings.api_key)
    reply.key = key_for(sent) if key_for is not None else None
    return _check_size(reply, settings)


class OpenAICompatible(Model):
    """An OpenAI-compatible endpoint (``settings.base_url``) as a
    :class:`~logist.model.base.Model`: :func:`chat` and what the endpoint
    tells of its models, what it learns kept by ``settings.endpoints``."""

    def __init__(self, settings: LLMSettings):
        self.settings = settings

    def complete(self, request: Request) -> LLMReply:
        settings = replace(self.settings, headers=request.headers, max_answer_bytes=request.max_answer_bytes)
        with settings.endpoints.in_flight(settings.base_url) as overlapped:
            try:
                return chat(settings, request.body, request.on_tokens, request.key_for, request.formats,
                            request.encoded)
            except LLMCallError as exc:
                if not str(exc).startswith(STREAM_CUT):
                    raise
                hinted = f"{exc}; {cut_stream_hint(settings, request.body, bool(overlapped))}"
                raise LLMCallError(hinted, exc.reply, kind=exc.kind) from None

    def ready(self) -> None:
        self.settings.endpoints.client(self.settings.base_url, self.settings.api_key)

    def streams(self) -> bool:
        return self.settings.endpoints.streams(self.settings.base_url)

    def usable_formats(self, formats: list) -> list:
        return self.settings.endpoints.usable_formats(self.settings.base_url, formats)

    def context_window(self, model: str) -> tuple[Optional[int], str]:
        facts = endpoint_facts(self.settings, model)
        return (facts.context_window, facts.window_from) if facts.context_window else (None, "")

    def count_tokens(self, model: str, text: Union[str, Callable[[], str]]) -> Optional[int]:
        return count_tokens(self.settings, model, text)

    def learn_window(self, model: str, error: str) -> Optional[int]:
        return self.settings.endpoints.learn_window(self.settings.base_url, model, error)


def cut_stream_hint(settings: LLMSettings, body: dict, overlapped: bool) -> str:
    """Why a stream may have ended before its answer, as far as can be
    found: the request against the window the endpoint says it has (asked
    once per endpoint and model; a failed question is "unknown"), and
    another call to the same endpoint during this one. Servers often end a
    stream without a word (llama-cpp-python's says why in its log only)."""
    causes = []
    facts = endpoint_facts(settings, str(body.get("model") or ""))
    window = facts.context_window
    text = sum(len(m.get("content") or "") for m in body.get("messages") or [] if isinstance(m.get("content"), str))
    tokens, budget = -(-text // 4), int(body.get("max_tokens") or 0)
    if window and (tokens + budget) * 1.25 > window:  # an estimate (4 characters a token): near is enough
        causes.append(f"the request (about {tokens:,} tokens, and max_tokens {budget:,}) may not fit the server's "
                      f"context window of {window:,} tokens ({facts.window_from}): raise the server's context size, "
                      f"or set context_window in config.json's model_settings so that Logist sizes the request for it")
    if overlapped:
        causes.append("another request to the same endpoint was in flight at the same time: a server that "
                      "interrupts a request for a newer one (llama-cpp-python's interrupt_requests, on by default) "
                      "ends the first; run one job at a time against it, or start it with --interrupt_requests False")
    if not causes:
        return ("the server's log says why (the usual causes: a request over its context window, or one "
                "interrupted by another request)")
    return "likely " + ("cause: " if len(causes) == 1 else "causes: ") + "; and ".join(causes)


def with_format(body: dict, response_format: Optional[dict]) -> dict:
    """``body`` with ``response_format`` in its place (left out for None).
    A body that may be sent another form has one already (the strongest), so
    the key keeps its place in the body."""
    out = dict(body)
    if response_format is None:
        out.pop("response_format", None)
    else:
        out["response_format"] = response_format
    return out


def _send(api, settings: LLMSettings, body: dict, wants_stream: bool, on_tokens, key_for, encoded,
          retries: int) -> tuple[LLMReply, dict]:
    """One send of ``body`` (and, for a stream the endpoint refuses, once
    more without it) through :func:`_post`; the reply and the body it
    answered."""
    openai = sdk()

    if wants_stream:
        try:
            stream = _post(api, settings, body, key_for, encoded, retries, stream=True)
            return _read_stream(stream, settings, on_tokens), body
        except openai.APIStatusError as exc:
            if exc.status_code not in _STREAM_REFUSED or _refuses_format(exc) or \
                    "stream" not in str(exc.body or exc.message).lower():
                raise
            # Perhaps it does not stream: ask once without (not paid: it was refused).
            sent = without_stream(body)
            response = _post(api, settings, sent, key_for, encoded, retries)
            settings.endpoints.plain.add(settings.base_url)
            return whole(answer_json(response), streamed=False), sent
    return whole(answer_json(_post(api, settings, body, key_for, encoded, retries)), streamed=False), body


def _post(api, settings: LLMSettings, sent: dict, key_for, encoded, retries: int, stream: bool = False):
    """``POST /chat/completions`` of ``sent`` as it is, through the SDK's
    documented lower-level request path (``client.post``), as its typed
    ``chat.completions.create`` sends one less the typed transform, which
    walks every message of the body (a cost that grows with the turn):
    the SDK's retries (``retries`` of them), timeout and errors; the body
    as the bytes ``encoded(sent)`` gives (its key is their digest: encoded
    once), else encoded by the SDK (the same bytes: its ``openapi_dumps`` is
    :func:`~logist.store.atomic.compact_json`'s rule). The answer as it arrived: a whole one as the HTTP
    response, unread beyond its headers' checks (read as JSON by
    :func:`~logist.model.completions.answer_json`), a streamed one as the
    SDK's ``Stream`` of JSON pieces."""
    openai = sdk()

    headers = dict(settings.headers)
    if key_for is not None:
        headers[IDEMPOTENCY_HEADER] = key_for(sent)
    options = {"timeout": settings.timeout, "max_retries": retries, "security": {"bearer_auth": True}}
    if headers:
        options["headers"] = headers
    sending = {"content": encoded(sent)} if encoded is not None else {"body": sent}
    if stream:
        return api.post("/chat/completions", **sending, options=options, cast_to=object,
                        stream=True, stream_cls=openai.Stream[object])
    return api.post("/chat/completions", **sending, options=options, cast_to=_httpx().Response)


def list_models(settings: LLMSettings) -> list[str]:
    """The model names the endpoint's ``GET /models`` lists, sorted; an
    :class:`~logist.errors.LLMCallError` naming what came instead of a list
    (a web page, JSON of another shape)."""
    openai = sdk()

    httpx = _httpx()
    api = settings.endpoints.client(settings.base_url, settings.api_key)
    try:
        response = api.get("/models", cast_to=httpx.Response, options={"timeout": settings.timeout, "max_retries": 0})
        raw = response.read()
    except openai.OpenAIError as exc:
        raise _failure(exc, settings) from None
    except AnswerFault as exc:
        raise LLMCallError(f"GET /models failed: {exc}") from None
    content_type = response.headers.get("content-type", "").split(";")[0].strip()
    if "html" in content_type or raw.lstrip()[:1] == b"<":
        ask = ("is it the API's address?" if settings.base_url.rstrip("/").endswith("/v1")
               else "does the base URL end in /v1?")
        raise LLMCallError("the base URL serves a web page, not the API (GET /models answered "
                           f"{excerpt(raw, content_type)}): {ask}", kind="setup")
    try:
        data = json.loads(raw)
    except ValueError:
        raise LLMCallError(f"GET /models answered a body that is not JSON ({excerpt(raw, content_type)})") from None
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        raise LLMCallError(f"GET /models answered JSON that is not a list of models ({excerpt(raw, content_type)})")
    return sorted(str(entry.get("id")) for entry in entries if isinstance(entry, dict) and entry.get("id") is not None)


def probe_form(settings: LLMSettings, model: str, setting: str = "auto") -> Optional[dict]:
    """The strongest structured-output form the endpoint takes for ``model``
    (:func:`logist.protocol.decoding.response_formats`), found by one tiny call of at
    most 16 tokens (``logist doctor --probe``); None: it takes none."""
    schema = {"type": "object", "properties": {"ok": {"type": "boolean"}}, "required": ["ok"],
              "additionalProperties": False}
    formats = response_formats(setting, schema)
    body = {"model": model, "messages": [{"role": "user", "content": 'Answer with {"ok": true}'}], "max_tokens": 16,
            "response_format": formats[0]}
    chat(settings, {k: v for k, v in body.items() if v is not None}, formats=formats)
    return settings.endpoints.usable_formats(settings.base_url, formats)[0]


# --------------------------------------------------------------------------
# What an endpoint tells of its model, where it tells: the context window and
# a tokenizer. Local servers do (llama.cpp, vLLM, Ollama); hosted APIs do
# not, and their models' windows are in Logist's table instead.

#: Seconds to wait for an endpoint's answer about itself (never a model call).
FACTS_TIMEOUT = 5.0
#: Ollama's num_ctx when a model sets none (its default since 0.6): what it
#: really uses, whatever window the model itself has.
OLLAMA_DEFAULT_NUM_CTX = 4096


@dataclass
class EndpointFacts:
    """What an endpoint told of one of its models."""

    context_window: Optional[int] = None
    #: Where the window was read: "/props" (llama.cpp), "/v1/models" (vLLM), "/api/show" (Ollama).
    window_from: str = ""
    #: How its tokenizer is asked ("llama-cpp-python", "llama.cpp", "vllm"), or None: it has none.
    tokenizer: Optional[str] = None
    tokenizer_probed: bool = False


def root_url(base_url: str) -> str:
    """The server's root: ``base_url`` less a trailing ``/v1``."""
    url = base_url.rstrip("/")
    return url[:-3] if url.endswith("/v1") else url


def _ask(settings: LLMSettings, method: str, url: str, payload: Optional[dict] = None) -> Optional[object]:
    """The JSON an endpoint answers a request about itself with, or None
    (any failure: these are hints, never needed)."""
    openai = sdk()

    httpx = _httpx()
    api = settings.endpoints.client(settings.base_url, settings.api_key)
    try:
        call = api.get if method == "GET" else api.post
        extra = {} if payload is None else {"body": payload}
        response = call(url, cast_to=httpx.Response, options={"timeout": FACTS_TIMEOUT, "max_retries": 0}, **extra)
        return response.json()
    except (openai.OpenAIError, ValueError, AnswerFault):
        return None


def _int(value) -> Optional[int]:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _window(settings: LLMSettings, model: str) -> tuple[Optional[int], str]:
    root = root_url(settings.base_url)
    props = _ask(settings, "GET", f"{root}/props")
    if isinstance(props, dict):
        found = _int(props.get("n_ctx")) or _int((props.get("default_generation_settings") or {}).get("n_ctx"))
        if found:
            return found, "/props"
    models = _ask(settings, "GET", f"{settings.base_url.rstrip('/')}/models")
    if isinstance(models, dict) and isinstance(models.get("data"), list):
        for entry in models["data"]:
            if isinstance(entry, dict) and entry.get("id") == model and _int(entry.get("max_model_len")):
                return entry["max_model_len"], "/v1/models"
    show = _ask(settings, "POST", f"{root}/api/show", {"model": model})
    if isinstance(show, dict) and isinstance(show.get("model_info"), dict):
        parameters = str(show.get("parameters") or "")
        for line in parameters.splitlines():
            name, _, value = line.strip().partition(" ")
            if name == "num_ctx" and value.strip().isdigit():
                return int(value.strip()), "/api/show"
        lengths = [_int(v) for k, v in show["model_info"].items() if str(k).endswith(".context_length")]
        trained = next((n for n in lengths if n), None)
        return min(trained or OLLAMA_DEFAULT_NUM_CTX, OLLAMA_DEFAULT_NUM_CTX), "/api/show"
    return None, ""


def endpoint_facts(settings: LLMSettings, model: str, *, window: bool = True) -> EndpointFacts:
    """What the endpoint tells of ``model`` (asked once per
    :class:`Endpoints`). ``window=False``: not asked for its window (it is
    known otherwise)."""
    key = (settings.base_url, model)
    with settings.endpoints.facts_lock:
        facts = settings.endpoints.facts.setdefault(key, EndpointFacts())
        if window and not facts.window_from:
            facts.context_window, facts.window_from = _window(settings, model)
            facts.window_from = facts.window_from or "none"
        return facts


def count_tokens(settings: LLMSettings, model: str, text: Union[str, Callable[[], str]]) -> Optional[int]:
    """The tokens ``text`` is to the endpoint's own tokenizer, where it has
    one (llama-cpp-python's /extras/tokenize/count, llama.cpp's and vLLM's
    /tokenize); None where it has none. ``text``: the text, or what makes it,
    called only when there is a tokenizer to ask (a request's text is the
    whole turn's)."""
    facts = endpoint_facts(settings, model, window=False)
    if facts.tokenizer_probed and not facts.tokenizer:
        return None  # it has none: nothing to ask, no text to make
    if callable(text):
        text = text()
    root = root_url(settings.base_url)
    ways = {
        "llama-cpp-python": ("/extras/tokenize/count", {"input": text, "model": model}),
        "llama.cpp": ("/tokenize", {"content": text}),
        "vllm": ("/tokenize", {"model": model, "prompt": text}),
    }
    tried = [facts.tokenizer] if facts.tokenizer_probed else list(ways)
    for name in tried:
        path, payload = ways[name]
        answer = _ask(settings, "POST", root + path, payload)
        count = None
        if isinstance(answer, dict):
            count = _int(answer.get("count"))
            if count is None and isinstance(answer.get("tokens"), list):
                count = len(answer["tokens"])
        if count is not None or (isinstance(answer, dict) and answer.get("count") == 0):
            with settings.endpoints.facts_lock:
                facts.tokenizer, facts.tokenizer_probed = name, True
            return count or 0
    with settings.endpoints.facts_lock:
        if not facts.tokenizer_probed:
            facts.tokenizer_probed = True
    return None
