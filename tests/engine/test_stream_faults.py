"""Faults inside an answer, named for what they are (issue 26, point 3),
against the scripted server sending raw streams: an error inside a stream,
a stream that ends without a finish_reason or [DONE], and an answer cut at
max_tokens (finish_reason length)."""

from __future__ import annotations

import json

import pytest

from logist.engine.create import create_job
from logist.engine.step import step_once
from logist.replay.scripted import Reply
from logist.store.manifest import Status
from logist.store.session import JobFiles

from conftest import write_config

#: What an endpoint's stream does when it fails: the wire (the real scripted server).
pytestmark = pytest.mark.wire


def sse(*events: dict, done: bool = True) -> bytes:
    body = b"".join(b"data: " + json.dumps(e).encode() + b"\n\n" for e in events)
    return body + (b"data: [DONE]\n\n" if done else b"")


def chunk(content: str = "", finish: str | None = None) -> dict:
    return {"id": "c", "object": "chat.completion.chunk", "model": "gpt-4o-mini",
            "choices": [{"index": 0, "delta": {"content": content}, "finish_reason": finish}]}


def test_an_error_inside_a_stream_is_said_in_the_servers_own_words(jobs, llm):
    write_config(jobs, max_retries=0)
    job = create_job(jobs, "j", "Write hello.py")
    error = {"error": {"message": "Requested tokens (2121) exceed context window of 2048", "type": "internal"}}
    llm.add(Reply(body=sse(error, done=False), content_type="text/event-stream"))
    result = step_once(job, base_url=llm.base_url)
    assert "Requested tokens (2121) exceed context window of 2048" in result.error
    assert "no choices" not in result.error
    entry = JobFiles(job.dir).load_history().interactions[-1]
    assert entry.response.status == "FAILED" and "exceed context window of 2048" in entry.response.error
    assert result.status == Status.INTERVENTION_REQUIRED


def test_a_stream_that_ends_before_the_answer_is_the_endpoints_fault_not_an_invalid_answer(jobs, llm):
    write_config(jobs, max_retries=0)
    job = create_job(jobs, "j", "Write hello.py")
    llm.add(Reply(body=sse(chunk('{"action": "MESSAGE", '), done=False), content_type="text/event-stream"))
    result = step_once(job, base_url=llm.base_url)
    assert result.action == "ERROR" and result.interrupted and result.status == Status.PENDING
    assert "stream ended without finishing the answer" in result.error and "no finish_reason" in result.error
    entry = JobFiles(job.dir).load_history().interactions[-1]
    assert entry.response.status == "FAILED" and entry.response.fault == "transient"
    assert entry.response.raw_response == '{"action": "MESSAGE", ', "what came is kept"
    assert "JSON" not in entry.response.error, "not re-asked as an invalid answer"
    # The next step sends the same conversation again, not a re-ask.
    llm.add('{"action": "MESSAGE", "message": "hi"}')
    step_once(job, base_url=llm.base_url)
    assert "refused" not in llm.requests[-1]["messages"][-1]["content"]


def test_an_answer_cut_at_max_tokens_is_recorded_as_cut_and_re_asked_shorter(jobs, llm):
    job = create_job(jobs, "j", "Write hello.py")
    llm.add(Reply(body=sse(chunk('{"action": "COMPLETED", "summary_for'), chunk("", "length")),
                  content_type="text/event-stream"))
    result = step_once(job, base_url=llm.base_url)
    assert result.action == "INVALID" and result.status == Status.RUNNING
    entry = JobFiles(job.dir).load_history().interactions[-1]
    assert entry.response.finish_reason == "length"
    assert entry.response.error.startswith("the answer was cut at ") and "(max_tokens 2,048)" in entry.response.error
    assert "JSON" not in entry.response.error
    llm.add('{"action": "MESSAGE", "message": "short"}')
    step_once(job, base_url=llm.base_url)
    reask = llm.requests[-1]["messages"][-1]["content"]
    assert "the answer was cut at" in reask and "answer again, shorter" in reask


# The endpoint's own words reach the user ------------------------------------------------------------------

LLAMA_CPP_CONTEXT_ERROR = {"error": {
    "code": 400, "message": "the request exceeds the available context size, try increasing it",
    "type": "exceed_context_size_error", "n_prompt_tokens": 2077, "n_ctx": 2048}}


