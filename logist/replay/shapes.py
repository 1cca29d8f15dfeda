"""Chat Completions answers as OpenAI shapes them: a whole ``chat.completion``
and the ``chat.completion.chunk`` pieces of a streamed one, with ``usage``
(estimated from the text when a test gives none), and :class:`Reply`, what
a script says one answer is. The scripted server (:mod:`logist.replay.scripted`)
sends them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from threading import Event
from typing import Optional, Union


@dataclass
class Reply:
    content: Optional[str] = None
    status: int = 200
    #: Seconds to wait before answering; the wait ends early (and nothing is
    #: sent) when the client closes the connection, as a timed-out one does.
    delay: float = 0.0
    #: With ``delay`` (or ``piece_delay``): an event (``threading.Event``)
    #: that ends the wait as soon as it is set, and the answer (or the rest of
    #: its pieces) is sent; a test sets it once it has seen what it waits for
    #: while the call is in flight, instead of waiting out a delay long enough
    #: for the slowest machine.
    release: Optional[Event] = None
    #: ``{"prompt_tokens": N, "completion_tokens": M}``; None = estimated from
    #: the text (4 characters a token); ``False`` = no usage in the answer.
    usage: Union[dict, None, bool] = None
    error_message: str = "scripted failure"
    error_type: str = "scripted_error"
    #: Extra response headers; an error reply without them carries
    #: ``retry-after-ms: 10`` so that the client's retries are quick.
    headers: dict = field(default_factory=dict)
    #: Close the connection without answering (the client sees a dropped
    #: connection).
    disconnect: bool = False
    #: Send the content as the arguments of a call of this tool (function
    #: calling) instead of as the message's content.
    tool_call: Optional[str] = None
    #: Streamed: the content in this many pieces, and seconds between them.
    pieces: int = 4
    piece_delay: float = 0.0
    #: Raw faults. ``body``: these bytes are the whole answer (with
    #: ``status`` and ``content_type``), whatever was asked for, e.g. an HTML
    #: page or ``b"data: {oops\n\n"`` as ``text/event-stream``.
    body: Optional[bytes] = None
    content_type: str = "application/json"
    #: Send only the answer's first this many bytes (of the body, or of the
    #: stream's chunked frames), then close the connection; with ``reset``,
    #: reset it (TCP RST) instead.
    break_after: Optional[int] = None
    reset: bool = False



def estimate_usage(messages: list, content: str) -> dict:
    prompt_chars = sum(len(m.get("content") or "") for m in messages)
    return {
        "prompt_tokens": max(1, prompt_chars // 4),
        "completion_tokens": max(1, len(content) // 4),
        "total_tokens": max(1, prompt_chars // 4) + max(1, len(content) // 4),
    }


def _usage(request: dict, content: str, usage: Union[dict, None, bool]) -> Optional[dict]:
    if usage is False:
        return None
    usage = dict(usage or estimate_usage(request.get("messages") or [], content))
    usage.setdefault("total_tokens", (usage.get("prompt_tokens") or 0) + (usage.get("completion_tokens") or 0))
    return usage


def _tool_call(name: str, arguments: str, with_id: bool = True) -> dict:
    call = {"index": 0, "type": "function", "function": {"name": name, "arguments": arguments}}
    return {**call, "id": "call_logist_0"} if with_id else call


def completion_body(request: dict, content: str, usage: Union[dict, None, bool], number: int,
                    tool_call: Optional[str] = None) -> dict:
    """A Chat Completions answer, as OpenAI shapes it."""
    message: dict = {"role": "assistant", "content": content}
    if tool_call:
        message = {"role": "assistant", "content": None, "tool_calls": [_tool_call(tool_call, content)]}
        del message["tool_calls"][0]["index"]
    answer = {
        "id": f"chatcmpl-logist-{number}",
        "object": "chat.completion",
        "created": 0,
        "model": request.get("model", "logist"),
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if tool_call else "stop"}],
    }
    usage = _usage(request, content, usage)
    if usage is not None:
        answer["usage"] = usage
    return answer


def stream_chunks(request: dict, reply: "Reply", number: int) -> list[dict]:
    """A streamed Chat Completions answer: its ``chat.completion.chunk`` pieces."""
    content = reply.content or ""
    base = {"id": f"chatcmpl-logist-{number}", "object": "chat.completion.chunk", "created": 0,
            "model": request.get("model", "logist")}
    size = max(1, -(-len(content) // max(1, reply.pieces)))
    parts = [content[i:i + size] for i in range(0, len(content), size)] or [""]
    chunks = [{**base, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}, "finish_reason": None}]}]
    for i, part in enumerate(parts):
        if reply.tool_call:
            delta = {"tool_calls": [_tool_call(reply.tool_call, part, with_id=i == 0)]}
            if i:
                del delta["tool_calls"][0]["type"], delta["tool_calls"][0]["function"]["name"]
        else:
            delta = {"content": part}
        chunks.append({**base, "choices": [{"index": 0, "delta": delta, "finish_reason": None}]})
    chunks.append({**base, "choices": [{"index": 0, "delta": {}, "finish_reason": "tool_calls" if reply.tool_call else "stop"}]})
    usage = _usage(request, content, reply.usage)
    if usage is not None and (request.get("stream_options") or {}).get("include_usage"):
        chunks.append({**base, "choices": [], "usage": usage})
    return chunks
