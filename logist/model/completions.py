"""Reading a Chat Completions answer from what the endpoint sent: a whole
``chat.completion`` (its JSON body) or the ``chat.completion.chunk``
pieces of a stream, as plain JSON, every shape checked. Anything else is an
:class:`AnswerFault` naming what came (a body that is not JSON, JSON that is
not a chat completion, a piece that is not JSON), in one line with a short
excerpt. :mod:`logist.model.client` sends the request and turns the fault into the
step's recorded failure.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Optional

from ..protocol.forms import surrogates_shown
from ..errors import LLMCallError

#: The most tokens one call is counted as using, in and out each: a count
#: beyond it (10^30 from a broken gateway) would make a cost of $10^23 and
#: spend every budget at once.
MAX_TOKENS_PER_CALL = 10**9
#: How the error of a stream that ended before its answer begins (a hint follows: :func:`logist.model.client.cut_stream_hint`).
STREAM_CUT = "the endpoint's stream ended without finishing the answer"


class AnswerFault(Exception):
    """The endpoint began to answer and the answer is unusable: final, not
    retried (the openai SDK lets anything that is not a transport error
    through, so one raised from the HTTP transport ends the call too)."""


@dataclass
class LLMReply:
    content: str
    prompt_tokens: Optional[int]
    completion_tokens: Optional[int]
    model: Optional[str]
    #: True when the body sent asked for a stream.
    streamed: bool = False
    #: The tool the model called when it answered by function calling (its
    #: arguments are ``content``); None for a plain answer.
    tool: Optional[str] = None
    #: The ``Idempotency-Key`` the answered request was sent with (None: none).
    key: Optional[str] = None
    #: Why the model stopped (``stop``, ``length``, ``tool_calls``...), as the endpoint said; None: it did not say.
    finish_reason: Optional[str] = None
    #: What was made of the usage to count it: a count refused or capped
    #: (the history notes each).
    notes: list[str] = field(default_factory=list)
    #: A coding agent's run that gave this answer (:class:`logist.store.entries.AgentRunRecord`); None: a model's.
    run: Optional[object] = None

    def __post_init__(self) -> None:
        # Here, so that every reply is checked however it was read (whole or streamed).
        self.prompt_tokens = _counted("prompt_tokens", self.prompt_tokens, self.notes)
        self.completion_tokens = _counted("completion_tokens", self.completion_tokens, self.notes)


def excerpt(raw, content_type: str = "") -> str:
    """A short, one-line look at a body that could not be read as an answer."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, (bytes, bytearray)) else str(raw)
    shown = " ".join(text.split())
    shown = shown if len(shown) <= 80 else shown[:77] + "..."
    kind = f"{content_type}, " if content_type else ""
    return f"{kind}{len(raw):,} bytes: {shown!r}" if shown else f"{kind}{len(raw):,} bytes, all blank"


def bad(what: str) -> AnswerFault:
    return AnswerFault(f"the endpoint answered HTTP 200 with {what}")


def answer_json(response) -> dict:
    """A whole answer's body as a chat completion's JSON (its shape checked)."""
    raw = response.read()
    content_type = response.headers.get("content-type", "").split(";")[0].strip()
    try:
        data = json.loads(raw)
    except ValueError:
        raise bad(f"a body that is not JSON ({excerpt(raw, content_type)})") from None
    if isinstance(data, dict) and "choices" not in data and isinstance(data.get("error"), (dict, str)):
        raise bad(f"an error: {error_text(data['error'])}")
    if not isinstance(data, dict) or not isinstance(data.get("choices"), list):
        raise bad(f"JSON that is not a chat completion ({excerpt(raw)})")
    return data


def text_of(value, what: str) -> str:
    """A message's content: a string, null, or a list of text parts. A lone
    surrogate in it (an escape such as ``\\ud800`` in the endpoint's JSON)
    is no text UTF-8 can hold: it is kept as that escape, so the answer is
    recorded as it came (and refused if it is in one of its strings)."""
    if value is None or isinstance(value, str):
        return surrogates_shown(value or "")
    if isinstance(value, list) and all(isinstance(part, dict) for part in value):
        return surrogates_shown("".join(str(part.get("text") or "") for part in value))
    raise bad(f"{what} that is not text ({type(value).__name__})")


