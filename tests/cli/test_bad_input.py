"""Bad input ends in a recorded, one-line, named failure, never in "internal error".

Each case runs the real ``logist`` (its entry point, in the test's process:
tests/conftest.py) against a real HTTP server on 127.0.0.1 (the scripted
server's raw faults), or against job files damaged on disk, and checks what
a person sees (exit code, one line on stderr, no traceback) and what is on
record.
"""

from __future__ import annotations

import json
import shutil

import pytest

from conftest import logist_cli, write_config
from logist.store.session import JobFiles
from logist.engine.create import create_job
from logist.replay.scripted import Reply, ScriptedLLMServer, answer

CHUNK = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m",
         "choices": [{"index": 0, "delta": {"content": '{"action": '}, "finish_reason": None}]}

#: (case, the reply, what the reason must say, whether streaming is on)
FAULTS = [
    ("html, plain", Reply(body=b"<html><body>502 Bad Gateway</body></html>", content_type="text/html"),
     "HTTP 200 with a body that is not JSON (text/html", False),
    ("html, stream", Reply(body=b"<html><body>oops</body></html>", content_type="text/html"),
     "HTTP 200 with a body that is not JSON (text/html", True),
    ("json body, bad", Reply(body=b'{"choices": [', content_type="application/json"),
     "HTTP 200 with a body that is not JSON (application/json", False),
    ("not a completion", Reply(body=b'{"hello": "world"}'), "HTTP 200 with JSON that is not a chat completion", False),
    ("a list", Reply(body=b"[1, 2, 3]"), "HTTP 200 with JSON that is not a chat completion", True),
    ("error in a 200", Reply(body=b'{"error": {"message": "model overloaded"}}'),
     "HTTP 200 with an error: model overloaded", False),
    ("stream piece not JSON", Reply(body=b"data: " + json.dumps(CHUNK).encode() + b"\n\ndata: {oops\n\n",
                                    content_type="text/event-stream"),
     "HTTP 200 with a streamed piece that is not JSON", True),
    ("stream broken off", Reply(answer("MESSAGE", message="hi " * 50), break_after=300),
     "the connection was closed before the whole answer was received", True),
    ("stream reset", Reply(answer("MESSAGE", message="hi " * 50), break_after=300, reset=True),
     "the connection was reset while the answer was being received", True),
    ("whole answer reset", Reply(answer("MESSAGE", message="hi " * 50), break_after=40, reset=True),
     "the connection was reset while the answer was being received", False),
]


def _one_clean_line(result) -> str:
    assert "Traceback" not in result.stderr + result.stdout
    assert "internal error" not in result.stderr + result.stdout
    errors = [line for line in result.stderr.splitlines() if line.startswith(("Error", "Job "))]
    assert len(errors) == 1, result.stderr
    return errors[0]


@pytest.mark.parametrize("case, reply, reason, stream", FAULTS, ids=[f[0] for f in FAULTS])
def test_an_endpoint_fault_is_a_recorded_named_failure(jobs, case, reply, reason, stream):
    write_config(jobs, max_retries=2, stream=stream)
    create_job(jobs, "j", "Say hi")
    with ScriptedLLMServer([reply]) as server:
        result = logist_cli("job", "step", "j", "--base-url", server.base_url)
        # Not sent again: an answer had begun (and for a 200, was paid for).
        assert len(server.requests) == 1
        assert bool(server.requests[0].get("stream")) is stream
    assert result.returncode == 3, result.stderr
    line = _one_clean_line(result)
    assert reason in line and "needs intervention" in line
    manifest = jobs.job("j").manifest()
    assert str(manifest.status) == "INTERVENTION_REQUIRED"
    assert reason in manifest.reason and "\n" not in manifest.reason
    last = list(JobFiles(jobs.path / "j").entries())[-1]
    assert (last.kind, last.response.status, last.state_after) == ("llm_call", "FAILED", "INTERVENTION_REQUIRED")
    assert reason in last.response.error and "after 1 attempt" in last.response.error
    assert "cannot connect" not in last.response.error


