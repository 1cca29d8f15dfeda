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
