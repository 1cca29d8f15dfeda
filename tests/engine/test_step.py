"""Whole jobs through a real OpenAI-compatible server on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess

import pytest

from logist.store.session import JobFiles
from logist import Status
from logist.engine.create import create_job
from logist.engine.decide import user_action
from logist.engine.loop import run_job
from logist.engine.step import post_answer, step_once
from logist.store.jobsdir import JobsDir
from logist.errors import EndpointError, TransitionError
from logist.replay.scripted import Reply
from logist.replay.scripted import answer

from conftest import via, same_conversation, write_config




def make_job(jobs, job_id="hello", **kwargs):
    return create_job(
        jobs, job_id, "Write hello.py that prints a greeting",
        details="Use plain Python.", acceptance=["python hello.py prints Hello"], **kwargs,
    )


def git_log(workspace) -> list[str]:
    out = subprocess.run(["git", "log", "--format=%s"], cwd=workspace, capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def git_tree(workspace, rev="HEAD") -> dict[str, str]:
    out = subprocess.run(["git", "ls-tree", "-r", rev], cwd=workspace, capture_output=True, text=True, check=True)
    return {line.split("\t")[1]: line.split()[2] for line in out.stdout.splitlines()}


WRITE_HELLO = answer(
    "COMPLETED", "Wrote hello.py.", ["hello.py"],
    file_changes=[{"path": "hello.py", "content": "print('Hello')\n"}, {"path": "docs/notes.md", "content": "# Notes\n"}],
)


@pytest.mark.wire  # its snapshot holds each call's duration, which a call in memory (0 ms) leaves out
def test_default_workflow_end_to_end(jobs, llm, normalise, snapshot):
    job = make_job(jobs)
    llm.add(WRITE_HELLO, answer("COMPLETED", "hello.py prints Hello; criterion met.", ["hello.py"]))

    first = step_once(job, base_url=llm.base_url)
    assert (first.role, first.action, first.status) == ("Worker", "COMPLETED", Status.REVIEWING)
    assert (job.workspace / "hello.py").read_text() == "print('Hello')\n"
    assert first.files_changed == ["hello.py", "docs/notes.md"]

    second = step_once(job, base_url=llm.base_url)
    assert (second.role, second.status) == ("Supervisor", Status.APPROVAL_REQUIRED)
    user_action(job, "approve")
    manifest = job.manifest()
    assert manifest.status == Status.SUCCESS

    # One commit per changing step: the baseline and the Worker's step only.
    log = git_log(job.workspace)
    assert len(log) == 2
    assert log[0].startswith("logist: hello entry 2 Worker COMPLETED: Wrote hello.py.")

    entries = JobFiles(job.dir).load_history().interactions
    assert [e.sequence for e in entries] == [1, 2, 3, 4]
    assert [(e.kind, e.state_before, e.state_after) for e in entries] == [
        ("user_action", "DRAFT", "PENDING"),
        ("llm_call", "PENDING", "REVIEWING"),
        ("llm_call", "REVIEWING", "APPROVAL_REQUIRED"),
        ("user_action", "APPROVAL_REQUIRED", "SUCCESS"),
    ]
    call = entries[1]
    # The spec's fields, and the prompt exactly as the server received it.
    assert call.request.prompt[0].role == "system"
    assert [m.model_dump() for m in call.request.prompt] == llm.requests[0]["messages"]
    assert call.request.metadata.model == llm.requests[0]["model"] == "gpt-4o-mini"
    assert call.response.actions == ["COMPLETED"] and call.response.raw_response == WRITE_HELLO
    assert call.usage.prompt_tokens > 0 and call.usage.completion_tokens > 0
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=job.workspace, capture_output=True, text=True).stdout.strip()
    assert call.workspace_commit == entries[2].workspace_commit == head
    # No absolute path in the job's files: the workspace is always the job's workspace/.
    assert JobFiles(job.dir).load_history().workspace_path is None and call.workspace_path == "workspace"
    assert str(job.dir) not in job.history_path.read_text() + job.manifest_path.read_text()

    assert normalise(llm.requests) == snapshot(name="prompts")
    assert normalise(json.loads(job.manifest_path.read_text())) == snapshot(name="manifest")
    assert normalise(json.loads(job.history_path.read_text())) == snapshot(name="history")


def test_supervisor_retry_sends_feedback_to_worker(jobs, llm, normalise, snapshot):
    job = make_job(jobs)
    feedback = "hello.py prints 'Hi', not 'Hello'. Fix the string."
    llm.add(
        answer("COMPLETED", "Wrote hello.py.", ["hello.py"], file_changes=[{"path": "hello.py", "content": "print('Hi')\n"}]),
        answer("RETRY", feedback, ["hello.py"]),
        answer("COMPLETED", "Fixed the greeting.", ["hello.py"], file_changes=[{"path": "hello.py", "old": "Hi", "new": "Hello"}]),
        answer("COMPLETED", "Looks right now.", ["hello.py"]),
    )
    results = run_job(job, endpoints=llm.endpoints)
    assert [(r.role, r.action) for r in results] == [
        ("Worker", "COMPLETED"), ("Supervisor", "RETRY"), ("Worker", "COMPLETED"), ("Supervisor", "COMPLETED"),
    ]
    assert results[1].status == Status.RUNNING
    third_prompt = llm.requests[2]["messages"]
    assert len(third_prompt) == 2, "the Worker starts a fresh turn"
    assert feedback in third_prompt[1]["content"]
    assert "print('Hi')" in third_prompt[1]["content"], "the Worker sees the files as they are"
    assert (job.workspace / "hello.py").read_text() == "print('Hello')\n"
    assert job.manifest().status == Status.APPROVAL_REQUIRED
    assert normalise(third_prompt[1]["content"]) == snapshot


def _intervention(job, llm, *replies, **kw):
    llm.add(*replies)
    result = step_once(job, **via(llm), **kw)
    manifest = job.manifest()
    assert manifest.status == Status.INTERVENTION_REQUIRED
    return result, manifest


@pytest.mark.parametrize(
    "reply, reason_part",
    [
        (answer("STUCK", "I need the database password."), "STUCK: I need the database password."),
        ("Sure! Here is my answer: done.", "not valid JSON"),
        ('{"action": "COMPLETED", "summary_for_supervisor": "x"}', "'evidence_files' is a required property"),
        ('{"action": "LAUNCH"}', "'LAUNCH' is not one of"),
        (answer("MESSAGE", message="x", file_changes=[{"path": "../outside.txt", "content": "x"}]), "leaves the workspace"),
        (answer("MESSAGE", message="x", file_changes=[{"path": "/etc/passwd", "content": "x"}]), "is absolute"),
        (answer("MESSAGE", message="x", file_changes=[{"path": ".git/config", "content": "x"}]), "inside .git"),
    ],
    ids=["stuck", "not-json", "schema-missing-field", "schema-bad-action", "dotdot", "absolute", "dotgit"],
)
def test_failures_end_in_intervention_with_reason(jobs, llm, tmp_path, reply, reason_part):
    job = make_job(jobs, format_retries=0)
    llm.add(WRITE_HELLO)
    step_once(job, endpoints=llm.endpoints)  # an earlier entry that must stay intact
    before = job.history_path.read_bytes()
    head_before = git_tree(job.workspace)

    result, manifest = _intervention(job, llm, reply)
    assert reason_part in manifest.reason
    entries = JobFiles(job.dir).load_history().interactions
    assert job.history_path.read_bytes().startswith(before[: -len(b"\n  ]\n}\n")])
    assert len(entries) == 3
    last = entries[-1]
    assert last.response.raw_response == reply
    if reason_part.startswith("STUCK"):
        assert last.response.status == "SUCCESS"
    else:
        assert last.response.status == "INVALID" and reason_part in last.response.error
    assert git_tree(job.workspace) == head_before, "a refused answer changes nothing"
    assert not (tmp_path / "outside.txt").exists()


def test_symlink_escape_is_refused(jobs, llm, tmp_path):
    job = make_job(jobs, format_retries=0)
    outside = tmp_path / "outside"
    outside.mkdir()
    (job.workspace / "link").symlink_to(outside)
    subprocess.run(["git", "add", "-A"], cwd=job.workspace, check=True)
    subprocess.run(["git", "commit", "-qm", "link"], cwd=job.workspace, check=True)
    _, manifest = _intervention(job, llm, answer("MESSAGE", message="x", file_changes=[{"path": "link/evil.txt", "content": "x"}]))
    assert "symlink" in manifest.reason
    assert not (outside / "evil.txt").exists()


def _job_files(job) -> dict:
    """Every file of the job's folder but the lock and the views, with its bytes."""
    return {str(p.relative_to(job.dir)): p.read_bytes() for p in sorted(job.dir.rglob("*"))
            if p.is_file() and p.name not in (".lock", "transcript.md") and "/.git/" not in str(p)}


