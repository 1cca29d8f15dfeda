"""Every call is named by its key, sent as the ``Idempotency-Key`` header:
the same on every retry of the call, recorded in the entry's request
metadata, and made of the job, the step and the digest of the body sent."""

from __future__ import annotations

import pytest

import json

from logist.store.session import JobFiles
from logist.engine.create import create_job
from logist.engine.step import step_once
from logist.replay.scripted import Reply, ScriptedLLMServer, answer
from logist.engine.call import entry_key
from logist.store.calls import body_digest, call_key, key_digest

from conftest import logist_cli

DONE = answer("COMPLETED", "Wrote hello.py.", ["hello.py"], file_changes=[{"path": "hello.py", "content": "print('Hello')\n"}])


def key_of(headers: dict):
    return next((v for k, v in headers.items() if k.lower() == "idempotency-key"), None)


def entry_json(job_id: str, number: int) -> dict:
    done = logist_cli("job", "history", job_id, "--entry", str(number), "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.mark.wire
def test_every_retry_of_a_call_carries_its_key_and_the_entry_records_it(jobs, llm):
    job = create_job(jobs, "hello", "Write hello.py that prints a greeting")
    llm.add(Reply(status=500), Reply(status=503), DONE)  # retried by the SDK: three requests, one call
    result = step_once(job, base_url=llm.base_url)
    assert result.action == "COMPLETED" and len(llm.requests) == 3
    keys = [key_of(h) for h in llm.headers]
    assert keys[0] and keys == [keys[0]] * 3, "every retry of the call carries the same key"
    assert llm.requests[0] == llm.requests[1] == llm.requests[2]

    shown = entry_json("hello", 2)
    assert shown["request"]["metadata"]["idempotency_key"] == keys[0]
    # The rebuilt request is what the server received, and the key names it.
    assert shown["request_body"] == llm.requests[0]
    manifest = job.manifest()
    assert keys[0] == call_key("hello", manifest.created_at, 2, llm.requests[0])
    assert key_digest(keys[0]) == body_digest(shown["request_body"])

    # The next call is another step: another key.
    llm.add(answer("COMPLETED", "hello.py prints Hello.", ["hello.py"]))
    step_once(job, base_url=llm.base_url)
    assert key_of(llm.headers[3]).startswith(f"hello@{manifest.created_at}:3:")
    # The file leaves out a key the entry's own step and body give; it is derived when read.
    assert JobFiles(job.dir).load_history().interactions[-1].request.metadata.idempotency_key is None
    assert entry_key(job, job.manifest(), 3) == key_of(llm.headers[3])
    assert len(set(key_of(h) for h in llm.headers)) == 2


def test_a_request_asked_again_without_a_stream_gets_its_own_key(jobs):
    """An endpoint that refuses a stream is asked again without it: another
    body, so another key (a gateway keeps its refusal under the first)."""
    job = create_job(jobs, "plain", "Write hello.py that prints a greeting")
    with ScriptedLLMServer([DONE], streaming="refuse") as server:
        step_once(job, base_url=server.base_url)
        streamed, plain = server.requests
        assert streamed["stream"] is True and "stream" not in plain
        first, second = (key_of(h) for h in server.headers)
    assert first != second
    assert key_digest(first) == body_digest(streamed) and key_digest(second) == body_digest(plain)
    call = JobFiles(job.dir).load_history().interactions[-1]
    assert call.request.metadata.idempotency_key is None and call.request.metadata.stream is None
    assert entry_key(job, job.manifest(), call.sequence) == second


@pytest.mark.wire
def test_a_run_asked_again_of_a_finished_job_returns_its_status(jobs, llm):
    """A batch task retried after its job got to rest (an earlier attempt
    finished it) gets the job's status back, and no call is made."""
    from logist import Status
    from logist.engine.decide import user_action
    from logist.engine.loop import run_to_rest
    from logist.errors import TransitionError

    job = create_job(jobs, "again", "Write hello.py that prints a greeting")
    llm.add(DONE, answer("COMPLETED", "hello.py prints Hello.", ["hello.py"]))
    first = run_to_rest(job, base_url=llm.base_url)
    assert (first.job_id, first.status, [r.role for r in first.results]) == (
        "again", Status.APPROVAL_REQUIRED, ["Worker", "Supervisor"])
    again = run_to_rest(job, base_url=llm.base_url)
    assert (again.status, again.results) == (Status.APPROVAL_REQUIRED, [])
    user_action(job, "approve")
    assert run_to_rest(job, base_url=llm.base_url).status == Status.SUCCESS
    assert len(llm.requests) == 2
    # A single step asked of it still says why it cannot be stepped; the CLI keeps its exit codes.
    try:
        step_once(job, base_url=llm.base_url)
    except TransitionError as exc:
        assert "SUCCESS" in str(exc)
    else:
        raise AssertionError("a finished job was stepped")
    done = logist_cli("job", "run", "again", "--base-url", llm.base_url)
    assert done.returncode == 0 and "SUCCESS: nothing to run" in done.stderr


def test_a_call_of_unknown_outcome_is_counted_and_shown(jobs, llm):
    """The journal says a call was in flight and nothing came back (a kill
    during the call: tests/store/test_crash.py does it with a real process)."""
    from logist.engine.call import request_of
    from logist.engine.prepare import prepare

    job = create_job(jobs, "lost", "Write hello.py that prints a greeting")
    manifest = job.manifest()
    prepared = prepare(job, manifest)
    JobFiles(job.dir).session.journal.begin_call(2, manifest.workspace_commit, "lost@t:2:abc", request_of(prepared))
    shown = logist_cli("job", "status", "lost")
    assert "Pending: step 2's call was in flight and is not recorded" in shown.stdout

    llm.add(DONE)
    step_once(job, endpoints=llm.endpoints)
    unknown, call = JobFiles(job.dir).load_history().interactions[1:]
    assert unknown.unknown_outcome and call.sequence == 3 and not call.unknown_outcome
    shown = logist_cli("job", "status", "lost")
    assert "Calls:   2 made to a model (1 of unknown outcome)" in shown.stdout and "Pending" not in shown.stdout
    assert "The call's outcome is unknown" in (job.dir / "transcript.md").read_text()
    report = logist_cli("job", "report", "lost", "--json")
    assert report.returncode == 0, report.stderr
    html = open(json.loads(report.stdout)["path"], encoding="utf-8").read()
    assert "<td>2 made to a model (1 of unknown outcome)</td>" in html and "The call's outcome is unknown; nothing was applied" in html


@pytest.mark.wire
def test_streamed_calls_of_a_process_share_one_connection(jobs, llm, monkeypatch):
    """The SDK stops reading a stream at its last event; the body's end,
    received with it, is taken (logist.model.client), so the connection goes
    back to the pool: the calls of a process open one connection between
    them, not one each (a TLS handshake each, with an https endpoint)."""
    import logist
    from logist.replay import scripted

    accepted = []
    serve = scripted._Server.process_request
    monkeypatch.setattr(scripted._Server, "process_request",
                        lambda server, request, address: (accepted.append(address), serve(server, request, address)))
    create_job(jobs, "j", "Write notes", max_steps=10)
    llm.add(*(answer("MESSAGE", message=f"note {i}") for i in range(3)))
    job = logist.open(jobs.path, base_url=llm.base_url).job("j")
    for _ in range(3):
        job.call()
    streamed = [body for body in llm.requests if body.get("stream")]
    assert len(streamed) == 3
    assert len(accepted) == 1, accepted