def test_a_reset_before_any_answer_is_retried_and_named(jobs):
    write_config(jobs, max_retries=1, stream=False)
    create_job(jobs, "j", "Say hi")
    with ScriptedLLMServer([Reply(disconnect=True), Reply(disconnect=True)]) as server:
        result = logist_cli("job", "step", "j", "--base-url", server.base_url)
        assert len(server.requests) == 2  # no answer had begun: sent again, as max_retries says
    line = _one_clean_line(result)
    assert "after 2 attempts: the connection was reset or closed before an answer came" in line
    assert "cannot connect" not in line


def test_an_answer_over_the_size_limit_is_refused_and_stored_once_cut(jobs):
    """A 10 MB answer: refused with the limit named, its first
    max_answer_bytes kept once; the history stays near the limit, not 2 x 10 MB."""
    create_job(jobs, "j", "Ask something", max_answer_bytes=100_000)
    big = answer("ASK", question="q" * 10_000_000)  # a question is also kept in the state: twice if taken
    sizes = {}
    for stream in (True, False):
        write_config(jobs, stream=stream)
        with ScriptedLLMServer([Reply(big, pieces=500)]) as server:
            result = logist_cli("job", "step", "j", "--oneshot", "--base-url", server.base_url)
        assert result.returncode == 3, result.stderr
        line = _one_clean_line(result)
        assert "the answer was refused: the limit is 100,000 bytes" in line and "max_answer_bytes" in line
        assert ("it is 10,000,0" in line) is not stream  # a stream is not read to its end
        sizes[stream] = (jobs.path / "j" / "jobHistory.json").stat().st_size
        last = list(JobFiles(jobs.path / "j").entries())[-1]
        assert last.response.status == "FAILED" and len(last.response.raw_response.encode()) == 100_000
        assert last.response.raw_response == big[:100_000]
        assert last.usage.completion_tokens > 0  # the call was paid: counted
        logist_cli("job", "resubmit", "j")
    assert sizes[True] < 300_000 and sizes[False] < 500_000, sizes
    # The limit is a setting: job set raises it, and the next answer that fits goes through.
    raised = logist_cli("job", "set", "j", "--max-answer-bytes", "20000000", "--json")
    assert raised.returncode == 0, raised.stderr
    assert json.loads((jobs.path / "j" / "job_manifest.json").read_text())["settings"]["max_answer_bytes"] == 20_000_000


HISTORY_DAMAGE = {
    "empty": b"",
    "blank": b" \n\t\n",
    "truncated header": b'{\n  "$schema": "job-history.v2.sch',
    "header only": b'{\n  "$schema": "job-history.v2.schema.json",\n  "format": 2,\n  "job_id": "j",\n  "interactions": [',
}


@pytest.mark.parametrize("damage", list(HISTORY_DAMAGE))
def test_a_damaged_history_is_reported_then_repaired_by_the_next_step(jobs, damage):
    create_job(jobs, "j", "Say hi")
    job_dir = jobs.path / "j"
    (job_dir / "jobHistory.json").write_bytes(HISTORY_DAMAGE[damage])
    # Commands that only look say what is wrong in one line (or show the manifest).
    status = logist_cli("job", "status", "j")
    assert "Traceback" not in status.stderr and "internal error" not in status.stderr
    assert status.returncode == 0 and "PENDING" in status.stdout
    history = logist_cli("job", "history", "j")
    assert history.returncode == 1 and _one_clean_line(history).startswith("Error: ")
    assert "jobHistory.json is corrupt" in history.stderr and "repairs it" in history.stderr
    with ScriptedLLMServer([answer("MESSAGE", message="hi"), answer("MESSAGE", message="again")]) as server:
        step = logist_cli("job", "step", "j", "--oneshot", "--base-url", server.base_url)
    assert step.returncode == 0, step.stderr
    assert "Traceback" not in step.stderr and "internal error" not in step.stderr
    assert "repaired job j: " in step.stderr and "jobHistory.json is corrupt" in step.stderr
    # Nothing is lost: the damaged bytes are kept beside the new history.
    aside = [p for p in job_dir.iterdir() if p.name.startswith("jobHistory.json.corrupt-")]
    assert len(aside) == 1 and aside[0].read_bytes() == HISTORY_DAMAGE[damage]
    entries = list(JobFiles(job_dir).entries())
    assert [e.kind for e in entries] == ["repair", "llm_call"]
    assert entries[0].definition is not None  # the history alone can restore the manifest again
    assert [e.sequence for e in entries] == [1, 2]
    json.loads((job_dir / "jobHistory.json").read_bytes())
    listed = logist_cli("job", "history", "j")
    assert listed.returncode == 0 and "repair" in listed.stdout


