"""The in-memory model (ScriptedModel) against the real scripted server: the
same script gives the same requests, the same history and the same job."""

from __future__ import annotations

import pytest

from logist.engine.create import create_job
from logist.engine.step import step_once
from logist.errors import LLMCallError
from logist.model.base import Request
from logist.replay.scripted import Reply, ScriptedLLMServer, ScriptedModel, answer
from logist.store.jobsdir import JobsDir

from conftest import Normaliser, write_config


def script() -> list:
    return [
        answer("MESSAGE", message="Looking.", file_changes=[{"path": "notes.md", "content": "one\n"}]),
        Reply(content=answer("MESSAGE", message="By tool."), tool_call="logist_answer",
              usage={"prompt_tokens": 900, "completion_tokens": 30}),
        Reply(content=answer("MESSAGE", message="No usage."), usage=False),
        Reply(status=503, error_message="the model is down"),
        "not json at all",
        answer("COMPLETED", "Wrote the notes.", evidence=["notes.md"]),
    ]


def run(tmp_path, name: str, **calls):
    jobs = JobsDir(tmp_path / name)
    jobs.init()
    write_config(jobs, max_retries=0)
    job = create_job(jobs, "same", "Write the notes")
    results = [step_once(job, **calls) for _ in script()]
    normalise = Normaliser(tmp_path / name)
    entries = [normalise({k: v for k, v in e.dump().items() if k != "duration_ms"}) for e in job.entries()]
    return [(r.action, r.status, r.error) for r in results], entries, job.manifest()


@pytest.mark.parametrize("streaming", [True, False])
def test_a_script_through_the_model_is_recorded_as_through_the_server(tmp_path, streaming):
    model = ScriptedModel(script(), streaming=streaming)
    with ScriptedLLMServer(script(), streaming=streaming) as server:
        over_the_wire = run(tmp_path, "wire", base_url=server.base_url)
    in_memory = run(tmp_path, "memory", endpoints=model.endpoints)
    # duration_ms aside (a call in memory may take under a millisecond, and then has none)
    assert in_memory[0] == over_the_wire[0]
    assert in_memory[1] == over_the_wire[1]
    assert in_memory[2].status == over_the_wire[2].status
    assert in_memory[2].totals.model_dump(exclude={"wall_ms"}) == over_the_wire[2].totals.model_dump(exclude={"wall_ms"})
    assert model.requests == server.requests
    def sent(headers: list[dict], name: str) -> list:
        return [next(v for k, v in h.items() if k.lower() == name) for h in headers]

    # The key: the job (created at another time), then the call and the body's digest, the same.
    assert [k.rsplit(":", 2)[1:] for k in sent(model.headers, "idempotency-key")] == \
        [k.rsplit(":", 2)[1:] for k in sent(server.headers, "idempotency-key")]
    assert sent(model.headers, "x-logist-job") == sent(server.headers, "x-logist-job") == ["same"] * len(script())
    usage = [e["usage"] for e in in_memory[1] if e.get("kind") == "llm_call" and e.get("usage")]
    assert {"prompt_tokens": 900, "completion_tokens": 30} in [
        {k: u[k] for k in ("prompt_tokens", "completion_tokens")} for u in usage]  # as the script gave it
    assert model.remaining == server.remaining == 0


def test_a_stream_is_told_piece_by_piece_and_an_answer_too_long_is_refused():
    model = ScriptedModel([Reply(content="abcdefgh", pieces=4), Reply(content="x" * 100)])
    body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True,
            "stream_options": {"include_usage": True}}
    told: list[int] = []
    reply = model.complete(Request(body, on_tokens=told.append, key_for=lambda sent: "the-key"))
    assert (reply.content, reply.streamed, reply.key, reply.finish_reason) == ("abcdefgh", True, "the-key", "stop")
    assert told[-1] == 4 and told == sorted(told)
    assert (reply.prompt_tokens, reply.completion_tokens) == (1, 2)  # the server's estimate of the text
    with pytest.raises(LLMCallError, match="the limit is 10 bytes") as refused:
        model.complete(Request(body, max_answer_bytes=10))
    assert refused.value.reply.content == "x" * 10
    with pytest.raises(LLMCallError, match="no answer left for request 3") as exhausted:
        model.complete(Request(body))
    assert exhausted.value.kind == "transient"
    assert len(model.requests) == 3


@pytest.mark.parametrize("fault", [dict(delay=1.0), dict(disconnect=True), dict(body=b"<html>"),
                                   dict(break_after=10), dict(piece_delay=0.1)])
def test_a_fault_of_the_wire_is_refused_when_scripted(fault):
    with pytest.raises(ValueError, match="a fault of the wire"):
        ScriptedModel([Reply(content="hi", **fault)])