@pytest.mark.wire  # the client's retries
@pytest.mark.parametrize("status", [500, 429])
def test_server_errors_past_retries_keep_the_turn_to_go_on_with(jobs, llm, status):
    """A transient failure in the middle of a turn is recorded, the job stays
    where it was, and the next step sends the same conversation again."""
    write_config(jobs, max_retries=2)
    job = make_job(jobs, command_policy="allow", allowed_commands=["ls*"])
    llm.add(answer("CMD", command="ls"))
    step_once(job, base_url=llm.base_url)
    llm.add(*[Reply(status=status)] * 3)
    failed = step_once(job, base_url=llm.base_url)
    assert failed.interrupted and failed.status == Status.RUNNING
    assert f"after 3 attempts: HTTP {status}" in failed.error
    manifest = job.manifest()
    assert manifest.status == Status.RUNNING and manifest.reason is None and manifest.turn.rounds == 1
    entries = JobFiles(job.dir).load_history().interactions
    assert entries[-1].response.status == "FAILED" and entries[-1].response.fault == "transient"
    assert len(llm.requests) == 1 + 3
    llm.add(WRITE_HELLO)
    after = step_once(job, base_url=llm.base_url)
    assert after.status == Status.REVIEWING
    assert same_conversation(llm.requests[-1], llm.requests[1]), "the same conversation, sent again"
    # A loop of steps stops at the failure instead of calling again.
    job2 = make_job(jobs, "again")
    llm.add(*[Reply(status=status)] * 3)
    results = run_job(job2, base_url=llm.base_url)
    assert [r.action for r in results] == ["ERROR"] and llm.remaining == 0