def test_llama_cpps_context_error_in_a_stream_is_in_the_steps_line_and_the_history(jobs, llm):
    from conftest import logist_cli

    write_config(jobs, max_retries=0)
    create_job(jobs, "j", "Write hello.py")
    llm.add(Reply(body=sse(LLAMA_CPP_CONTEXT_ERROR, done=False), content_type="text/event-stream"))
    run = logist_cli("--jobs-dir", str(jobs.path), "job", "step", "j", "--base-url", llm.base_url)
    said = ("the request exceeds the available context size, try increasing it "
            "(the request's tokens 2,077, the server's context size 2,048)")
    line = next(line for line in run.stderr.splitlines() if line.lstrip().startswith("#2 Worker ERROR"))
    assert said in line, run.stderr
    assert "APIError" not in line
    entry = JobFiles(jobs.path / "j").load_history().interactions[-1]
    assert said in entry.response.error


@pytest.mark.parametrize("status, body, said", [
    (400, {"object": "error", "message": "This model's maximum context length is 2048 tokens. However, you "
           "requested 2077 tokens (1053 in the messages, 1024 in the completion).", "type": "BadRequestError",
           "param": None, "code": 400}, "This model's maximum context length is 2048 tokens. However, you requested"),
    (500, {"error": "model requires more system memory (5.2 GiB) than is available (3.1 GiB)"},
     "HTTP 500: model requires more system memory (5.2 GiB) than is available (3.1 GiB)"),
    (400, LLAMA_CPP_CONTEXT_ERROR, "HTTP 400: the request exceeds the available context size, try increasing it"),
    (429, {"error": {"message": "Rate limit reached for gpt-4o-mini", "type": "requests", "code": "rate_limit_exceeded"}},
     "HTTP 429: Rate limit reached for gpt-4o-mini"),
], ids=["vllm", "ollama", "llama.cpp", "openai"])
def test_an_error_body_is_said_in_the_endpoints_own_words(jobs, llm, status, body, said):
    write_config(jobs, max_retries=0)
    job = create_job(jobs, "j", "Write hello.py")
    llm.add(Reply(body=json.dumps(body).encode(), status=status))
    result = step_once(job, base_url=llm.base_url)
    assert said in result.error
    assert said in JobFiles(job.dir).load_history().interactions[-1].response.error


def test_a_cut_stream_names_the_servers_window_when_the_request_is_near_it(jobs, llm):
    write_config(jobs, max_retries=0)
    job = create_job(jobs, "j", "Write hello.py", details="word " * 1500)
    llm.extra_get = lambda path: {"default_generation_settings": {"n_ctx": 2048}} if path.endswith("/props") else None
    llm.add(Reply(body=sse(done=False), content_type="text/event-stream"))
    result = step_once(job, base_url=llm.base_url)
    assert "stream ended without finishing the answer" in result.error
    assert "likely cause: the request (about" in result.error
    assert "may not fit the server's context window of 2,048 tokens (/props)" in result.error
    assert "interrupt" not in result.error


def test_a_cut_stream_with_another_request_in_flight_names_the_interruption(jobs, llm):
    import threading

    from logist.model.client import Endpoints

    write_config(jobs, max_retries=0)
    first, second = create_job(jobs, "a", "Write hello.py"), create_job(jobs, "b", "Write hello.py")
    llm.add(Reply(body=sse(done=False), content_type="text/event-stream", delay=1.0),
            '{"action": "MESSAGE", "message": "hi"}')
    shared = Endpoints()
    results = {}
    cut = threading.Thread(target=lambda: results.update(a=step_once(first, base_url=llm.base_url, endpoints=shared)))
    cut.start()
    while len(llm.requests) < 1:  # the first request is being answered (slowly)
        threading.Event().wait(0.02)
    results["b"] = step_once(second, base_url=llm.base_url, endpoints=shared)
    cut.join()
    assert "another request to the same endpoint was in flight at the same time" in results["a"].error
    assert "interrupt_requests" in results["a"].error
    assert results["b"].error is None


def test_a_cut_stream_with_no_cause_found_says_where_to_look(jobs, llm):
    write_config(jobs, max_retries=0)
    job = create_job(jobs, "j", "Write hello.py")
    llm.add(Reply(body=sse(done=False), content_type="text/event-stream"))
    result = step_once(job, base_url=llm.base_url)
    assert "the server's log says why" in result.error
