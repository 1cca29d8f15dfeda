"""The three model APIs coding agents speak, as the recording gateway
(:mod:`logist.model.gateway`) reads them: OpenAI Chat Completions
(aider, Qwen Code, opencode), OpenAI Responses (Codex) and Anthropic
Messages (Claude Code).

Pure: no sockets, no files. For each API, by :class:`Api`:

* which path it is posted to, and which of its stream events ends a stream
  (:attr:`Api.terminal`: the gateway holds that event back until the call
  is recorded, so that an agent never sees the end of a call that could be
  lost);
* how a stream is put back together into the one object a non-streamed
  call would have returned (:func:`reassemble`): what the record keeps;
* where its usage is (:func:`usage_of`): Chat ``usage.prompt_tokens`` /
  ``completion_tokens``; Responses ``usage.input_tokens`` / ``output_tokens``;
  Messages ``usage.input_tokens`` (plus the cache's ``cache_creation_input_tokens``
  and ``cache_read_input_tokens``, which are input too) / ``output_tokens``,
  from ``message_start`` and ``message_delta`` when streamed;
* how an error is shaped (:func:`error_body`), so that an agent shows the
  gateway's refusal as it shows its provider's own.

Server-sent events are read and written here too (:func:`read_events`,
:func:`sse`): Chat streams ``data:`` lines ending in ``data: [DONE]``;
Responses and Messages name each event (``event: response.completed``).
"""

from __future__ import annotations

import codecs
import json
from dataclasses import dataclass
from typing import Iterable, Iterator, Optional

CHAT = "chat"
RESPONSES = "responses"
MESSAGES = "messages"


@dataclass(frozen=True)
class Api:
    name: str
    #: The path under the base URL (``/v1``) a call is posted to.
    path: str
    #: The stream events that end a stream (a Chat stream's ``[DONE]``).
    terminal: frozenset


APIS = {
    CHAT: Api(CHAT, "/chat/completions", frozenset({"[DONE]"})),
    RESPONSES: Api(RESPONSES, "/responses",
                   frozenset({"response.completed", "response.failed", "response.incomplete", "error"})),
    MESSAGES: Api(MESSAGES, "/messages", frozenset({"message_stop", "error"})),
}


def api_for_path(path: str) -> Optional[Api]:
    """The API a request path (``/v1/messages?beta=true``) is a call of, or None."""
    route = path.split("?", 1)[0].rstrip("/")
    for api in APIS.values():
        if route.endswith(api.path):
            return api
    return None


# --- server-sent events ------------------------------------------------------

@dataclass
class Event:
    """One server-sent event: its name (None for Chat's unnamed ones), its
    data (parsed JSON, or the text ``[DONE]``), and its text as received."""
    name: Optional[str]
    data: object
    text: str

    @property
    def kind(self) -> Optional[str]:
        """What the event is: Chat's ``[DONE]``, else its name or its data's ``type``."""
        if self.data == "[DONE]":
            return "[DONE]"
        if self.name:
            return self.name
        return self.data.get("type") if isinstance(self.data, dict) else None

    def as_record(self) -> dict:
        return {"event": self.name, "data": self.data} if self.name else {"data": self.data}


