"""The recording gateway on the wire: Logist's scripted Chat Completions
server as the endpoint, real HTTP clients as the agent (the ``openai`` SDK
for Chat and Responses, ``httpx`` by hand for Anthropic Messages, as Claude
Code sends them), and the records it hands over."""

from __future__ import annotations

import json
import os
import threading

import openai
import pytest

from conftest import CANARY_KEY
from logist.model.apis import EventReader
from logist.model.gateway import Gateway, Totals
from logist.model.tls import ssl_context
from logist.replay.scripted import Reply, ScriptedLLMServer

try:
    import httpx2 as httpx  # the openai SDK's HTTP library from openai 3 on
except ImportError:  # pragma: no cover - older SDKs bring httpx
    import httpx

EXEC = {"type": "function", "name": "exec_command", "description": "Run a shell command",
        "parameters": {"type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}
WRITE = {"name": "Write", "description": "Write a file",
         "input_schema": {"type": "object", "properties": {"file_path": {"type": "string"},
                                                           "content": {"type": "string"}}}}
USAGE = {"prompt_tokens": 120, "completion_tokens": 30}


@pytest.fixture
def recorded():
    return []


def verify():
    """The SSL context of Logist's own clients for this test's clients too:
    they speak plain HTTP to 127.0.0.1, and each new context would load the
    machine's certificates again (about 20 ms of CPU)."""
    return ssl_context(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))


def request(method: str, url: str, **options) -> "httpx.Response":
    """One request by hand, as ``httpx.post`` and the like make it (a client and a connection of its own)."""
    return httpx.request(method, url, verify=verify(), **options)


def stream(method: str, url: str, **options):
    """One streamed request by hand, as ``httpx.stream`` makes it."""
    return httpx.stream(method, url, verify=verify(), **options)


def sdk(gateway: Gateway) -> "openai.OpenAI":
    return openai.OpenAI(base_url=gateway.base_url, api_key=gateway.token, max_retries=0,
                         http_client=openai.DefaultHttpxClient(verify=verify()))


def messages_call(gateway: Gateway, body: dict, key: str = None) -> "httpx.Response":
    """A Messages call as Claude Code makes it: ``?beta=true``, the key in ``x-api-key``."""
    headers = {"x-api-key": key or gateway.token, "anthropic-version": "2023-06-01"}
    return request("POST", gateway.root_url + "/v1/messages?beta=true", json=body, headers=headers, timeout=30)


def lowered(headers: dict) -> dict:
    return {name.lower(): value for name, value in headers.items()}


def events_of(text: str) -> list:
    reader = EventReader()
    found = [reader.feed(line) for line in text.split("\n")]
    return [e for e in found + [reader.close()] if e is not None]


def test_a_chat_call_passes_through_and_is_recorded_with_usage(recorded):
    with ScriptedLLMServer([Reply(content="hello there", usage=USAGE), Reply(content="whole", usage=USAGE)]) as upstream, \
            Gateway(upstream.base_url, CANARY_KEY, record=recorded.append) as gateway:
        client = sdk(gateway)
        chunks = list(client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                                     stream=True))
        whole = client.chat.completions.create(model="m", messages=[{"role": "user", "content": "again"}])
    assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "hello there"
    # The usage was asked for upstream, and its chunk kept from an agent that had not asked.
    assert upstream.requests[0]["stream_options"] == {"include_usage": True}
    assert all(c.choices for c in chunks)
    assert whole.choices[0].message.content == "whole"
    first, second = recorded
    assert (first.number, first.api, first.mode, first.status, first.path) == (1, "chat", "passthrough", 200,
                                                                               "/v1/chat/completions")
    assert first.request == {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
    assert first.response["choices"][0]["message"]["content"] == "hello there"
    assert first.usage == second.usage == {"input_tokens": 120, "output_tokens": 30}
    assert first.events[-1] == {"data": "[DONE]"} and second.events is None
    assert first.duration > 0 and first.error is None
    # The endpoint got the real key; the gateway's token stayed with the agent.
    assert lowered(upstream.headers[0])["authorization"] == f"Bearer {CANARY_KEY}"
    assert gateway.token not in json.dumps(upstream.headers)
    assert gateway.totals == Totals(calls=2, input_tokens=240, output_tokens=60)


def test_a_responses_call_with_a_tool_round_is_translated_both_ways(recorded):
    """Codex's exchange: a streamed function_call, then the function_call_output turn."""
    script = [Reply(content='{"cmd": "echo hello > hello.py"}', tool_call="exec_command", usage=USAGE),
              Reply(content="Created hello.py.", usage={"prompt_tokens": 160, "completion_tokens": 5})]
    with ScriptedLLMServer(script) as upstream, \
            Gateway(upstream.base_url, CANARY_KEY, mode="chat", record=recorded.append) as gateway:
        client = sdk(gateway)
        first = list(client.responses.create(model="m", instructions="You are Codex.", input=[
            {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Sandbox: none."}]},
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Write hello.py"}]},
        ], tools=[EXEC], tool_choice="auto", stream=True))
        call = first[-1].response.output[0]
        second = list(client.responses.create(model="m", instructions="You are Codex.", input=[
            {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Write hello.py"}]},
            {"type": "function_call", "call_id": call.call_id, "name": call.name, "arguments": call.arguments},
            {"type": "function_call_output", "call_id": call.call_id, "output": "exit code 0"},
        ], tools=[EXEC], stream=True))

    kinds = [e.type for e in first]
    assert kinds[:3] == ["response.created", "response.in_progress", "response.output_item.added"]
    assert "response.function_call_arguments.delta" in kinds
    assert kinds[-2:] == ["response.output_item.done", "response.completed"]
    assert [e.sequence_number for e in first] == list(range(len(first)))
    assert (call.type, call.name, json.loads(call.arguments)) == ("function_call", "exec_command",
                                                                  {"cmd": "echo hello > hello.py"})
    assert first[-1].response.usage.input_tokens == 120 and first[-1].response.usage.output_tokens == 30
    text = "".join(e.delta for e in second if e.type == "response.output_text.delta")
    assert text == "Created hello.py." == second[-1].response.output[0].content[0].text

    asked, answered = upstream.requests
    assert asked["messages"] == [{"role": "system", "content": "You are Codex.\n\nSandbox: none."},
                                 {"role": "user", "content": "Write hello.py"}]
    assert asked["tools"] == [{"type": "function", "function": {
        "name": "exec_command", "description": "Run a shell command", "parameters": EXEC["parameters"]}}]
    assert asked["stream"] is True and asked["stream_options"] == {"include_usage": True}
    assert answered["messages"][2:] == [
        {"role": "assistant", "content": None, "tool_calls": [{"id": call.call_id, "type": "function", "function": {
            "name": "exec_command", "arguments": call.arguments}}]},
        {"role": "tool", "tool_call_id": call.call_id, "content": "exit code 0"}]

    one, two = recorded
    assert (one.api, one.mode, one.path) == ("responses", "chat", "/v1/responses")
    assert one.upstream_request == asked
    assert one.response["output"][0]["arguments"] == call.arguments
    assert one.response["status"] == "completed"
    assert one.upstream_response["choices"][0]["message"]["tool_calls"][0]["function"]["name"] == "exec_command"
    assert one.usage == {"input_tokens": 120, "output_tokens": 30}
    assert two.usage == {"input_tokens": 160, "output_tokens": 5}
    assert [e["event"] for e in one.events] == kinds


def test_a_messages_call_with_a_tool_use_round_is_translated_both_ways(recorded):
    """Claude Code's exchange: a streamed tool_use, then a tool_result turn."""
    arguments = json.dumps({"file_path": "/w/hello.py", "content": 'print("hello")\n'})
    script = [Reply(content=arguments, tool_call="Write", usage=USAGE),
              Reply(content="I wrote hello.py.", usage={"prompt_tokens": 170, "completion_tokens": 6})]
    system = [{"type": "text", "text": "You are Claude Code.", "cache_control": {"type": "ephemeral"}}]
    with ScriptedLLMServer(script) as upstream, \
            Gateway(upstream.base_url, CANARY_KEY, mode="chat", record=recorded.append) as gateway:
        assert request("HEAD", gateway.root_url + "/").status_code == 200  # Claude Code's first request
        first = messages_call(gateway, {"model": "m", "max_tokens": 4096, "system": system, "stream": True,
                                        "tools": [WRITE], "messages": [
                                            {"role": "user", "content": [{"type": "text", "text": "Write hello.py"}]}]})
        events = events_of(first.text)
        use = [e.data for e in events if e.name == "content_block_start"][0]["content_block"]
        second = messages_call(gateway, {"model": "m", "max_tokens": 4096, "system": system, "stream": True,
                                         "tools": [WRITE], "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Write hello.py"}]},
            {"role": "assistant", "content": [{"type": "tool_use", "id": use["id"], "name": "Write",
                                               "input": json.loads(arguments)}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use["id"],
                                          "content": [{"type": "text", "text": "File created"}]},
                                         {"type": "text", "text": "<system-reminder>go on</system-reminder>"}]},
        ]})

    assert first.status_code == 200 and first.headers["content-type"] == "text/event-stream"
    assert [e.name for e in events] == ["message_start", "content_block_start"] + ["content_block_delta"] * 4 + [
        "content_block_stop", "message_delta", "message_stop"]
    assert [e.name for e in events] == [e.data["type"] for e in events]
    assert (use["type"], use["name"], use["input"]) == ("tool_use", "Write", {})
    assert "".join(e.data["delta"]["partial_json"] for e in events if e.name == "content_block_delta") == arguments
    assert events[-2].data["delta"]["stop_reason"] == "tool_use"
    assert events[-2].data["usage"] == {"input_tokens": 120, "output_tokens": 30}
    said = events_of(second.text)
    assert "".join(e.data["delta"].get("text", "") for e in said if e.name == "content_block_delta") == "I wrote hello.py."
    assert said[-2].data["delta"]["stop_reason"] == "end_turn"

    asked, answered = upstream.requests
    assert asked["messages"] == [{"role": "system", "content": "You are Claude Code."},
                                 {"role": "user", "content": "Write hello.py"}]
    assert asked["tools"][0]["function"]["parameters"] == WRITE["input_schema"]
    assert asked["max_tokens"] == 4096
    assert answered["messages"][2:] == [
        {"role": "assistant", "content": None, "tool_calls": [{"id": use["id"], "type": "function", "function": {
            "name": "Write", "arguments": json.dumps(json.loads(arguments))}}]},
        {"role": "tool", "tool_call_id": use["id"], "content": "File created"},
        {"role": "user", "content": "<system-reminder>go on</system-reminder>"}]

    one, two = recorded
    assert (one.api, one.path) == ("messages", "/v1/messages?beta=true")
    assert one.response["content"] == [{"type": "tool_use", "id": use["id"], "name": "Write",
                                        "input": json.loads(arguments)}]
    assert one.response["stop_reason"] == "tool_use"
    assert one.usage == {"input_tokens": 120, "output_tokens": 30}
    assert two.response["content"] == [{"type": "text", "text": "I wrote hello.py."}]
    assert two.usage == {"input_tokens": 170, "output_tokens": 6}


