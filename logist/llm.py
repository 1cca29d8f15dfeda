"""The one module that talks to the model, through the ``openai`` SDK.

``openai`` is imported only when a call is made, and one client is built per
process and endpoint (:func:`client`): building one loads the SSL
certificates, which costs more than the rest of a step.

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
it is remembered for the process (:func:`streams`), so its later calls go
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

import threading
from dataclasses import dataclass, field
from typing import Callable, Optional

from .completions import AnswerFault, LLMReply, answer_json, chunks, text_of, tokens, whole
from .errors import LLMCallError
#: The header that names a call, the same on each of its retries (one definition: :mod:`logist.store.calls`).
from .store.calls import HEADER as IDEMPOTENCY_HEADER
from .store.calls import encoded_body

#: The body keys that ask for a stream (one definition: store/requests.py adds them).
STREAM_KEYS = ("stream", "stream_options")
#: What an endpoint that does not stream answers a streamed request with.
_STREAM_REFUSED = (400, 404, 415, 422, 501)


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

#: One client per (endpoint, key) for the life of the process (the last
#: :data:`KEEP_CLIENTS` endpoints used: a long-lived process that talks to
#: many, such as a test session, does not keep a connection to each).
_CLIENTS: dict[tuple[str, Optional[str]], object] = {}
KEEP_CLIENTS = 8
#: Steps run on threads (``job run --all --engine threads``) share the clients.
_CLIENTS_LOCK = threading.Lock()
#: Endpoints found, in this process, not to stream.
_PLAIN: set[str] = set()


def scrub(text: str, secret: Optional[str]) -> str:
    """Remove the key from anything an endpoint sent back (error bodies can
    echo it), since what comes back is recorded and printed."""
    if secret and len(secret) >= 4 and text:
        return text.replace(secret, "[redacted]")
    return text


def streams(base_url: str) -> bool:
    """False once ``base_url`` was found, in this process, not to stream."""
    return base_url not in _PLAIN


def without_stream(body: dict) -> dict:
    return {key: value for key, value in body.items() if key not in STREAM_KEYS}


def _httpx():
    try:
        import httpx2 as httpx  # the SDK's HTTP library from openai 3 on
    except ImportError:  # pragma: no cover - older SDKs use httpx
        import httpx
    return httpx


def _transport():
    """An HTTP transport that reports a read timeout as ``APITimeoutError``,
    which the SDK raises as it is: a read timeout is not retried (module doc),
    and a connection that fails once the answer began as an AnswerFault."""
    import openai

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
            self._stream.close()

    class ReadTimeoutsAreFinal(httpx.HTTPTransport):
        def handle_request(self, request):
            try:
                response = super().handle_request(request)
            except httpx.ReadTimeout as exc:
                raise openai.APITimeoutError(request=request) from exc
            response.stream = _Guarded(response.stream, request)
            return response

    return ReadTimeoutsAreFinal()


def _broke_off(exc: Exception) -> str:
    name = type(exc).__name__
    if name == "ReadError" or isinstance(exc.__context__ or exc.__cause__, ConnectionResetError):
        what = "the connection was reset while the answer was being received"
    else:
        what = "the connection was closed before the whole answer was received"
    return f"{what} ({name}); not sent again, as the answer had begun"


def client(base_url: str, api_key: Optional[str]):
    """The process's client for ``base_url`` (built on first use)."""
    key = (base_url, api_key)
    with _CLIENTS_LOCK:
        if key not in _CLIENTS:
            import openai

            while len(_CLIENTS) >= KEEP_CLIENTS:
                _CLIENTS.pop(next(iter(_CLIENTS))).close()
            _CLIENTS[key] = openai.OpenAI(
                base_url=base_url, api_key=api_key or NO_KEY,
                http_client=openai.DefaultHttpxClient(transport=_transport()),
            )
        else:
            _CLIENTS[key] = _CLIENTS.pop(key)  # the most recently used last
        return _CLIENTS[key]