def tokens(usage) -> tuple[Optional[int], Optional[int]]:
    """The usage's two counts as the endpoint sent them; None for one that
    is missing or not an integer. :class:`LLMReply` bounds them."""
    if not isinstance(usage, dict):
        return None, None
    found = [usage.get(name) for name in ("prompt_tokens", "completion_tokens")]
    return tuple(n if isinstance(n, int) and not isinstance(n, bool) else None for n in found)  # type: ignore[return-value]


#: The figures an endpoint's error object may carry besides its message
#: (llama.cpp: the request's tokens and its context size), said after it.
ERROR_FIGURES = (("n_prompt_tokens", "the request's tokens"), ("n_ctx", "the server's context size"))


def error_text(error) -> str:
    """An endpoint's error (a string, or an object with a message: OpenAI's,
    llama.cpp's, vLLM's) in its own words on one line, cut at 300
    characters, with llama.cpp's figures where it gives them."""
    message = error.get("message") if isinstance(error, dict) else error
    said = re.sub(r"\s*[\r\n]+\s*", " ", str(message or error)).strip()  # one line; its own spacing kept
    if isinstance(error, dict) and message:
        figures = [f"{words} {error[key]:,}" for key, words in ERROR_FIGURES
                   if isinstance(error.get(key), int) and not isinstance(error.get(key), bool)]
        said += f" ({', '.join(figures)})" if figures else ""
    return said[:300]
def _counted(name: str, count: Optional[int], notes: list[str]) -> Optional[int]:
    """A usage count as it is counted: a negative one is refused (the tokens
    are estimated instead), one beyond :data:`MAX_TOKENS_PER_CALL` is capped;
    each noted."""
    if count is None or 0 <= count <= MAX_TOKENS_PER_CALL:
        return count
    digits = int(abs(count).bit_length() * 0.30103) + 1  # str() of a 5,000-digit int raises
    shown = f"{count:,}" if digits <= 40 else f"{'-' if count < 0 else ''}a number of about {digits:,} digits"
    if count < 0:
        notes.append(f"the endpoint reported {shown} {name}, which is no count; it was estimated instead")
        return None
    notes.append(f"the endpoint reported {shown} {name}; counted as {MAX_TOKENS_PER_CALL:,}, "
                 "the most one call is counted as using")
    return MAX_TOKENS_PER_CALL


def whole(data: dict, streamed: bool) -> LLMReply:
    """An answer that came in one piece, from its JSON."""
    if not data["choices"]:
        if data.get("error"):
            raise bad(f"an error and no answer: {error_text(data['error'])}")
        raise bad(f"a chat completion with no choices ({excerpt(json.dumps(data))})")
    first = data["choices"][0]
    message = first.get("message") if isinstance(first, dict) else None
    if not isinstance(message, dict):
        raise bad(f"a chat completion whose first choice has no message ({excerpt(json.dumps(first))})")
    content, tool = text_of(message.get("content"), "a message"), None
    calls = message.get("tool_calls") or []
    function = calls[0].get("function") if isinstance(calls, list) and calls and isinstance(calls[0], dict) else None
    if not content.strip() and isinstance(function, dict):
        content, tool = text_of(function.get("arguments"), "tool call arguments"), str(function.get("name") or "?")
    prompt_tokens, completion_tokens = tokens(data.get("usage"))
    model = data.get("model")
    finish = first.get("finish_reason")
    return LLMReply(content=content, prompt_tokens=prompt_tokens,
                    completion_tokens=completion_tokens, model=model if isinstance(model, str) else None,
                    streamed=streamed, tool=tool, finish_reason=finish if isinstance(finish, str) else None)


def chunks(stream) -> Iterator[dict]:
    """A stream's pieces as JSON objects; one that is not is an AnswerFault."""
    pieces = iter(stream)
    while True:
        try:
            chunk = next(pieces)
        except StopIteration:
            return
        except ValueError as exc:  # json.JSONDecodeError: .doc is the piece
            raise bad(f"a streamed piece that is not JSON ({excerpt(getattr(exc, 'doc', ''))})") from None
        if not isinstance(chunk, dict):
            raise bad(f"a streamed piece that is not a chat completion chunk ({excerpt(json.dumps(chunk))})")
        yield chunk