def test_a_whole_messages_call_is_answered_as_a_message(recorded):
    with ScriptedLLMServer([Reply(content="hi there", usage=USAGE)]) as upstream, \
            Gateway(upstream.base_url, CANARY_KEY, mode="chat", record=recorded.append) as gateway:
        answer = messages_call(gateway, {"model": "m", "max_tokens": 100, "messages": [
            {"role": "user", "content": "Say hi"}]})
    message = answer.json()
    assert (message["type"], message["role"], message["stop_reason"]) == ("message", "assistant", "end_turn")
    assert message["content"] == [{"type": "text", "text": "hi there"}]
    assert message["usage"] == {"input_tokens": 120, "output_tokens": 30}
    assert recorded[0].response == message and recorded[0].events is None


def test_an_answer_without_usage_is_counted_by_an_estimate_marked_as_one(recorded):
    # llama-cpp-python's server streams no usage even when asked for it; the budgets still count the call.
    with ScriptedLLMServer([Reply(content="x" * 40, usage=False), Reply(content="y" * 8, usage=False)]) as upstream, \
            Gateway(upstream.base_url, CANARY_KEY, record=recorded.append) as gateway:
        client = sdk(gateway)
        streamed = list(client.chat.completions.create(model="m", messages=[{"role": "user", "content": "h" * 400}],
                                                       stream=True))
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "again"}])
    assert "".join(c.choices[0].delta.content or "" for c in streamed if c.choices) == "x" * 40
    first, second = recorded
    assert first.usage["estimated"] is True and second.usage["estimated"] is True
    assert first.usage["input_tokens"] >= 100 and first.usage["output_tokens"] >= 10  # 400 and 40 characters
    assert second.usage["input_tokens"] < first.usage["input_tokens"]
    assert gateway.totals.input_tokens == first.usage["input_tokens"] + second.usage["input_tokens"]