def _attempts(exc: Exception, settings: LLMSettings) -> int:
    """How many times the request was sent, as the retry rules say (the
    replay server replays a failure at once, so it is not counted off the
    wire: a recording and its replay must say the same)."""
    import openai

    if isinstance(exc, openai.APIStatusError):
        retried = exc.status_code in (408, 409, 429) or exc.status_code >= 500
    elif isinstance(exc, openai.APITimeoutError):
        retried = type(exc.__cause__).__name__ != "ReadTimeout"  # a connect timeout is retried
    else:
        retried = isinstance(exc, openai.APIConnectionError)
    return settings.max_retries + 1 if retried else 1


def _describe(exc: Exception, settings: LLMSettings) -> str:
    import openai

    if isinstance(exc, openai.APITimeoutError):
        return (f"the request timed out: no answer within {settings.timeout:g} s, not sent again "
                f"(request_timeout in config.json or --request-timeout raises the limit)")
    if isinstance(exc, openai.APIConnectionError):
        cause = exc.__cause__ or exc
        name = type(cause).__name__
        if name in ("ReadError", "RemoteProtocolError", "WriteError"):
            # Connected and sent; no answer began (a reset mid-answer is an AnswerFault).
            return f"the connection was reset or closed before an answer came ({name})"
        return f"cannot connect ({name})"
    if isinstance(exc, openai.APIStatusError):
        detail = ""
        body = exc.body
        if isinstance(body, dict):
            inner = body.get("error", body)
            if isinstance(inner, dict):
                detail = str(inner.get("message") or "")
            elif isinstance(inner, str):
                detail = inner
        hint = ""
        if exc.status_code == 401:
            hint = " (set LOGIST_API_KEY or OPENAI_API_KEY)"
        return f"HTTP {exc.status_code}{': ' + detail[:300] if detail else ''}{hint}"
    return f"{type(exc).__name__}: {exc}"


def _failure(exc: Exception, settings: LLMSettings) -> LLMCallError:
    attempts = _attempts(exc, settings)
    message = f"LLM call failed after {attempts} attempt{'s' if attempts > 1 else ''}: {_describe(exc, settings)}"
    return LLMCallError(scrub(message, settings.api_key))


def _check_size(reply: LLMReply, settings: LLMSettings, complete: bool = True) -> LLMReply:
    """``reply``; over ``max_answer_bytes``, an :class:`~logist.errors.LLMCallError`
    whose ``reply`` holds the answer's first bytes (``complete``: the whole
    answer was read, so its size is known)."""
    limit = settings.max_answer_bytes
    data = reply.content.encode("utf-8")
    if limit is None or len(data) <= limit:
        return reply
    reply.content = scrub(data[:limit].decode("utf-8", errors="ignore"), settings.api_key)
    told = f"it is {len(data):,} bytes" if complete else "it went past it (the rest was not read)"
    raise LLMCallError(
        f"the answer was refused: the limit is {limit:,} bytes and {told} (max_answer_bytes; "
        f"logist job set --max-answer-bytes N raises it); its first {len(reply.content.encode()):,} bytes are kept",
        reply)


def _read_stream(stream, settings: LLMSettings, on_tokens: Optional[Callable[[int], None]]) -> LLMReply:
    """Join a streamed answer's pieces; a whole answer sent instead is read as one."""
    if "text/event-stream" not in stream.response.headers.get("content-type", ""):
        _PLAIN.add(settings.base_url)
        try:
            return whole(answer_json(stream.response), streamed=True)
        finally:
            stream.close()
    text: list[str] = []
    arguments: list[str] = []
    tool: Optional[str] = None
    usage = model = None
    pieces = size = 0
    seen_choice = False
    limit = settings.max_answer_bytes
    for chunk in chunks(stream):
        model = chunk.get("model") or model
        usage = chunk.get("usage") or usage
        choices = chunk.get("choices") or []
        for choice in choices if isinstance(choices, list) else []:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if choice.get("index", 0) != 0 or not isinstance(delta, dict):
                continue
            seen_choice = True
            piece = text_of(delta.get("content"), "a streamed piece")
            if piece:
                text.append(piece)
                pieces += 1
                size += len(piece.encode("utf-8"))
            for call in delta.get("tool_calls") or []:
                function = call.get("function") if isinstance(call, dict) else None
                if call.get("index", 0) != 0 or not isinstance(function, dict):
                    continue
                tool = function.get("name") or tool
                if function.get("arguments"):
                    arguments.append(text_of(function["arguments"], "tool call arguments"))
                    pieces += 1
                    size += len(arguments[-1].encode("utf-8"))
        if on_tokens is not None:
            on_tokens(pieces)
        if limit is not None and size > limit:
            stream.close()  # not read further: the answer is refused either way
            return _check_size(LLMReply("".join(text) or "".join(arguments), *tokens(usage), model, True),
                               settings, complete=False)
    if not seen_choice:
        raise LLMCallError("LLM call returned no choices")
    content = "".join(text)
    if not content.strip() and tool is not None:
        content = "".join(arguments)
    else:
        tool = None
    prompt_tokens, completion_tokens = tokens(usage)
    return LLMReply(content=scrub(content, settings.api_key), prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens, model=model if isinstance(model, str) else None,
                    streamed=True, tool=tool)