@pytest.mark.wire  # the client's retries
def test_transient_error_is_retried_then_succeeds(jobs, llm):
    write_config(jobs, max_retries=2)
    job = make_job(jobs)
    llm.add(Reply(status=503), Reply(status=429), WRITE_HELLO)
    result = step_once(job, base_url=llm.base_url)
    assert result.status == Status.REVIEWING
    assert len(llm.requests) == 3


@pytest.mark.wire  # a read timeout
def test_server_timeout_keeps_the_turn(jobs, llm):
    write_config(jobs, request_timeout=0.3, max_retries=1)
    job = make_job(jobs)
    llm.add(Reply(content=WRITE_HELLO, delay=1.0))
    result = step_once(job, base_url=llm.base_url)
    assert result.interrupted and "timed out" in result.error
    assert job.manifest().status == Status.PENDING
    assert len(llm.requests) == 1, "a read timeout is not sent again"


def test_a_bad_request_stops_the_job_with_the_servers_words(jobs, llm):
    job = make_job(jobs)
    llm.add(Reply(status=400, error_message="This model's maximum context length is 4096 tokens"))
    _, manifest = _intervention(job, llm)
    assert "HTTP 400: This model's maximum context length is 4096 tokens" in manifest.reason


@pytest.mark.parametrize("status, hint", [
    (401, "set LOGIST_API_KEY or OPENAI_API_KEY"),
    (403, "the key is not allowed"),
    (404, "does the base URL end in /v1?"),
])
def test_setup_errors_leave_the_job_exactly_as_it_was(jobs, llm, status, hint):
    write_config(jobs, max_retries=0)
    job = make_job(jobs)
    before = _job_files(job)
    llm.add(Reply(status=status, error_message="Not Found" if status == 404 else "no"))
    with pytest.raises(EndpointError) as raised:
        step_once(job, endpoints=llm.endpoints)
    assert f"HTTP {status}" in str(raised.value) and hint in str(raised.value)
    assert "nothing was recorded" in str(raised.value)
    assert _job_files(job) == before, "no entry, no call counted, the same status"