def test_responses_and_messages_streams_pass_through_with_their_usage(recorded):
    """An endpoint that speaks Responses and Messages itself (here: a second
    gateway, translating, in front of the scripted server): passed on as they
    come, put back together, the usage read from each API's own events."""
    script = [Reply(content="from responses", usage=USAGE), Reply(content="from messages", usage=USAGE)]
    with ScriptedLLMServer(script) as upstream, Gateway(upstream.base_url, mode="chat") as speaks_all, \
            Gateway(speaks_all.base_url, speaks_all.token, record=recorded.append) as gateway:
        events = list(sdk(gateway).responses.create(model="m", input="hi", stream=True))
        answer = messages_call(gateway, {"model": "m", "max_tokens": 50, "stream": True,
                                         "messages": [{"role": "user", "content": "hi"}]})
    assert events[-1].type == "response.completed"
    responses, messages = recorded
    assert responses.mode == "passthrough" and responses.upstream_request is None
    assert responses.response["output"][0]["content"][0]["text"] == "from responses"
    assert responses.usage == {"input_tokens": 120, "output_tokens": 30}
    assert events_of(answer.text)[-1].name == "message_stop"
    assert messages.response["content"] == [{"type": "text", "text": "from messages"}]
    assert messages.usage == {"input_tokens": 120, "output_tokens": 30}
    # The inner gateway's token was the outer's real key: kept out of every record.
    assert speaks_all.token not in json.dumps([r.to_dict() for r in recorded])