def chat(settings: LLMSettings, body: dict, on_tokens: Optional[Callable[[int], None]] = None,
         key_for: Optional[Callable[[dict], str]] = None) -> LLMReply:
    """One Chat Completions call of ``body`` as given (see
    :func:`logist.engine.prepare.prepare`), with the SDK's bounded retries;
    streamed when ``body`` asks for it and the endpoint streams.

    ``on_tokens(n)``: called as a streamed answer arrives, with the pieces
    (about one token each) received so far. ``key_for(body)``: the
    ``Idempotency-Key`` of the body sent (none sent without it).

    The error message names neither the endpoint nor the key: it is
    recorded as the step's reason, and a resubmitted job shows that reason
    to the model, which has no business knowing where it is served from
    (and a recording replays against another port). The CLI adds the
    endpoint where a person reads the error.
    """
    import openai

    httpx = _httpx()
    api = client(settings.base_url, settings.api_key)
    wants_stream = bool(body.get("stream"))
    if wants_stream and not streams(settings.base_url):
        body, wants_stream = without_stream(body), False

    def options(sent: dict) -> dict:
        found = {"timeout": settings.timeout, "max_retries": settings.max_retries}
        headers = dict(settings.headers)
        if key_for is not None:
            headers[IDEMPOTENCY_HEADER] = key_for(sent)
        if headers:
            found["headers"] = headers
        return found

    try:
        if wants_stream:
            try:
                # The body as it is, encoded here: the SDK's create() would
                # walk and re-validate every message first, and its post()
                # would encode the whole body again at every call; both cost
                # more than the rest of a step once a turn is long.
                sent = body
                stream = api.post("/chat/completions", content=encoded_body(sent), cast_to=object,
                                  options=options(sent),
                                  stream=True, stream_cls=openai.Stream[object])
                reply = _read_stream(stream, settings, on_tokens)
            except openai.APIStatusError as exc:
                if exc.status_code not in _STREAM_REFUSED or "stream" not in str(exc.body or exc.message).lower():
                    raise
                # Perhaps it does not stream: ask once without (not paid: it was refused).
                sent = without_stream(body)
                response = api.post("/chat/completions", content=encoded_body(sent), cast_to=httpx.Response,
                                    options=options(sent))
                _PLAIN.add(settings.base_url)
                reply = whole(answer_json(response), streamed=False)
        else:
            sent = body
            response = api.post("/chat/completions", content=encoded_body(sent), cast_to=httpx.Response,
                                options=options(sent))
            reply = whole(answer_json(response), streamed=False)
    except openai.OpenAIError as exc:
        raise _failure(exc, settings) from None
    except AnswerFault as exc:
        raise LLMCallError(scrub(f"LLM call failed after 1 attempt: {exc}", settings.api_key)) from None
    reply.content = scrub(reply.content, settings.api_key)
    reply.key = key_for(sent) if key_for is not None else None
    return _check_size(reply, settings)


def list_models(settings: LLMSettings) -> list[str]:
    """The model names the endpoint's ``GET /models`` lists, sorted."""
    import openai

    api = client(settings.base_url, settings.api_key)
    try:
        page = api.with_options(max_retries=0).models.list(timeout=settings.timeout)
        return sorted(str(model.id) for model in page.data)
    except openai.OpenAIError as exc:
        raise _failure(exc, settings) from None
