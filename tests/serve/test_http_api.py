"""``logist serve``'s HTTP API, as another program uses it: plain
``urllib`` and the token against the real server process; a scripted
model answers the job's calls."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from logist.replay.scripted import answer

from conftest import write_config
from serving import served  # noqa: F401 - a fixture

pytestmark = pytest.mark.serve


def call(server, method: str, path: str, body=None, *, token: bool = True, headers=None):
    """(status, the JSON answer) of one request."""
    data = json.dumps(body).encode() if body is not None else None
    sent = {"Content-Type": "application/json"} if data is not None else {}
    if method != "GET":  # a change carries the server's own Origin (logist serve refuses one without)
        sent["Origin"] = server.base.rstrip("/")
    if token:
        sent["Authorization"] = f"Bearer {server.token}"
    request = urllib.request.Request(server.base.rstrip("/") + path, data=data, method=method,
                                     headers={**sent, **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        text = exc.read()
        try:
            return exc.code, json.loads(text)
        except ValueError:
            return exc.code, text.decode()


def test_a_program_lists_creates_runs_answers_approves_and_reads_the_history(jobs, llm, served):
    write_config(jobs, base_url=llm.base_url, default_model="scripted-model")
    server = served()
    assert call(server, "GET", "/api/v1/jobs") == (200, [])

    status, created = call(server, "POST", "/api/v1/jobs", {"job_id": "hello", "objective": "Write hello.py"})
    assert status == 200 and created["job_id"] == "hello" and created["status"] == "PENDING", created
    assert [j["job_id"] for j in call(server, "GET", "/api/v1/jobs")[1]] == ["hello"]

    llm.add(json.dumps({"action": "ASK", "question": "Which greeting?", "required": True}))
    status, steps = call(server, "POST", "/api/v1/jobs/hello/run")
    assert status == 200 and steps[-1]["status"] == "INPUT_REQUIRED", steps
    asked_at = call(server, "GET", "/api/v1/jobs/hello")[1]["last_sequence"]

    status, answered = call(server, "POST", "/api/v1/jobs/hello/decisions/answer", {"text": "Hi there", "at": asked_at})
    assert status == 200 and answered["status"] != "INPUT_REQUIRED", answered
    # A decision on an entry the job has left is refused, and nothing is done.
    status, refused = call(server, "POST", "/api/v1/jobs/hello/decisions/answer", {"text": "again", "at": asked_at})
    assert status == 409 and "moved on" in refused["error"], refused

    llm.add(answer("COMPLETED", summary="wrote hello.py", evidence_files=[]))
    llm.add(answer("COMPLETED", summary="looks right", evidence_files=[]))
    status, steps = call(server, "POST", "/api/v1/jobs/hello/run")
    assert status == 200 and steps[-1]["status"] == "APPROVAL_REQUIRED", steps
    status, approved = call(server, "POST", "/api/v1/jobs/hello/decisions/approve", {})
    assert status == 200 and approved["status"] == "SUCCESS", approved

    status, entries = call(server, "GET", "/api/v1/jobs/hello/entries")
    assert status == 200
    assert [e["sequence"] for e in entries] == list(range(1, len(entries) + 1))
    decided = [e["user_input"] for e in entries if e.get("user_input")]
    assert [(d["action"], d.get("text")) for d in decided] == [
        ("create", "Write hello.py"), ("answer", "Hi there"), ("approve", None)]
    assert call(server, "GET", f"/api/v1/jobs/hello/entries?after={entries[-2]['sequence']}")[1] == entries[-1:]
    manifest = call(server, "GET", "/api/v1/jobs/hello")[1]["manifest"]
    assert manifest["status"] == "SUCCESS" and manifest["last_sequence"] == entries[-1]["sequence"]


def test_the_token_and_the_origin_are_required_and_the_description_is_served(jobs, served):
    server = served()
    assert call(server, "GET", "/api/v1/jobs", token=False)[0] == 401
    assert call(server, "POST", "/api/v1/jobs", {"job_id": "x", "objective": "y"}, token=False)[0] == 401
    foreign = {"Origin": "http://evil.example"}
    assert call(server, "POST", "/api/v1/jobs", {"job_id": "x", "objective": "y"}, headers=foreign)[0] == 403
    assert call(server, "GET", "/api/v1/jobs", headers=foreign)[0] == 403
    assert not (jobs.path / "x").exists()
    assert call(server, "GET", "/api/v1/jobs/nope")[0] == 404
    assert call(server, "GET", "/api/v1/jobs/nope/entries?after=" + "9" * 5000)[0] in (400, 404)
    status, description = call(server, "GET", "/api/v1/openapi.json")
    assert status == 200 and description["openapi"].startswith("3.")
    assert {"/api/v1/jobs", "/api/v1/jobs/{job_id}/decisions/{action}", "/api/v1/jobs/{job_id}/events"} \
        <= set(description["paths"])


def test_the_event_stream_sends_each_entry_as_json(jobs, served):
    server = served()
    assert call(server, "POST", "/api/v1/jobs", {"job_id": "s", "objective": "Write s.py"})[0] == 200
    request = urllib.request.Request(server.base.rstrip("/") + "/api/v1/jobs/s/events?after=0",
                                     headers={"Authorization": f"Bearer {server.token}"})
    with urllib.request.urlopen(request, timeout=30) as response:
        assert response.headers["Content-Type"].startswith("text/event-stream")
        lines = []
        while not any(line.startswith("data: ") for line in lines):
            lines.append(response.readline().decode().rstrip("\n"))
    assert "id: 1" in lines and "event: entry" in lines
    entry = json.loads(next(line for line in lines if line.startswith("data: "))[6:])
    assert entry["sequence"] == 1 and entry["user_input"]["action"] == "create"
