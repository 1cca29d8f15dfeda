"""Responses and Messages said in Chat Completions and back, field by field
(pure: no server; the wire is tests/model/test_gateway.py's), and each
API's stream put back together."""

from __future__ import annotations

import json

import pytest

from logist.model import apis, translate
from logist.model.apis import Usage, reassemble, sse, usage_of


def chunk(delta: dict = None, finish: str = None, usage: dict = None) -> dict:
    data = {"id": "c1", "object": "chat.completion.chunk", "created": 5, "model": "m",
            "choices": [] if delta is None and finish is None else [{"index": 0, "delta": delta or {},
                                                                     "finish_reason": finish}]}
    if usage:
        data["usage"] = usage
    return data


def call_delta(index: int, arguments: str, call_id: str = None, name: str = None) -> dict:
    call = {"index": index, "function": {"arguments": arguments}}
    if call_id:
        call.update(id=call_id, type="function")
        call["function"]["name"] = name
    return {"tool_calls": [call]}


def test_a_codex_request_in_chat_terms():
    body = {
        "model": "m", "instructions": "Be Codex.", "stream": True, "max_output_tokens": 300, "temperature": 0.2,
        "parallel_tool_calls": False, "tool_choice": {"type": "function", "name": "shell"}, "store": False,
        "reasoning": {"effort": "low"}, "text": {"format": {"type": "json_schema", "name": "out", "strict": True,
                                                            "schema": {"type": "object"}}},
        "tools": [{"type": "function", "name": "shell", "parameters": {"type": "object"}},
                  {"type": "custom", "name": "apply_patch", "description": "Patch files"},
                  {"type": "web_search"}],
        "input": [
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Rules."}]},
            {"role": "user", "content": [{"type": "input_text", "text": "Look "},
                                         {"type": "input_text", "text": "here"}]},
            {"type": "reasoning", "summary": []},
            {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "On it."}]},
            {"type": "function_call", "call_id": "c1", "name": "shell", "arguments": "{\"cmd\":\"ls\"}"},
            {"type": "custom_tool_call", "call_id": "c2", "name": "apply_patch", "input": "*** Begin Patch"},
            {"type": "function_call_output", "call_id": "c1", "output": "a.py"},
            {"type": "custom_tool_call_output", "call_id": "c2", "output": "Done"},
            {"type": "message", "role": "developer", "content": "Later rule."},
            {"role": "user", "content": [{"type": "input_text", "text": "see"},
                                         {"type": "input_image", "image_url": "data:image/png;base64,AA"}]},
        ],
    }
    chat = translate.to_chat(apis.RESPONSES, body)
    assert chat["messages"] == [
        {"role": "system", "content": "Be Codex.\n\nRules."},
        {"role": "user", "content": "Look here"},
        {"role": "assistant", "content": "On it.", "tool_calls": [
            {"id": "c1", "type": "function", "function": {"name": "shell", "arguments": "{\"cmd\":\"ls\"}"}},
            {"id": "c2", "type": "function", "function": {"name": "apply_patch",
                                                          "arguments": json.dumps({"input": "*** Begin Patch"})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "a.py"},
        {"role": "tool", "tool_call_id": "c2", "content": "Done"},
        {"role": "system", "content": "Later rule."},
        {"role": "user", "content": [{"type": "text", "text": "see"},
                                     {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}]},
    ]
    assert [t["function"]["name"] for t in chat["tools"]] == ["shell", "apply_patch"]
    assert chat["tools"][1]["function"]["parameters"]["required"] == ["input"]
    assert chat["tool_choice"] == {"type": "function", "function": {"name": "shell"}}
    assert (chat["max_tokens"], chat["temperature"], chat["parallel_tool_calls"]) == (300, 0.2, False)
    assert chat["response_format"] == {"type": "json_schema", "json_schema": {"name": "out", "schema": {"type": "object"},
                                                                              "strict": True}}
    assert chat["stream_options"] == {"include_usage": True}
    assert not {"store", "reasoning", "instructions", "input", "text"} & set(chat)


def test_a_claude_code_request_in_chat_terms():
    body = {
        "model": "m", "max_tokens": 1000, "stop_sequences": ["END"], "stream": False,
        "system": [{"type": "text", "text": "Be Claude."}, {"type": "text", "text": "Be brief."}],
        "tool_choice": {"type": "any", "disable_parallel_tool_use": True},
        "tools": [{"name": "Read", "description": "Read a file", "input_schema": {"type": "object"}},
                  {"type": "web_search_20250305", "name": "web_search"}],
        "messages": [
            {"role": "user", "content": "Fix it"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "only this", "signature": "s"}]},
            {"role": "user", "content": "Go on"},
            {"role": "assistant", "content": [{"type": "thinking", "thinking": "hm", "signature": "s"},
                                              {"type": "text", "text": "Reading."},
                                              {"type": "tool_use", "id": "t1", "name": "Read", "input": {"p": "a"}},
                                              {"type": "tool_use", "id": "t2", "name": "Read", "input": {"p": "b"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t1", "content": "A"},
                                         {"type": "tool_result", "tool_use_id": "t2", "is_error": True,
                                          "content": [{"type": "text", "text": "no such file"}]},
                                         {"type": "image", "source": {"type": "base64", "media_type": "image/png",
                                                                      "data": "AA"}}]},
        ],
    }
    chat = translate.to_chat(apis.MESSAGES, body)
    assert chat["messages"] == [
        {"role": "system", "content": "Be Claude.\n\nBe brief."},
        {"role": "user", "content": "Fix it"},
        {"role": "assistant", "content": ""},
        {"role": "user", "content": "Go on"},
        {"role": "assistant", "content": "Reading.", "tool_calls": [
            {"id": "t1", "type": "function", "function": {"name": "Read", "arguments": '{"p": "a"}'}},
            {"id": "t2", "type": "function", "function": {"name": "Read", "arguments": '{"p": "b"}'}}]},
        {"role": "tool", "tool_call_id": "t1", "content": "A"},
        {"role": "tool", "tool_call_id": "t2", "content": "no such file"},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}}]},
    ]
    assert chat["tools"] == [{"type": "function", "function": {"name": "Read", "description": "Read a file",
                                                               "parameters": {"type": "object"}}}]
    assert (chat["tool_choice"], chat["parallel_tool_calls"]) == ("required", False)
    assert (chat["max_tokens"], chat["stop"]) == (1000, ["END"])
    assert "stream" not in chat