INDEX_DAMAGE = {"empty": b"", "blank": b"\n  \n", "cut": b'{"jobs": {"a": ', "not an object": b"[]",
                "wrong types": b'{"jobs": 3}'}


@pytest.mark.parametrize("damage", list(INDEX_DAMAGE))
def test_a_damaged_jobs_index_is_rebuilt_from_the_job_folders(jobs, damage):
    create_job(jobs, "a", "First")
    create_job(jobs, "b", "Second")
    jobs.index_path.write_bytes(INDEX_DAMAGE[damage])
    listed = logist_cli("job", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    assert "Traceback" not in listed.stderr and "internal error" not in listed.stderr
    warnings = [line for line in listed.stderr.splitlines() if line.strip()]
    assert len(warnings) == 1 and "jobs_index.json is corrupt" in warnings[0]
    assert "rebuilt it from the 2 job folders" in warnings[0]
    assert sorted(job["job_id"] for job in json.loads(listed.stdout)["jobs"]) == ["a", "b"]
    index = json.loads(jobs.index_path.read_bytes())
    assert index["jobs"] == {"a": "a", "b": "b"} and index["queue"] == ["a", "b"] and index["current_job_id"] is None
    aside = [p for p in jobs.path.iterdir() if p.name.startswith("jobs_index.json.corrupt-")]
    assert len(aside) == 1 and aside[0].read_bytes() == INDEX_DAMAGE[damage]
    # Once rebuilt, no more warnings; a new job registers as usual.
    created = logist_cli("job", "create", "c", "-o", "Third")
    assert created.returncode == 0 and "corrupt" not in created.stderr
    assert json.loads(jobs.index_path.read_bytes())["queue"] == ["a", "b", "c"]


@pytest.mark.parametrize("folder", ["../outside/evil", "/OUTSIDE/evil", "a/../../outside/evil", "..", ".", ""])
def test_an_index_entry_naming_a_folder_outside_the_jobs_directory_is_never_followed(jobs, tmp_path, folder):
    """A job folder outside the jobs directory (a copy of a real job there),
    named by a hand-edited index: the index is corrupt, moved aside and
    rebuilt; nothing outside is read or written."""
    create_job(jobs, "a", "First")
    outside = tmp_path / "outside" / "evil"
    outside.parent.mkdir()
    shutil.copytree(jobs.path / "a", outside)
    before = {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()}
    index = json.loads(jobs.index_path.read_bytes())
    index["jobs"]["evil"] = folder.replace("/OUTSIDE", str(tmp_path / "outside"))
    jobs.index_path.write_text(json.dumps(index))
    shown = logist_cli("job", "status", "evil")
    assert shown.returncode == 2 and "Traceback" not in shown.stderr
    assert "not a folder inside the jobs directory" in shown.stderr and "no job 'evil'" in shown.stderr
    assert json.loads(jobs.index_path.read_bytes())["jobs"] == {"a": "a"}
    assert logist_cli("job", "set", "evil", "--max-steps", "5").returncode == 2
    assert {p: p.read_bytes() for p in outside.rglob("*") if p.is_file()} == before