def sse(data: object, name: Optional[str] = None) -> Event:
    """An event to send: ``data`` (a dict, or ``"[DONE]"``) under ``name``."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False, separators=(",", ":"))
    text = (f"event: {name}\n" if name else "") + f"data: {payload}\n\n"
    return Event(name, data, text)


class EventReader:
    """Server-sent events from the lines of a stream, as they come.

    Comment lines (``: keep-alive``) are kept in the event's text and
    otherwise ignored; data that is not JSON is kept as text (a fault the
    agent's own client will report)."""

    def __init__(self) -> None:
        self._lines: list[str] = []

    def feed(self, line: str) -> Optional[Event]:
        """One line (without its end); an event when ``line`` ended one."""
        if line:
            self._lines.append(line)
            return None
        return self._flush()

    def close(self) -> Optional[Event]:
        """The last event, if the stream ended without a blank line after it."""
        return self._flush()

    def _flush(self) -> Optional[Event]:
        lines, self._lines = self._lines, []
        if not lines:
            return None
        name, data = None, []
        for line in lines:
            field, _, value = line.partition(":")
            value = value[1:] if value.startswith(" ") else value
            if field == "event":
                name = value
            elif field == "data":
                data.append(value)
        text = "\n".join(lines) + "\n\n"
        if not data:
            return Event(name, None, text)
        raw = "\n".join(data)
        try:
            parsed: object = json.loads(raw)
        except ValueError:
            parsed = raw
        return Event(name, parsed, text)


def read_events(pieces: Iterable[bytes]) -> Iterator[list[Event]]:
    """The events of a stream arriving in ``pieces`` (as the network gives
    them), a list per piece: what one piece completed is passed on together."""
    reader = EventReader()
    decoder = codecs.getincrementaldecoder("utf-8")("replace")
    rest = ""
    for piece in pieces:
        rest += decoder.decode(piece)
        *whole, rest = rest.split("\n")
        batch = [event for event in (reader.feed(line.rstrip("\r")) for line in whole) if event is not None]
        if batch:
            yield batch
    rest += decoder.decode(b"", final=True)
    batch = [event for event in (reader.feed(line.rstrip("\r")) for line in rest.split("\n")) if event is not None]
    last = reader.close()
    if last is not None:
        batch.append(last)
    if batch:
        yield batch


# --- usage -------------------------------------------------------------------

@dataclass(frozen=True)
class Usage:
    """The tokens of one call: what went in and what came out."""
    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: "Usage") -> "Usage":
        return Usage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens)


def _int(value: object) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _text(value: object) -> str:
    """Every string of a JSON value (its keys left out), joined."""
    if isinstance(value, str):
        return value
    if isinstance(value, dict):
        return "".join(_text(item) for item in value.values())
    if isinstance(value, list):
        return "".join(_text(item) for item in value)
    return ""