def check_size(reply: LLMReply, limit: Optional[int], complete: bool = True) -> LLMReply:
    """``reply``; over ``limit`` bytes (``max_answer_bytes``), an
    :class:`~logist.errors.LLMCallError` whose ``reply`` holds the answer's
    first ``limit`` bytes (``complete``: the whole answer was read, so its
    size is known)."""
    data = reply.content.encode("utf-8")
    if limit is None or len(data) <= limit:
        return reply
    reply.content = data[:limit].decode("utf-8", errors="ignore")
    told = f"it is {len(data):,} bytes" if complete else "it went past it (the rest was not read)"
    raise LLMCallError(
        f"the answer was refused: the limit is {limit:,} bytes and {told} (max_answer_bytes; "
        f"logist job set --max-answer-bytes N raises it); its first {len(reply.content.encode()):,} bytes are kept",
        reply)


def joined(pieces: Iterable[dict], on_tokens: Optional[Callable[[int], None]] = None,
           limit: Optional[int] = None) -> LLMReply:
    """A streamed answer: its ``chat.completion.chunk`` pieces joined, each
    piece's count told to ``on_tokens``. Past ``limit`` bytes it reads no
    further (:func:`check_size` refuses it); a stream that ends before its
    ``finish_reason``, or an error sent in it, is an :class:`~logist.errors.LLMCallError`."""
    text: list[str] = []
    arguments: list[str] = []
    tool: Optional[str] = None
    usage = model = finish = None
    count = size = 0
    seen_choice = False
    for chunk in pieces:
        if chunk.get("error") and not chunk.get("choices"):
            # The server failed while it was answering (llama.cpp: the request did not fit its context).
            raise LLMCallError(f"the endpoint failed while answering: {error_text(chunk['error'])}", kind="failed")
        model = chunk.get("model") or model
        usage = chunk.get("usage") or usage
        choices = chunk.get("choices") or []
        for choice in choices if isinstance(choices, list) else []:
            delta = choice.get("delta") if isinstance(choice, dict) else None
            if choice.get("index", 0) != 0 or not isinstance(delta, dict):
                continue
            seen_choice = True
            if isinstance(choice.get("finish_reason"), str):
                finish = choice["finish_reason"]
            piece = text_of(delta.get("content"), "a streamed piece")
            if piece:
                text.append(piece)
                count += 1
                size += len(piece.encode("utf-8"))
            for call in delta.get("tool_calls") or []:
                function = call.get("function") if isinstance(call, dict) else None
                if call.get("index", 0) != 0 or not isinstance(function, dict):
                    continue
                tool = function.get("name") or tool
                if function.get("arguments"):
                    arguments.append(text_of(function["arguments"], "tool call arguments"))
                    count += 1
                    size += len(arguments[-1].encode("utf-8"))
        if on_tokens is not None:
            on_tokens(count)
        if limit is not None and size > limit:  # not read further: the answer is refused either way
            return check_size(LLMReply("".join(text) or "".join(arguments), *tokens(usage), model, True),
                              limit, complete=False)
    if not seen_choice or finish is None:
        # No finish_reason: the stream ended before the answer did (the
        # endpoint's fault, not the model's answer), or it never began.
        got = f"{size:,} bytes of answer" if seen_choice else "no answer"
        reply = LLMReply("".join(text) or "".join(arguments), *tokens(usage), None, True)
        raise LLMCallError(f"{STREAM_CUT} ({got}, no finish_reason)",
                           reply if reply.content else None, kind="transient")
    content = "".join(text)
    if not content.strip() and tool is not None:
        content = "".join(arguments)
    else:
        tool = None
    prompt_tokens, completion_tokens = tokens(usage)
    return LLMReply(content=content, prompt_tokens=prompt_tokens, completion_tokens=completion_tokens,
                    model=model if isinstance(model, str) else None, streamed=True, tool=tool, finish_reason=finish)