def test_only_this_gateways_token_is_taken(recorded):
    with ScriptedLLMServer(["unused"], models=["qwen", "smol"]) as upstream, \
            Gateway(upstream.base_url, CANARY_KEY, record=recorded.append) as gateway, \
            Gateway(upstream.base_url, CANARY_KEY) as another:
        body = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        url = gateway.base_url + "/chat/completions"
        refused = [request("POST", url, json=body),
                   request("POST", url, json=body, headers={"authorization": "Bearer wrong"}),
                   request("POST", url, json=body, headers={"authorization": f"Bearer {another.token}"}),
                   request("POST", url, json=body, headers={"authorization": f"Bearer {CANARY_KEY}"}),
                   request("GET", gateway.base_url + "/models")]
        anthropic = messages_call(gateway, {"model": "m", "max_tokens": 5, "messages": []}, key="wrong")
        models = request("GET", gateway.base_url + "/models", headers={"authorization": f"Bearer {gateway.token}"})
        head = request("HEAD", gateway.root_url + "/")
    assert [r.status_code for r in refused] == [401] * 5
    assert refused[1].json()["error"]["code"] == "invalid_api_key"
    assert anthropic.status_code == 401
    assert anthropic.json()["type"] == "error" and anthropic.json()["error"]["type"] == "authentication_error"
    assert [m["id"] for m in models.json()["data"]] == ["qwen", "smol"]
    assert head.status_code == 200 and head.content == b""
    assert upstream.requests == [] and recorded == []
    assert gateway.token != another.token


def test_the_real_key_is_in_no_record_and_no_answer(recorded):
    """An endpoint that says the key back (in an answer, in an error) has it
    replaced on its way to the agent and to the record."""
    script = [Reply(content=f"your key is {CANARY_KEY}"),
              Reply(content=f"streamed: {CANARY_KEY}", pieces=1),
              Reply(content=json.dumps({"cmd": f"echo {CANARY_KEY}"}), tool_call="exec_command", pieces=1),
              Reply(status=401, error_message=f"Incorrect API key provided: {CANARY_KEY}", headers={"x-should-retry": "false"})]
    seen = []
    with ScriptedLLMServer(script) as upstream, \
            Gateway(upstream.base_url, CANARY_KEY, mode="chat", record=recorded.append) as gateway:
        chat = {"model": "m", "messages": [{"role": "user", "content": "key?"}]}
        headers = {"authorization": f"Bearer {gateway.token}"}
        seen.append(request("POST", gateway.base_url + "/chat/completions", json=chat, headers=headers))
        seen.append(request("POST", gateway.base_url + "/chat/completions", json={**chat, "stream": True}, headers=headers))
        seen.append(request("POST", gateway.base_url + "/responses", json={"model": "m", "input": "go", "stream": True,
                                                                       "tools": [EXEC]}, headers=headers))
        seen.append(messages_call(gateway, {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]}))
    assert [r.status_code for r in seen] == [200, 200, 200, 401]
    assert "your key is [redacted]" in seen[0].text and "[redacted]" in seen[1].text and "[redacted]" in seen[2].text
    assert seen[3].json()["error"]["message"] == "Incorrect API key provided: [redacted]"
    everything = b"".join(r.content + str(r.headers).encode() for r in seen)
    records = json.dumps([r.to_dict() for r in recorded])
    assert len(recorded) == 4 and "[redacted]" in records
    assert CANARY_KEY.encode() not in everything and CANARY_KEY not in records
    assert all(lowered(h)["authorization"] == f"Bearer {CANARY_KEY}" for h in upstream.headers)