def test_unreachable_endpoint_leaves_the_job_exactly_as_it_was(jobs):
    write_config(jobs, max_retries=0)
    job = make_job(jobs)
    before = _job_files(job)
    with pytest.raises(EndpointError, match=r"cannot connect: connection refused \(is the server running\?\)"):
        step_once(job, base_url="http://127.0.0.1:9/v1")
    assert _job_files(job) == before


def test_format_retries_reask_with_the_error(jobs, llm):
    job = make_job(jobs, format_retries=1)
    llm.add("not json at all", WRITE_HELLO)
    first = step_once(job, endpoints=llm.endpoints)
    assert first.action == "INVALID" and first.status == Status.RUNNING
    second = step_once(job, endpoints=llm.endpoints)
    assert second.status == Status.REVIEWING
    reask = llm.requests[1]["messages"]
    assert reask[2] == {"role": "assistant", "content": "not json at all"}
    assert "Your last answer was refused: the answer is not valid JSON" in reask[3]["content"]
    assert reask[3]["content"].endswith("[Step 2 of 100]")


def test_transitions_refused_with_current_state(jobs, llm):
    job = make_job(jobs)
    with pytest.raises(TransitionError, match=r"cannot approve job 'hello': it is PENDING"):
        user_action(job, "approve")
    user_action(job, "cancel")
    with pytest.raises(TransitionError, match=r"job 'hello' is CANCELED; it cannot be stepped"):
        step_once(job, endpoints=llm.endpoints)
    with pytest.raises(TransitionError, match="it is CANCELED"):
        user_action(job, "resume")


def test_reject_resubmit_suspend_resume(jobs, llm):
    job = make_job(jobs)
    llm.add(WRITE_HELLO, answer("COMPLETED", "ok", ["hello.py"]))
    run_job(job, endpoints=llm.endpoints)
    user_action(job, "reject", "Print it twice.")
    m = job.manifest()
    assert m.status == Status.PENDING and m.turn.role == "Worker" and "Print it twice." in m.turn.feedback
    user_action(job, "suspend")
    assert job.manifest().status == Status.SUSPENDED
    with pytest.raises(TransitionError, match="SUSPENDED"):
        step_once(job, endpoints=llm.endpoints)
    user_action(job, "resume")
    assert job.manifest().status == Status.PENDING
    llm.add(answer("STUCK", "Which greeting?"))
    step_once(job, endpoints=llm.endpoints)
    user_action(job, "resubmit", "Use Hello.")
    m = job.manifest()
    assert m.status == Status.PENDING and "Use Hello." in m.turn.feedback and m.reason is None
    assert "Print it twice." in llm.requests[-1]["messages"][1]["content"]


def test_ask_and_answer(jobs, llm):
    job = make_job(jobs)
    llm.add(answer("ASK", question="Which greeting?", required=False))
    result = step_once(job, endpoints=llm.endpoints)
    assert result.status == Status.INPUT_REQUIRED
    user_action(job, "answer", "Hello there")
    assert job.manifest().status == Status.RUNNING
    llm.add(WRITE_HELLO)
    step_once(job, endpoints=llm.endpoints)
    assert llm.requests[-1]["messages"][-1]["content"].startswith("User response: Hello there")


def test_max_steps_stops_before_calling(jobs, llm):
    job = make_job(jobs, max_steps=2)
    llm.add(answer("MESSAGE", message="thinking"), answer("MESSAGE", message="still thinking"))
    step_once(job, endpoints=llm.endpoints)
    step_once(job, endpoints=llm.endpoints)
    result = step_once(job, endpoints=llm.endpoints)
    assert result.status == Status.INTERVENTION_REQUIRED
    assert "max steps reached (2 of 2 steps)" in job.manifest().reason
    assert len(llm.requests) == 2