def estimated_usage(request: Optional[dict], response: Optional[dict]) -> Usage:
    """A call's tokens where its endpoint reported none (llama-cpp-python's
    server sends no usage in a stream, even when asked): 4 characters a
    token, rounded up, of the text it was sent and of the text it answered,
    as Logist estimates a model's call without usage."""
    return Usage(-(-len(_text(request)) // 4), -(-len(_text(response)) // 4))


def usage_of(api: str, response: Optional[dict]) -> Optional[Usage]:
    """The usage a response object of ``api`` reports, or None if it reports none."""
    usage = (response or {}).get("usage")
    if not isinstance(usage, dict):
        return None
    if api == CHAT:
        return Usage(_int(usage.get("prompt_tokens")), _int(usage.get("completion_tokens")))
    if api == MESSAGES:
        cached = _int(usage.get("cache_creation_input_tokens")) + _int(usage.get("cache_read_input_tokens"))
        return Usage(_int(usage.get("input_tokens")) + cached, _int(usage.get("output_tokens")))
    return Usage(_int(usage.get("input_tokens")), _int(usage.get("output_tokens")))


# --- a stream put back together ------------------------------------------------

def reassemble(api: str, events: Iterable[Event]) -> Optional[dict]:
    """The object a non-streamed call of ``api`` would have returned, from its
    stream's events (None when they hold nothing to build it from)."""
    builder = {CHAT: _chat, RESPONSES: _responses, MESSAGES: _messages}[api]
    return builder([e for e in events if isinstance(e.data, dict)])


def _chat(events: list[Event]) -> Optional[dict]:
    if not events:
        return None
    first = events[0].data
    whole: dict = {"id": first.get("id"), "object": "chat.completion", "created": first.get("created"),
                   "model": first.get("model"), "choices": []}
    choices: dict[int, dict] = {}
    for event in events:
        chunk = event.data
        if chunk.get("usage"):
            whole["usage"] = chunk["usage"]
        for choice in chunk.get("choices") or []:
            index = choice.get("index", 0)
            slot = choices.setdefault(index, {"index": index, "message": {"role": "assistant", "content": None},
                                              "finish_reason": None, "_calls": {}})
            delta = choice.get("delta") or {}
            message = slot["message"]
            for key in ("content", "reasoning_content", "refusal"):
                if delta.get(key):
                    message[key] = (message.get(key) or "") + delta[key]
            for call in delta.get("tool_calls") or []:
                kept = slot["_calls"].setdefault(call.get("index", 0), {"id": None, "type": "function",
                                                                       "function": {"name": "", "arguments": ""}})
                if call.get("id"):
                    kept["id"] = call["id"]
                function = call.get("function") or {}
                kept["function"]["name"] += function.get("name") or ""
                kept["function"]["arguments"] += function.get("arguments") or ""
            if choice.get("finish_reason"):
                slot["finish_reason"] = choice["finish_reason"]
    for index in sorted(choices):
        slot = choices[index]
        calls = slot.pop("_calls")
        if calls:
            slot["message"]["tool_calls"] = [calls[i] for i in sorted(calls)]
        whole["choices"].append(slot)
    return whole


def _responses(events: list[Event]) -> Optional[dict]:
    final = None
    items: dict[int, dict] = {}
    for event in events:
        data = event.data
        if isinstance(data.get("response"), dict):
            final = data["response"]  # created, in progress, then completed: the last is whole
        if data.get("type") == "response.output_item.done" and isinstance(data.get("item"), dict):
            items[data.get("output_index", len(items))] = data["item"]
    if final is not None and not final.get("output") and items:
        final = {**final, "output": [items[i] for i in sorted(items)]}
    return final


def _messages(events: list[Event]) -> Optional[dict]:
    message: Optional[dict] = None
    partial: dict[int, str] = {}
    for event in events:
        data = event.data
        kind = data.get("type")
        if kind == "message_start":
            message = json.loads(json.dumps(data.get("message") or {}))
            message.setdefault("content", [])
        elif message is None:
            continue
        elif kind == "content_block_start":
            index = data.get("index", len(message["content"]))
            while len(message["content"]) <= index:
                message["content"].append({})
            message["content"][index] = dict(data.get("content_block") or {})
        elif kind == "content_block_delta":
            index, delta = data.get("index", 0), data.get("delta") or {}
            if index >= len(message["content"]):
                continue
            block = message["content"][index]
            if delta.get("type") == "text_delta":
                block["text"] = block.get("text", "") + delta.get("text", "")
            elif delta.get("type") == "input_json_delta":
                partial[index] = partial.get(index, "") + delta.get("partial_json", "")
            elif delta.get("type") == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.get("thinking", "")
            elif delta.get("type") == "signature_delta":
                block["signature"] = delta.get("signature")
        elif kind == "content_block_stop":
            index = data.get("index", 0)
            if index in partial and index < len(message["content"]):
                text = partial.pop(index)
                try:
                    message["content"][index]["input"] = json.loads(text) if text else {}
                except ValueError:
                    message["content"][index]["input"] = text  # as sent: the agent's client saw the same
        elif kind == "message_delta":
            message.update({k: v for k, v in (data.get("delta") or {}).items()})
            if isinstance(data.get("usage"), dict):
                usage = dict(message.get("usage") or {})
                usage.update({k: v for k, v in data["usage"].items() if v is not None})
                message["usage"] = usage
    return message


# --- errors in each API's shape --------------------------------------------------

#: Anthropic's error type for an HTTP status.
_ANTHROPIC_TYPES = {400: "invalid_request_error", 401: "authentication_error", 402: "billing_error",
                    403: "permission_error", 404: "not_found_error", 413: "request_too_large",
                    429: "rate_limit_error", 529: "overloaded_error"}


def error_body(api: Optional[str], status: int, message: str, kind: str, code: Optional[str] = None) -> dict:
    """An error as ``api``'s own servers shape it: Anthropic's
    ``{"type": "error", "error": {"type", "message"}}`` for Messages, OpenAI's
    ``{"error": {"message", "type", "code"}}`` otherwise."""
    if api == MESSAGES:
        return {"type": "error", "error": {"type": _ANTHROPIC_TYPES.get(status, "api_error"), "message": message}}
    return {"error": {"message": message, "type": kind, "code": code, "param": None}}


def error_message(body: object) -> Optional[str]:
    """The message of an error body in either shape (None if it has none)."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        message = body["error"].get("message")
        return message if isinstance(message, str) else None
    return None