@pytest.mark.parametrize("api", [apis.RESPONSES, apis.MESSAGES])
def test_a_request_that_is_not_json_objects_is_refused(api):
    with pytest.raises(translate.TranslationError):
        translate.to_chat(api, {"model": "m", "input": ["text"], "messages": ["text"]})


def test_a_whole_chat_answer_as_a_response_and_as_a_message():
    completion = {"id": "c", "created": 7, "model": "m", "usage": {"prompt_tokens": 9, "completion_tokens": 4},
                  "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
                      "role": "assistant", "content": "Let me look.", "tool_calls": [
                          {"id": "k1", "type": "function", "function": {"name": "Read", "arguments": '{"p": 1}'}}]}}]}
    response = translate.from_chat(apis.RESPONSES, completion, {"model": "m"})
    assert [item["type"] for item in response["output"]] == ["message", "function_call"]
    assert response["output"][0]["content"][0]["text"] == "Let me look."
    assert response["output"][1]["call_id"] == "k1" and response["output"][1]["arguments"] == '{"p": 1}'
    assert response["usage"]["input_tokens"] == 9 and response["usage"]["output_tokens"] == 4
    assert usage_of(apis.RESPONSES, response) == Usage(9, 4)
    message = translate.from_chat(apis.MESSAGES, completion, {"model": "m"})
    assert message["content"] == [{"type": "text", "text": "Let me look."},
                                  {"type": "tool_use", "id": "k1", "name": "Read", "input": {"p": 1}}]
    assert message["stop_reason"] == "tool_use" and usage_of(apis.MESSAGES, message) == Usage(9, 4)
    cut = {**completion, "choices": [{"index": 0, "finish_reason": "length", "message": {"content": "Lo"}}]}
    assert translate.from_chat(apis.RESPONSES, cut, {})["status"] == "incomplete"
    assert translate.from_chat(apis.MESSAGES, cut, {})["stop_reason"] == "max_tokens"
    custom = translate.from_chat(apis.RESPONSES, {"choices": [{"message": {"tool_calls": [
        {"id": "k2", "function": {"name": "apply_patch", "arguments": '{"input": "*** Begin"}'}}]}}]},
        {"tools": [{"type": "custom", "name": "apply_patch"}]})
    assert custom["output"][0] == {"type": "custom_tool_call", "id": custom["output"][0]["id"], "call_id": "k2",
                                   "name": "apply_patch", "input": "*** Begin", "status": "completed"}


STREAM = [chunk({"role": "assistant", "content": ""}), chunk({"content": "Let "}), chunk({"content": "me."}),
          chunk(call_delta(0, '{"p":', "k1", "Read")), chunk(call_delta(0, ' 1}')),
          chunk(call_delta(1, '{}', "k2", "List")), chunk(finish="tool_calls"),
          chunk(usage={"prompt_tokens": 11, "completion_tokens": 6})]


def translated(api: str, chunks: list, fault: str = None) -> list:
    stream = translate.stream_from_chat(api, {"model": "m"})
    events = stream.start()
    for piece in chunks:
        events += stream.feed(piece)
    return events + stream.finish(fault)


