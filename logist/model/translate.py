"""OpenAI Responses and Anthropic Messages calls made on an endpoint that
speaks only Chat Completions (llama.cpp, Ollama, vLLM, Logist's scripted
server), tool calls included: the request translated to Chat, the answer
(whole, or streamed chunk by chunk) translated back. Pure: the gateway
(:mod:`logist.model.gateway`) does the sending.

Written here rather than taken from a library: the libraries that do this
(litellm's adapters, ccproxy, the Anthropic-to-OpenAI proxies) are servers
or frameworks of their own, with their own dependencies by the dozen, and
none offers the translation as plain functions over the JSON. What is
translated is what the coding agents send and read:

Responses to Chat
    ``instructions`` and leading ``system``/``developer`` items: the one
    system message; ``input`` (a string, or items): ``message`` items (their
    ``input_text``/``output_text`` parts; ``input_image`` as an image part),
    ``function_call`` (an assistant message's ``tool_calls``, consecutive
    calls in one message), ``function_call_output`` (a ``tool`` message),
    ``custom_tool_call``/``custom_tool_call_output`` (Codex's free-form
    tools, as a function of one string argument ``input``); ``reasoning``
    items are dropped. ``tools`` of type ``function`` and ``custom``;
    ``tool_choice``; ``max_output_tokens`` (as ``max_tokens``);
    ``temperature``, ``top_p``, ``parallel_tool_calls``; ``text.format``
    (``json_schema``/``json_object``, as ``response_format``). Dropped:
    built-in tools (web search, ...), ``reasoning``, ``store``, ``include``,
    ``previous_response_id`` (the agents send the whole conversation).
Messages to Chat
    ``system`` (a string or text blocks): the system message; ``messages``:
    ``text`` and ``image`` blocks, ``tool_use`` (an assistant message's
    ``tool_calls``, its ``input`` as the arguments' JSON), ``tool_result``
    (a ``tool`` message each, before the rest of the user's message; its
    text, an image in it as ``[image]``); ``thinking`` blocks are dropped.
    ``tools`` with ``input_schema`` (server tools such as web search are
    dropped); ``tool_choice`` (``auto``, ``any`` as ``required``, ``tool``,
    ``none``); ``max_tokens``, ``temperature``, ``top_p``,
    ``stop_sequences`` (as ``stop``).
Chat back
    Text and tool calls, whole or streamed: Responses events
    ``response.created``, ``response.in_progress``,
    ``response.output_item.added``/``done``, ``response.content_part.added``/``done``,
    ``response.output_text.delta``/``done``,
    ``response.function_call_arguments.delta``/``done``, then
    ``response.completed`` (``response.incomplete`` when the answer was cut
    at its token limit, ``response.failed`` when the stream failed), with the
    usage; Messages events ``message_start``,
    ``content_block_start``/``delta``/``stop`` (``text_delta``,
    ``input_json_delta``), ``message_delta`` (``stop_reason``, usage),
    ``message_stop``. A model's reasoning text (``reasoning_content``) is not
    passed on. A Messages stream's blocks come one after another, so the
    tool calls of a Chat stream must too (as OpenAI-compatible servers send
    them); a delta to a call already closed ends the stream with an error.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Optional

from .apis import CHAT, MESSAGES, RESPONSES, Event, sse


class TranslationError(ValueError):
    """A request or stream that cannot be said in the other API."""


def _id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex[:24]}"


def _text_of(parts: object, image: str = "[image]") -> str:
    """The text of content given as a string or as parts/blocks."""
    if isinstance(parts, str):
        return parts
    texts = []
    for part in parts or []:
        if isinstance(part, str):
            texts.append(part)
        elif isinstance(part, dict):
            if isinstance(part.get("text"), str):
                texts.append(part["text"])
            elif part.get("type") in ("image", "input_image", "image_url"):
                texts.append(image)
    return "\n".join(texts)


def _copy(source: dict, target: dict, names: dict) -> None:
    for theirs, ours in names.items():
        if source.get(theirs) is not None:
            target[ours] = source[theirs]


def _streamed(body: dict, chat: dict) -> dict:
    if body.get("stream"):
        chat["stream"] = True
        chat["stream_options"] = {"include_usage": True}
    return chat


def to_chat(api: str, body: dict) -> dict:
    """The Chat Completions request that says what ``body``, a request of ``api``, asks."""
    if not isinstance(body, dict):
        raise TranslationError("the request body is not a JSON object")
    if api == RESPONSES:
        return responses_to_chat(body)
    if api == MESSAGES:
        return messages_to_chat(body)
    return body


# --- Responses -> Chat -----------------------------------------------------------

def _responses_content(content: object) -> object:
    """A message item's content as Chat content: a string when all text."""
    if isinstance(content, str) or not isinstance(content, list):
        return content if isinstance(content, str) else ""
    if all(isinstance(p, dict) and isinstance(p.get("text"), str) for p in content):
        return "".join(p["text"] for p in content)
    parts = []
    for part in content:
        if not isinstance(part, dict):
            continue
        if isinstance(part.get("text"), str):
            parts.append({"type": "text", "text": part["text"]})
        elif part.get("type") == "input_image" and part.get("image_url"):
            parts.append({"type": "image_url", "image_url": {"url": part["image_url"]}})
    return parts


