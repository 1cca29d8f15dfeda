"""Each response_format a job's calls sent is kept once, in response_formats/,
and every call entry names it (logist.store.response_formats): through the
real engine, a real scripted HTTP server and real processes."""

from __future__ import annotations

import hashlib
import json
import shutil

import openai
import pytest

from logist.store.session import JobFiles
from logist.engine.create import create_job
from logist.engine.step import step_once
from logist.errors import CorruptFileError
from logist.replay.scripted import answer
from logist.replay.server import ReplayLLMServer
from logist.store.requests import HistoryReader

from conftest import via, logist_cli


def _three_calls(jobs, llm):
    job = create_job(jobs, "formats", "Write notes.txt")
    llm.add(answer("MESSAGE", message="looking"))
    llm.add(answer("MESSAGE", message="still looking"))
    llm.add(answer("COMPLETED", "Wrote notes.txt.", ["notes.txt"],
                   file_changes=[{"path": "notes.txt", "content": "notes\n"}]))
    for _ in range(3):
        assert step_once(job, **via(llm)).error is None
    return job


def test_every_call_entry_names_the_file_that_holds_what_it_sent(jobs, llm):
    job = _three_calls(jobs, llm)
    entries = [e for e in JobFiles(job.dir).entry_data() if e["kind"] == "llm_call"]
    assert len(entries) == len(llm.requests) == 3
    files = sorted((job.dir / "response_formats").glob("*.json"))
    assert len(files) == 1, "the turn sent one value three times: one file"
    for entry, received in zip(entries, llm.requests):
        reference = entry["request"]["metadata"]["response_format"]
        sha = hashlib.sha256(json.dumps(received["response_format"], separators=(",", ":")).encode()).hexdigest()[:32]
        assert reference == {"type": "json_schema", "file": f"response_formats/{sha}.json"}
        assert json.loads((job.dir / reference["file"]).read_text()) == received["response_format"]
        # The body rebuilt from the history is the body sent (the schema's keys in the order sent).
        rebuilt = JobFiles(job.dir).recorded_body(entry, HistoryReader(JobFiles(job.dir)).messages(entry["sequence"]))
        assert rebuilt == received
        assert json.dumps(rebuilt["response_format"]) == json.dumps(received["response_format"])
    # The schema is written once, not into the history.
    assert "additionalProperties" not in job.history_path.read_text()


def test_a_changed_or_missing_file_is_named_and_fsck_finds_it(jobs, llm, tmp_path):
    job = _three_calls(jobs, llm)
    entry = next(e for e in JobFiles(job.dir).entry_data() if e["kind"] == "llm_call")
    path = job.dir / entry["request"]["metadata"]["response_format"]["file"]
    path.write_text(path.read_text().replace("logist_answer", "another_name"))
    with pytest.raises(CorruptFileError, match="does not hold what the history recorded"):
        JobFiles(job.dir).recorded_body(entry, HistoryReader(JobFiles(job.dir)).messages(entry["sequence"]))
    done = logist_cli("job", "fsck", "formats", env={"LOGIST_JOBS_DIR": str(jobs.path)})
    assert done.returncode != 0 and "response_formats/" in done.stdout and "SHA-256 differs" in done.stdout
    path.unlink()
    with pytest.raises(CorruptFileError, match="is missing.*copy a job's folder whole"):
        JobFiles(job.dir).recorded_body(entry, HistoryReader(JobFiles(job.dir)).messages(entry["sequence"]))


def test_a_history_copied_alone_still_replays(jobs, llm, tmp_path):
    """The replay server matches a request's response_format by the digest the entry holds."""
    job = _three_calls(jobs, llm)
    alone = tmp_path / "alone" / "jobHistory.json"
    alone.parent.mkdir()
    shutil.copyfile(job.history_path, alone)
    with ReplayLLMServer(JobFiles(alone.parent).load_history()) as server:
        client = openai.OpenAI(base_url=server.base_url, api_key="x", max_retries=0)
        plain = {k: v for k, v in llm.requests[0].items() if k not in ("stream", "stream_options")}
        assert client.chat.completions.create(**plain).choices[0].message.content == answer("MESSAGE", message="looking")
        second = {k: v for k, v in llm.requests[1].items() if k not in ("stream", "stream_options")}
        other = {**second, "response_format": {"type": "json_object"}}
        with pytest.raises(openai.BadRequestError, match="response_format"):
            client.chat.completions.create(**other)