def test_a_budget_refuses_the_next_call_in_the_apis_own_shape(recorded):
    asked = []

    def budget(totals: Totals):
        asked.append(totals)
        return "max_tokens 100 reached" if totals.input_tokens + totals.output_tokens >= 100 else None

    with ScriptedLLMServer([Reply(content="one", usage=USAGE), "two", "three"]) as upstream, \
            Gateway(upstream.base_url, CANARY_KEY, mode="chat", budget=budget, record=recorded.append) as gateway:
        client = sdk(gateway)
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "one"}])
        with pytest.raises(openai.APIStatusError) as refused:
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "two"}], stream=True)
        with pytest.raises(openai.APIStatusError) as refused_responses:
            list(client.responses.create(model="m", input="three", stream=True))
        anthropic = messages_call(gateway, {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]})
    assert asked == [Totals(0, 0, 0), Totals(1, 120, 30)]  # asked until it refused; then it stays refused
    assert (gateway.refusal, gateway.refused) == ("max_tokens 100 reached", 3)
    assert refused.value.status_code == 402 and refused_responses.value.status_code == 429
    error = refused.value.body
    assert error["message"] == "Logist stopped this run at its budget: max_tokens 100 reached"
    assert (error["type"], error["code"]) == ("insufficient_quota", "insufficient_quota")
    assert refused_responses.value.body == error
    assert refused.value.response.headers["x-should-retry"] == "false"
    assert anthropic.status_code == 402
    assert anthropic.json() == {"type": "error", "error": {"type": "billing_error", "message": error["message"]}}
    assert len(upstream.requests) == 1 and len(recorded) == 1


def test_the_record_exists_before_the_agent_reads_the_end_of_the_answer(recorded):
    """``record`` is slow here: the end of each answer must still wait for it."""
    def slow_record(exchange):
        threading.Event().wait(0.2)
        recorded.append(exchange)

    with ScriptedLLMServer(["streamed answer", "a response", "whole answer"]) as upstream, \
            Gateway(upstream.base_url, CANARY_KEY, mode="chat", record=slow_record) as gateway:
        client = sdk(gateway)
        chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
        with stream("POST", gateway.base_url + "/chat/completions", json=chat,
                          headers={"authorization": f"Bearer {gateway.token}"}) as answer:
            lines = []
            for line in answer.iter_lines():
                lines.append(line)
                if line == "data: [DONE]":
                    assert len(recorded) == 1
        assert "data: [DONE]" in lines
        for event in client.responses.create(model="m", input="hi", stream=True):
            if event.type == "response.completed":
                assert len(recorded) == 2
        client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}], stream=False)
        assert len(recorded) == 3


def test_an_answer_whose_record_failed_never_ends_for_the_agent():
    def failing_record(exchange):
        raise OSError("disk full")

    with ScriptedLLMServer(["streamed answer", "whole answer"]) as upstream, \
            Gateway(upstream.base_url, CANARY_KEY, record=failing_record) as gateway:
        client = sdk(gateway)
        got = []
        with pytest.raises(openai.APIConnectionError):
            for chunk in client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}],
                                                        stream=True):
                got.append(chunk)
        with pytest.raises(openai.APIConnectionError):
            client.chat.completions.create(model="m", messages=[{"role": "user", "content": "hi"}])
    assert "".join(c.choices[0].delta.content or "" for c in got if c.choices) == "streamed answer"
    assert gateway.unrecorded == ["call 1: OSError: disk full", "call 2: OSError: disk full"]


