"""Every call is named by its key, sent as the ``Idempotency-Key`` header:
the same on every retry of the call, recorded in the entry's request
metadata, and made of the job, the step and the digest of the body's bytes
as sent (format 4's keys, over the messages' roles and texts, still name a
call made again across the upgrade)."""

from __future__ import annotations

import pytest

import hashlib
import json
import signal

from logist.store.atomic import compact_json
from logist.store.session import JobFiles
from logist.engine.create import create_job
from logist.engine.step import step_once
from logist.replay.scripted import Reply, ScriptedLLMServer, answer
from logist.engine.call import entry_key
from logist.store.calls import body_digest, call_key, key_digest, sent_digest

from conftest import logist_cli, logist_process

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
    assert key_digest(keys[0]) == sent_digest(compact_json(shown["request_body"]))

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
    assert key_digest(first) == sent_digest(compact_json(streamed))
    assert key_digest(second) == sent_digest(compact_json(plain))
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


class _BytesKept(ScriptedLLMServer):
    """The scripted server, keeping each request's body as the bytes it received."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.raw: list[bytes] = []

    def known(self, raw: bytes):
        self.raw.append(raw)
        return None  # parsed and answered as the scripted server does


def test_the_key_is_the_sha256_of_the_bytes_the_endpoint_received(jobs):
    job = create_job(jobs, "bytes", "Write hello.py that prints a greeting")
    with _BytesKept([DONE]) as server:
        step_once(job, base_url=server.base_url)
        (raw,), (headers,) = server.raw, server.headers
    assert key_digest(key_of(headers)) == hashlib.sha256(raw).hexdigest()
    assert next(v for k, v in headers.items() if k.lower() == "content-type") == "application/json"
    assert json.loads(raw) == server.requests[0] and raw == compact_json(server.requests[0])
    assert entry_key(job, job.manifest(), 2) == key_of(headers)


def test_a_call_of_unknown_outcome_recorded_in_format_4_is_made_again_with_its_key(jobs, llm):
    """A format 4 history's call of unknown outcome names its key (taken over
    the messages' roles and texts); the call made again after the upgrade,
    with the same body, is sent with that key, so a gateway that honours it
    does not charge twice."""
    job = create_job(jobs, "old", "Write hello.py that prints a greeting")
    llm.add(Reply(status=500, error_message="boom"))
    failed = step_once(job, endpoints=llm.endpoints)
    assert failed.error
    body = llm.requests[0]
    # The call of unknown outcome as format 4 recorded it: its key over the roles and texts.
    history = JobFiles(job.dir).load_history()
    entry = history.interactions[-1].dump()
    manifest = job.manifest()
    old_key = f"old@{manifest.created_at}:{entry['sequence']}:{body_digest(body)}"
    entry["request"]["metadata"]["idempotency_key"] = old_key
    entry["response"] = {**entry["response"], "status": "UNKNOWN", "error": "the call's outcome is unknown"}
    text = JobFiles(job.dir).history_path.read_text(encoding="utf-8")
    data = json.loads(text)
    data["format"], data["$schema"] = 4, "job-history.v4.schema.json"
    data["interactions"][-1] = entry
    JobFiles(job.dir).history_path.write_text(json.dumps(data, indent=2), encoding="utf-8")

    llm.add(DONE)
    step_once(job, endpoints=llm.endpoints)
    assert llm.requests[-1] == body
    assert key_of(llm.headers[-1]) == old_key, "the call made again keeps the key it was first sent with"
    assert key_of(llm.headers[-1]) != call_key("old", manifest.created_at, entry["sequence"], body)
    upgraded = JobFiles(job.dir).load_history()
    assert upgraded.interactions[-1].request.metadata.idempotency_key == old_key
    assert entry_key(job, job.manifest(), upgraded.interactions[-1].sequence) == old_key


def test_a_format_4_entry_shows_the_key_format_4_derived_before_and_after_the_upgrade(jobs, llm):
    """Format 4 left out a key its rule derived (the digest of the messages'
    roles and texts): read as it is, and once the file is rewritten in the
    current format (which marks the entry ``key_format`` 4), the entry shows
    that key, not one of the current rule."""
    job = create_job(jobs, "four", "Write hello.py that prints a greeting")
    llm.add(DONE)
    step_once(job, endpoints=llm.endpoints)
    body, manifest = llm.requests[0], job.manifest()
    files = JobFiles(job.dir)
    data = json.loads(files.history_path.read_text(encoding="utf-8"))
    assert data["interactions"][-1]["request"]["metadata"].get("idempotency_key") is None
    data["format"], data["$schema"] = 4, "job-history.v4.schema.json"
    files.history_path.write_text(json.dumps(data, indent=2), encoding="utf-8")
    format_4 = f"four@{manifest.created_at}:2:{body_digest(body)}"
    assert entry_json("four", 2)["request"]["metadata"]["idempotency_key"] == format_4

    done = logist_cli("job", "upgrade", "four")
    assert done.returncode == 0 and "to format 5" in done.stderr, done.stderr
    rewritten = json.loads(files.history_path.read_text(encoding="utf-8"))
    assert rewritten["format"] == 5
    assert rewritten["interactions"][-1]["request"]["metadata"]["key_format"] == 4
    assert entry_json("four", 2)["request"]["metadata"]["idempotency_key"] == format_4
    assert entry_key(job, job.manifest(), 2) == format_4


@pytest.mark.wire
def test_an_answer_saved_by_a_step_that_died_is_recorded_with_the_key_its_journal_names(jobs, llm):
    """A step killed after its answer was journalled is finished by the next
    command from the journal: the entry names the key the journal recorded
    as sent, which an older Logist derived by its own rule (format 4's, here),
    not one this Logist would derive from the entry."""
    job = create_job(jobs, "saved", "Write hello.py that prints a greeting")
    llm.add(DONE)
    died = logist_process("job", "step", "--oneshot", "saved", "--base-url", llm.base_url,
                          env={"LOGIST_FAILPOINT": "after_call"})
    assert died.returncode == -signal.SIGKILL, died.stderr
    journal_path = job.dir / "step_journal.json"
    journal = json.loads(journal_path.read_text(encoding="utf-8"))
    assert journal["answer"] and journal["key"] == key_of(llm.headers[0])
    body = llm.requests[0]
    older = f"saved@{job.manifest().created_at}:2:{body_digest(body)}"  # as format 4 made it
    journal["key"] = older
    journal_path.write_text(json.dumps(journal), encoding="utf-8")

    status = logist_cli("job", "status", "saved")
    assert status.returncode == 0, status.stderr
    ok = logist_cli("job", "set", "saved", "--max-steps", "40")  # a command that changes the job finishes the step first
    assert ok.returncode == 0, ok.stderr
    entry = JobFiles(job.dir).load_history().interactions[1]
    assert entry.response.raw_response == DONE and len(llm.requests) == 1
    assert entry.request.metadata.idempotency_key == older
    assert entry_key(job, job.manifest(), 2) == older