def test_a_chat_stream_as_a_responses_stream():
    events = translated(apis.RESPONSES, STREAM)
    kinds = [e.kind for e in events]
    assert kinds == ["response.created", "response.in_progress",
                     "response.output_item.added", "response.content_part.added",
                     "response.output_text.delta", "response.output_text.delta",
                     "response.output_item.added", "response.function_call_arguments.delta",
                     "response.function_call_arguments.delta",
                     "response.output_item.added", "response.function_call_arguments.delta",
                     "response.output_text.done", "response.content_part.done", "response.output_item.done",
                     "response.function_call_arguments.done", "response.output_item.done",
                     "response.function_call_arguments.done", "response.output_item.done",
                     "response.completed"]
    assert all(e.name == e.data["type"] for e in events)
    whole = reassemble(apis.RESPONSES, events)
    assert whole["status"] == "completed"
    assert [(i["type"], i.get("arguments")) for i in whole["output"]] == [
        ("message", None), ("function_call", '{"p": 1}'), ("function_call", "{}")]
    assert usage_of(apis.RESPONSES, whole) == Usage(11, 6)


def test_a_chat_stream_as_a_messages_stream():
    events = translated(apis.MESSAGES, STREAM)
    assert [e.kind for e in events] == ["message_start", "content_block_start", "content_block_delta",
                                        "content_block_delta", "content_block_stop", "content_block_start",
                                        "content_block_delta", "content_block_delta", "content_block_stop",
                                        "content_block_start", "content_block_delta", "content_block_stop",
                                        "message_delta", "message_stop"]
    whole = reassemble(apis.MESSAGES, events)
    assert whole["content"] == [{"type": "text", "text": "Let me."},
                                {"type": "tool_use", "id": "k1", "name": "Read", "input": {"p": 1}},
                                {"type": "tool_use", "id": "k2", "name": "List", "input": {}}]
    assert whole["stop_reason"] == "tool_use"
    assert usage_of(apis.MESSAGES, whole) == Usage(11, 6)


def test_a_stream_that_breaks_off_ends_in_each_apis_failure():
    cut = STREAM[:3]
    responses = translated(apis.RESPONSES, cut, "the connection was reset")
    assert responses[-1].kind == "response.failed"
    assert responses[-1].data["response"]["error"]["message"] == "the connection was reset"
    messages = translated(apis.MESSAGES, cut)  # no finish_reason came: not a whole answer
    assert messages[-1].kind == "error"
    assert "ended before its answer" in messages[-1].data["error"]["message"]


def test_a_messages_stream_cannot_go_back_to_a_tool_call_it_closed():
    stream = translate.stream_from_chat(apis.MESSAGES, {"model": "m"})
    stream.feed(chunk(call_delta(0, "{", "k1", "A")))
    stream.feed(chunk(call_delta(1, "{}", "k2", "B")))
    with pytest.raises(translate.TranslationError):
        stream.feed(chunk(call_delta(0, "}")))


def test_streams_put_back_together_and_their_usage():
    chat = [sse(c) for c in STREAM] + [sse("[DONE]")]
    whole = reassemble(apis.CHAT, chat)
    message = whole["choices"][0]["message"]
    assert message["content"] == "Let me."
    assert message["tool_calls"] == [{"id": "k1", "type": "function", "function": {"name": "Read", "arguments": '{"p": 1}'}},
                                     {"id": "k2", "type": "function", "function": {"name": "List", "arguments": "{}"}}]
    assert whole["choices"][0]["finish_reason"] == "tool_calls"
    assert usage_of(apis.CHAT, whole) == Usage(11, 6)
    anthropic = [sse({"type": "message_start", "message": {"id": "m", "content": [], "usage": {
                     "input_tokens": 3, "cache_read_input_tokens": 100, "output_tokens": 1}}}, "message_start"),
                 sse({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
                     "content_block_start"),
                 sse({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "Hi"}},
                     "content_block_delta"),
                 sse({"type": "content_block_stop", "index": 0}, "content_block_stop"),
                 sse({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 8}},
                     "message_delta"),
                 sse({"type": "message_stop"}, "message_stop")]
    message = reassemble(apis.MESSAGES, anthropic)
    assert message["content"] == [{"type": "text", "text": "Hi"}] and message["stop_reason"] == "end_turn"
    assert usage_of(apis.MESSAGES, message) == Usage(103, 8)  # the cache's tokens are input too


def test_events_are_read_as_they_were_written():
    reader = apis.EventReader()
    text = 'event: message_start\ndata: {"type":"message_start"}\n\n: keep-alive\n\ndata: [DONE]\n\n'
    events = [e for e in (reader.feed(line) for line in text.split("\n")) if e is not None]
    assert [(e.name, e.data) for e in events] == [("message_start", {"type": "message_start"}), (None, None),
                                                 (None, "[DONE]")]
    assert "".join(e.text for e in events) == text
    assert [e.kind for e in events] == ["message_start", None, "[DONE]"]