def _assistant(messages: list) -> dict:
    """The assistant message a tool call joins: the last one, unless something came after it."""
    if messages and messages[-1]["role"] == "assistant":
        return messages[-1]
    messages.append({"role": "assistant", "content": None})
    return messages[-1]


def responses_to_chat(body: dict) -> dict:
    system: list[str] = []
    if isinstance(body.get("instructions"), str) and body["instructions"]:
        system.append(body["instructions"])
    messages: list[dict] = []
    items = body.get("input")
    if isinstance(items, str):
        items = [{"type": "message", "role": "user", "content": items}]
    for item in items or []:
        if not isinstance(item, dict):
            raise TranslationError("an input item is not a JSON object")
        kind = item.get("type", "message")
        if kind == "message":
            role = item.get("role", "user")
            if role in ("system", "developer"):
                text = _text_of(item.get("content"))
                if not messages:  # before the conversation: part of the one system message
                    system.append(text)
                else:
                    messages.append({"role": "system", "content": text})
                continue
            content = _responses_content(item.get("content"))
            if role == "assistant":
                content = _text_of(content) if isinstance(content, list) else content
            messages.append({"role": role, "content": content})
        elif kind in ("function_call", "custom_tool_call"):
            arguments = item.get("arguments") if kind == "function_call" else json.dumps({"input": item.get("input", "")})
            call = {"id": item.get("call_id") or item.get("id") or _id("call"), "type": "function",
                    "function": {"name": item.get("name", ""), "arguments": arguments or "{}"}}
            _assistant(messages).setdefault("tool_calls", []).append(call)
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output")
            messages.append({"role": "tool", "tool_call_id": item.get("call_id", ""),
                             "content": output if isinstance(output, str) else _text_of(output)})
        # reasoning items and others: nothing a Chat endpoint can take
    if system:
        messages.insert(0, {"role": "system", "content": "\n\n".join(system)})
    chat: dict = {"model": body.get("model"), "messages": messages}
    tools = []
    for tool in body.get("tools") or []:
        if tool.get("type") == "function":
            function = {"name": tool.get("name"), "parameters": tool.get("parameters") or {"type": "object", "properties": {}}}
            if tool.get("description"):
                function["description"] = tool["description"]
            tools.append({"type": "function", "function": function})
        elif tool.get("type") == "custom":
            tools.append({"type": "function", "function": {
                "name": tool.get("name"), "description": tool.get("description") or "",
                "parameters": {"type": "object", "properties": {"input": {"type": "string"}}, "required": ["input"]}}})
    if tools:
        chat["tools"] = tools
        choice = body.get("tool_choice")
        if isinstance(choice, str):
            chat["tool_choice"] = choice
        elif isinstance(choice, dict) and choice.get("name"):
            chat["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
        if body.get("parallel_tool_calls") is not None:
            chat["parallel_tool_calls"] = body["parallel_tool_calls"]
    _copy(body, chat, {"max_output_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p"})
    form = (body.get("text") or {}).get("format") if isinstance(body.get("text"), dict) else None
    if isinstance(form, dict) and form.get("type") == "json_schema":
        schema = {"name": form.get("name") or "answer", "schema": form.get("schema") or {}}
        if form.get("strict") is not None:
            schema["strict"] = form["strict"]
        chat["response_format"] = {"type": "json_schema", "json_schema": schema}
    elif isinstance(form, dict) and form.get("type") == "json_object":
        chat["response_format"] = {"type": "json_object"}
    return _streamed(body, chat)


def _custom_tools(request: dict) -> set:
    return {t.get("name") for t in request.get("tools") or [] if isinstance(t, dict) and t.get("type") == "custom"}


# --- Messages -> Chat -----------------------------------------------------------

def _image_part(block: dict) -> Optional[dict]:
    source = block.get("source") or {}
    if source.get("type") == "base64":
        return {"type": "image_url", "image_url": {"url": f"data:{source.get('media_type')};base64,{source.get('data')}"}}
    if source.get("type") == "url":
        return {"type": "image_url", "image_url": {"url": source.get("url")}}
    return None


def messages_to_chat(body: dict) -> dict:
    messages: list[dict] = []
    system = body.get("system")
    if system:
        messages.append({"role": "system", "content": system if isinstance(system, str) else
                         "\n\n".join(b.get("text", "") for b in system if isinstance(b, dict))})
    for message in body.get("messages") or []:
        if not isinstance(message, dict):
            raise TranslationError("a message is not a JSON object")
        role, content = message.get("role", "user"), message.get("content")
        if isinstance(content, str):
            messages.append({"role": role, "content": content})
            continue
        blocks = [b for b in content or [] if isinstance(b, dict)]
        if role == "assistant":
            text = "".join(b.get("text", "") for b in blocks if b.get("type") == "text")
            calls = [{"id": b.get("id") or _id("call"), "type": "function",
                      "function": {"name": b.get("name", ""), "arguments": json.dumps(b.get("input") or {})}}
                     for b in blocks if b.get("type") == "tool_use"]
            said = {"role": "assistant", "content": text or (None if calls else "")}  # no call: never null
            if calls:
                said["tool_calls"] = calls
            messages.append(said)
            continue
        parts: list[dict] = []
        for block in blocks:
            kind = block.get("type")
            if kind == "tool_result":
                messages.append({"role": "tool", "tool_call_id": block.get("tool_use_id", ""),
                                 "content": _text_of(block.get("content"))})
            elif kind == "text":
                parts.append({"type": "text", "text": block.get("text", "")})
            elif kind == "image" and (part := _image_part(block)):
                parts.append(part)
        if parts:
            text_only = all(p["type"] == "text" for p in parts)
            messages.append({"role": role, "content": "\n".join(p["text"] for p in parts) if text_only else parts})
    chat: dict = {"model": body.get("model"), "messages": messages}
    tools = [{"type": "function", "function": {"name": t.get("name"), "description": t.get("description") or "",
                                               "parameters": t.get("input_schema") or {"type": "object", "properties": {}}}}
             for t in body.get("tools") or [] if isinstance(t, dict) and "input_schema" in t]
    if tools:
        chat["tools"] = tools
        choice = body.get("tool_choice") or {}
        kind = choice.get("type") if isinstance(choice, dict) else None
        if kind in ("auto", "none"):
            chat["tool_choice"] = kind
        elif kind == "any":
            chat["tool_choice"] = "required"
        elif kind == "tool" and choice.get("name"):
            chat["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
        if isinstance(choice, dict) and choice.get("disable_parallel_tool_use"):
            chat["parallel_tool_calls"] = False
    _copy(body, chat, {"max_tokens": "max_tokens", "temperature": "temperature", "top_p": "top_p",
                       "stop_sequences": "stop"})
    return _streamed(body, chat)


# --- Chat -> Responses ------------------------------------------------------------

def _responses_usage(usage: Optional[dict]) -> Optional[dict]:
    if not isinstance(usage, dict):
        return None
    given, taken = usage.get("prompt_tokens") or 0, usage.get("completion_tokens") or 0
    cached = (usage.get("prompt_tokens_details") or {}).get("cached_tokens") or 0
    return {"input_tokens": given, "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": taken, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": usage.get("total_tokens") or given + taken}


def _response(request: dict, response_id: str, created: int, status: str, output: list,
              usage: Optional[dict] = None, error: Optional[dict] = None) -> dict:
    return {
        "id": response_id, "object": "response", "created_at": created, "status": status,
        "model": request.get("model"), "output": output, "usage": _responses_usage(usage), "error": error,
        "incomplete_details": {"reason": "max_output_tokens"} if status == "incomplete" else None,
        "instructions": request.get("instructions"), "tools": request.get("tools") or [],
        "tool_choice": request.get("tool_choice", "auto"), "parallel_tool_calls": request.get("parallel_tool_calls", True),
        "temperature": request.get("temperature"), "top_p": request.get("top_p"),
        "max_output_tokens": request.get("max_output_tokens"), "metadata": request.get("metadata") or {},
        "text": request.get("text") or {"format": {"type": "text"}},
    }


def _message_item(item_id: str, text: str, status: str = "completed") -> dict:
    content = [{"type": "output_text", "text": text, "annotations": []}] if status == "completed" else []
    return {"type": "message", "id": item_id, "status": status, "role": "assistant", "content": content}


def _call_item(item_id: str, call_id: str, name: str, arguments: str, custom: bool, status: str = "completed") -> dict:
    if custom:
        try:
            value = json.loads(arguments).get("input", "") if arguments else ""
        except (ValueError, AttributeError):
            value = arguments
        return {"type": "custom_tool_call", "id": item_id, "call_id": call_id, "name": name, "input": value,
                "status": status}
    return {"type": "function_call", "id": item_id, "call_id": call_id, "name": name, "arguments": arguments,
            "status": status}


def chat_to_response(completion: dict, request: dict) -> dict:
    """A whole Chat completion as the Responses API's ``response`` object."""
    choice = (completion.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    output: list = []
    if message.get("content"):
        output.append(_message_item(_id("msg"), message["content"]))
    custom = _custom_tools(request)
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        output.append(_call_item(_id("fc"), call.get("id") or _id("call"), function.get("name", ""),
                                 function.get("arguments") or "", function.get("name") in custom))
    status = "incomplete" if choice.get("finish_reason") == "length" else "completed"
    return _response(request, _id("resp"), int(completion.get("created") or time.time()), status, output,
                     completion.get("usage"))


# --- Chat -> Messages ------------------------------------------------------------

_STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use", "function_call": "tool_use",
                 "content_filter": "refusal"}


def _messages_usage(usage: Optional[dict]) -> dict:
    usage = usage if isinstance(usage, dict) else {}
    return {"input_tokens": usage.get("prompt_tokens") or 0, "output_tokens": usage.get("completion_tokens") or 0}


def _arguments(text: str) -> object:
    try:
        value = json.loads(text) if text else {}
    except ValueError:
        return {}
    return value if isinstance(value, dict) else {}


def chat_to_message(completion: dict, request: dict) -> dict:
    """A whole Chat completion as the Messages API's ``message`` object."""
    choice = (completion.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    content: list = []
    if message.get("content"):
        content.append({"type": "text", "text": message["content"]})
    for call in message.get("tool_calls") or []:
        function = call.get("function") or {}
        content.append({"type": "tool_use", "id": call.get("id") or _id("toolu"), "name": function.get("name", ""),
                        "input": _arguments(function.get("arguments") or "")})
    stop = "tool_use" if message.get("tool_calls") else _STOP_REASONS.get(choice.get("finish_reason"), "end_turn")
    return {"id": _id("msg"), "type": "message", "role": "assistant", "model": request.get("model"),
            "content": content, "stop_reason": stop, "stop_sequence": None,
            "usage": _messages_usage(completion.get("usage"))}


def from_chat(api: str, completion: dict, request: dict) -> dict:
    """A whole Chat completion as ``api``'s answer to ``request``."""
    if api == RESPONSES:
        return chat_to_response(completion, request)
    if api == MESSAGES:
        return chat_to_message(completion, request)
    return completion


def as_chunks(completion: dict) -> list[dict]:
    """A whole Chat completion as the chunks of a stream (an endpoint that
    answered a streamed request whole)."""
    choice = (completion.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    base = {"id": completion.get("id"), "object": "chat.completion.chunk", "created": completion.get("created"),
            "model": completion.get("model")}
    delta: dict = {"role": "assistant"}
    if message.get("content"):
        delta["content"] = message["content"]
    if message.get("tool_calls"):
        delta["tool_calls"] = [{**call, "index": i} for i, call in enumerate(message["tool_calls"])]
    chunks = [{**base, "choices": [{"index": 0, "delta": delta, "finish_reason": choice.get("finish_reason") or "stop"}]}]
    if completion.get("usage"):
        chunks.append({**base, "choices": [], "usage": completion["usage"]})
    return chunks


# --- streams ---------------------------------------------------------------------

class ChatStreamTranslator:
    """Chat chunks in, the events of another API's stream out: :meth:`start`
    when the endpoint has answered, :meth:`feed` for each chunk, :meth:`finish`
    when its stream has ended (``fault``: why it ended before it should have)."""

    def __init__(self, request: dict) -> None:
        self.request = request
        self.usage: Optional[dict] = None
        self.finish_reason: Optional[str] = None
        self.fault: Optional[str] = None

    def start(self) -> list[Event]:
        raise NotImplementedError

    def feed(self, chunk: dict) -> list[Event]:
        if isinstance(chunk.get("error"), dict):
            self.fault = str(chunk["error"].get("message") or "the model's endpoint sent an error")
            return []
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        events: list[Event] = []
        for choice in chunk.get("choices") or []:
            if choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if delta.get("content"):
                events += self._text(delta["content"])
            for call in delta.get("tool_calls") or []:
                function = call.get("function") or {}
                events += self._call(call.get("index", 0), call.get("id"), function.get("name") or "",
                                     function.get("arguments") or "")
            if choice.get("finish_reason"):
                self.finish_reason = choice["finish_reason"]
        return events

    def finish(self, fault: Optional[str] = None) -> list[Event]:
        fault = self.fault or fault
        if fault is None and self.finish_reason is None:
            fault = "the model's stream ended before its answer did"
        return self._end(fault)

    def _text(self, text: str) -> list[Event]:
        raise NotImplementedError

    def _call(self, index: int, call_id: Optional[str], name: str, arguments: str) -> list[Event]:
        raise NotImplementedError

    def _end(self, fault: Optional[str]) -> list[Event]:
        raise NotImplementedError


class ResponsesStream(ChatStreamTranslator):
    """A Chat stream as the Responses API's events."""

    def __init__(self, request: dict) -> None:
        super().__init__(request)
        self.id = _id("resp")
        self.created = int(time.time())
        self._sequence = 0
        #: The output items in order: [item, text or arguments so far].
        self._items: list[list] = []
        self._text_at: Optional[int] = None
        self._calls: dict[int, int] = {}
        self._custom = _custom_tools(request)

    def _event(self, name: str, **fields) -> Event:
        data = {"type": name, "sequence_number": self._sequence, **fields}
        self._sequence += 1
        return sse(data, name)

    def start(self) -> list[Event]:
        response = _response(self.request, self.id, self.created, "in_progress", [])
        return [self._event("response.created", response=response),
                self._event("response.in_progress", response=response)]

    def _text(self, text: str) -> list[Event]:
        events = []
        if self._text_at is None:
            self._text_at = len(self._items)
            item = _message_item(_id("msg"), "", "in_progress")
            self._items.append([item, ""])
            events.append(self._event("response.output_item.added", output_index=self._text_at, item=item))
            events.append(self._event("response.content_part.added", item_id=item["id"], output_index=self._text_at,
                                      content_index=0, part={"type": "output_text", "text": "", "annotations": []}))
        slot = self._items[self._text_at]
        slot[1] += text
        return events + [self._event("response.output_text.delta", item_id=slot[0]["id"], output_index=self._text_at,
                                     content_index=0, delta=text)]

    def _call(self, index: int, call_id: Optional[str], name: str, arguments: str) -> list[Event]:
        events = []
        if index not in self._calls:
            self._calls[index] = len(self._items)
            item = _call_item(_id("fc"), call_id or _id("call"), name, "", name in self._custom, "in_progress")
            self._items.append([item, ""])
            events.append(self._event("response.output_item.added", output_index=self._calls[index], item=item))
        at = self._calls[index]
        slot = self._items[at]
        if arguments:
            slot[1] += arguments
            if slot[0]["type"] == "function_call":
                events.append(self._event("response.function_call_arguments.delta", item_id=slot[0]["id"],
                                          output_index=at, delta=arguments))
        return events

    def _end(self, fault: Optional[str]) -> list[Event]:
        events, output = [], []
        for at, (item, said) in enumerate(self._items):
            if item["type"] == "message":
                done = _message_item(item["id"], said)
                events.append(self._event("response.output_text.done", item_id=item["id"], output_index=at,
                                          content_index=0, text=said))
                events.append(self._event("response.content_part.done", item_id=item["id"], output_index=at,
                                          content_index=0, part=done["content"][0]))
            else:
                done = _call_item(item["id"], item["call_id"], item["name"], said, item["type"] == "custom_tool_call")
                if item["type"] == "function_call":
                    events.append(self._event("response.function_call_arguments.done", item_id=item["id"],
                                              output_index=at, arguments=said))
            events.append(self._event("response.output_item.done", output_index=at, item=done))
            output.append(done)
        if fault:
            error = {"code": "server_error", "message": fault}
            response = _response(self.request, self.id, self.created, "failed", output, self.usage, error)
            return events + [self._event("response.failed", response=response)]
        status = "incomplete" if self.finish_reason == "length" else "completed"
        response = _response(self.request, self.id, self.created, status, output, self.usage)
        return events + [self._event(f"response.{status}", response=response)]


class MessagesStream(ChatStreamTranslator):
    """A Chat stream as the Messages API's events."""

    def __init__(self, request: dict) -> None:
        super().__init__(request)
        self.id = _id("msg")
        self._blocks = 0
        self._open: Optional[tuple] = None  # ("text",) or ("tool", chat index)
        self._closed_calls: set = set()

    def start(self) -> list[Event]:
        message = {"id": self.id, "type": "message", "role": "assistant", "model": self.request.get("model"),
                   "content": [], "stop_reason": None, "stop_sequence": None,
                   "usage": {"input_tokens": 0, "output_tokens": 0}}
        return [sse({"type": "message_start", "message": message}, "message_start")]

    def _close(self) -> list[Event]:
        if self._open is None:
            return []
        if self._open[0] == "tool":
            self._closed_calls.add(self._open[1])
        self._open = None
        self._blocks += 1
        return [sse({"type": "content_block_stop", "index": self._blocks - 1}, "content_block_stop")]

    def _delta(self, delta: dict) -> Event:
        return sse({"type": "content_block_delta", "index": self._blocks, "delta": delta}, "content_block_delta")

    def _text(self, text: str) -> list[Event]:
        events = []
        if self._open != ("text",):
            events += self._close()
            self._open = ("text",)
            events.append(sse({"type": "content_block_start", "index": self._blocks,
                               "content_block": {"type": "text", "text": ""}}, "content_block_start"))
        return events + [self._delta({"type": "text_delta", "text": text})]

    def _call(self, index: int, call_id: Optional[str], name: str, arguments: str) -> list[Event]:
        if index in self._closed_calls:
            raise TranslationError("the model's stream went back to a tool call it had ended, "
                                   "which a Messages stream cannot say")
        events = []
        if self._open != ("tool", index):
            events += self._close()
            self._open = ("tool", index)
            block = {"type": "tool_use", "id": call_id or _id("toolu"), "name": name, "input": {}}
            events.append(sse({"type": "content_block_start", "index": self._blocks, "content_block": block},
                              "content_block_start"))
        if arguments:
            events.append(self._delta({"type": "input_json_delta", "partial_json": arguments}))
        return events

    def _end(self, fault: Optional[str]) -> list[Event]:
        events = self._close()
        if fault:
            return events + [sse({"type": "error", "error": {"type": "api_error", "message": fault}}, "error")]
        stop = "tool_use" if self._closed_calls else _STOP_REASONS.get(self.finish_reason, "end_turn")
        usage = _messages_usage(self.usage)
        return events + [
            sse({"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": usage},
                "message_delta"),
            sse({"type": "message_stop"}, "message_stop"),
        ]


def stream_from_chat(api: str, request: dict) -> ChatStreamTranslator:
    """The translator of a Chat stream into ``api``'s stream, for ``request``."""
    if api == RESPONSES:
        return ResponsesStream(request)
    if api == MESSAGES:
        return MessagesStream(request)
    raise TranslationError(f"a {CHAT} stream needs no translation")