def test_poststep_and_live_step_leave_identical_job(tmp_path, llm, monkeypatch):
    """The same answers, once from the server and once posted, give the same files."""
    script = [
        answer("COMPLETED", "Wrote hello.py.", ["hello.py"], file_changes=[{"path": "hello.py", "content": "print('Hi')\n"}]),
        answer("RETRY", "Say Hello.", ["hello.py"]),
        answer("COMPLETED", "Fixed.", ["hello.py"], file_changes=[{"path": "hello.py", "old": "Hi", "new": "Hello"}]),
        answer("COMPLETED", "Good.", ["hello.py"]),
    ]

    def run(live: bool) -> tuple[dict, dict, dict]:
        jobs = JobsDir(tmp_path / "same-place")
        job = make_job(jobs)
        for raw in script:
            if live:
                llm.add(Reply(content=raw, usage=False))
                step_once(job, endpoints=llm.endpoints)
            else:
                post_answer(job, raw)
        manifest = json.loads(job.manifest_path.read_text())
        history = json.loads(job.history_path.read_text())
        tree = git_tree(job.workspace)
        import shutil

        shutil.rmtree(jobs.path)
        return manifest, history, tree

    live = run(True)
    posted = run(False)

    def strip(data):
        if isinstance(data, dict):
            # A live step and a posted answer differ only in the entry's kind,
            # in which totals count them (calls, or posted answers), in the
            # usage (the live calls' estimated, as the server sent none) and in
            # the key a live call was sent with.
            volatile = ("timestamp", "created_at", "updated_at", "duration_ms", "wall_ms", "kind", "totals", "usage",
                        "idempotency_key")
            return {k: strip(v) for k, v in data.items() if k not in volatile}
        if isinstance(data, list):
            return [strip(v) for v in data]
        return data

    assert {e["kind"] for e in live[1]["interactions"][1:]} == {"llm_call"}
    assert all(e["usage"]["estimated"] for e in live[1]["interactions"][1:])
    assert not any((e.get("usage") or {}).get("estimated") for e in posted[1]["interactions"][1:])
    assert {e["kind"] for e in posted[1]["interactions"][1:]} == {"poststep"}
    assert strip(live[0]) == strip(posted[0])
    assert strip(live[1]) == strip(posted[1])
    assert live[2] == posted[2]
    assert live[0]["status"] == "APPROVAL_REQUIRED"


def test_hand_edits_are_committed_on_their_own(jobs, llm):
    job = make_job(jobs)
    (job.workspace / "mine.txt").write_text("written by a person\n")
    llm.add(WRITE_HELLO)
    result = step_once(job, endpoints=llm.endpoints)
    assert git_log(job.workspace)[:2] == [
        "logist: hello entry 2 Worker COMPLETED: Wrote hello.py.",
        "logist: hello changes made by hand before entry 2",
    ]
    assert "mine.txt" in git_tree(job.workspace) and "mine.txt" not in result.files_changed


def test_a_steps_fsyncs_are_its_journals_and_its_entrys(jobs, llm, monkeypatch):
    """What a step with a file change fsyncs (the storage contract,
    logist/store/session.py): the step journal three times (before the
    call, with the answer, before the workspace changes), each with its
    folder, and the history's append; not the history's append journal,
    whose start the step journal records, nor the manifest."""
    import os
    from pathlib import Path

    job = make_job(jobs)
    llm.add(*(answer("MESSAGE", message=f"note {n}", file_changes=[{"path": "note.txt", "content": f"{n}\n"}])
              for n in range(3)))
    for _ in range(2):  # a call with a decoding schema not sent before keeps it in its file: not counted below
        step_once(job, **via(llm))
    synced: list[str] = []
    fsync = os.fsync

    def counted(fd):
        name = Path(os.readlink(f"/proc/self/fd/{fd}")).name
        synced.append("journal" if name.startswith(".step_journal.json.") else name)
        return fsync(fd)

    monkeypatch.setattr(os, "fsync", counted)
    result = step_once(job, **via(llm))
    assert result.commit and result.files_changed == ["note.txt"]
    assert synced == ["journal", job.dir.name] * 3 + ["jobHistory.json"]