def test_the_endpoints_retry_and_rate_limit_headers_reach_the_agent(recorded):
    limits = {"x-ratelimit-remaining-tokens": "900", "x-request-id": "req_1", "x-internal": "kept back"}
    script = [Reply(status=429, error_message="slow down", headers={"retry-after-ms": "250", "x-should-retry": "false"}),
              Reply(content="ok", headers=limits)]
    with ScriptedLLMServer(script) as upstream, \
            Gateway(upstream.base_url, CANARY_KEY, record=recorded.append) as gateway:
        chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
        headers = {"authorization": f"Bearer {gateway.token}"}
        slow = request("POST", gateway.base_url + "/chat/completions", json=chat, headers=headers)
        whole = request("POST", gateway.base_url + "/chat/completions", json=chat, headers=headers)
    assert (slow.status_code, slow.headers["retry-after-ms"], slow.headers["x-should-retry"]) == (429, "250", "false")
    assert slow.json()["error"]["message"] == "slow down"
    assert recorded[0].status == 429 and recorded[0].error == "the model's endpoint answered 429: slow down"
    assert whole.headers["x-ratelimit-remaining-tokens"] == "900" and whole.headers["x-request-id"] == "req_1"
    assert "x-internal" not in whole.headers


def test_an_endpoint_that_cannot_be_reached_is_a_recorded_502(recorded):
    with ScriptedLLMServer() as upstream:
        gone = upstream.base_url
    with Gateway(gone, CANARY_KEY, mode="chat", record=recorded.append) as gateway:
        answer = messages_call(gateway, {"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "x"}]})
    assert answer.status_code == 502 and answer.json()["type"] == "error"
    assert recorded[0].status == 502 and "could not be reached" in recorded[0].error


def test_an_endpoint_that_answers_a_stream_whole_is_streamed_to_the_agent(recorded):
    with ScriptedLLMServer([Reply(content="whole all the same", usage=USAGE)], streaming="ignore") as upstream, \
            Gateway(upstream.base_url, CANARY_KEY, mode="chat", record=recorded.append) as gateway:
        answer = messages_call(gateway, {"model": "m", "max_tokens": 50, "stream": True,
                                         "messages": [{"role": "user", "content": "hi"}]})
    events = events_of(answer.text)
    assert events[0].name == "message_start" and events[-1].name == "message_stop"
    assert recorded[0].response["content"] == [{"type": "text", "text": "whole all the same"}]
    assert recorded[0].usage == {"input_tokens": 120, "output_tokens": 30} and recorded[0].error is None


def test_a_stream_that_breaks_off_is_recorded_and_ends_in_the_apis_failure(recorded):
    with ScriptedLLMServer([Reply(content="a long answer cut short", break_after=300)]) as upstream, \
            Gateway(upstream.base_url, CANARY_KEY, mode="chat", record=recorded.append) as gateway:
        events = list(sdk(gateway).responses.create(model="m", input="hi", stream=True))
    assert events[-1].type == "response.failed"
    assert recorded[0].status == 200 and recorded[0].response["status"] == "failed"
    assert recorded[0].error.startswith("the model's answer broke off")


def test_calls_made_at_once_are_each_recorded_once(recorded):
    from concurrent.futures import ThreadPoolExecutor

    with ScriptedLLMServer([Reply(content=f"answer {i}", usage=USAGE, pieces=3) for i in range(12)]) as upstream, \
            Gateway(upstream.base_url, CANARY_KEY, mode="chat", record=recorded.append) as gateway:
        client = sdk(gateway)

        def one(i: int) -> str:
            events = list(client.responses.create(model="m", input=f"question {i}", stream=True))
            return events[-1].response.output[0].content[0].text

        with ThreadPoolExecutor(4) as pool:
            answers = list(pool.map(one, range(12)))
    assert sorted(answers) == sorted(f"answer {i}" for i in range(12))
    assert sorted(r.number for r in recorded) == list(range(1, 13))
    assert sorted(r.response["output"][0]["content"][0]["text"] for r in recorded) == sorted(answers)
    assert gateway.totals == Totals(calls=12, input_tokens=12 * 120, output_tokens=12 * 30)


def test_an_agent_that_hangs_up_mid_stream_leaves_a_record_saying_so(recorded):
    done = threading.Event()

    def record(exchange):
        recorded.append(exchange)
        done.set()

    slow = Reply(content="a slow answer in many pieces, " * 4, pieces=40, piece_delay=0.05)
    with ScriptedLLMServer([slow]) as upstream, Gateway(upstream.base_url, CANARY_KEY, record=record) as gateway:
        chat = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
        with stream("POST", gateway.base_url + "/chat/completions", json=chat,
                          headers={"authorization": f"Bearer {gateway.token}"}) as answer:
            next(answer.iter_lines())
        assert done.wait(30)
    assert recorded[0].error.startswith("the agent closed the connection")
    # What came before it hung up (how much depends on when the gateway's write failed).
    assert recorded[0].response["object"] == "chat.completion" and recorded[0].events[-1] != {"data": "[DONE]"}
    assert len(upstream.requests) == 1
