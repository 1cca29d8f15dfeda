"""Answers that wedged a job for good (issue 27, point 2): each is judged
before it is journalled as applicable, so it is an invalid answer with the
reason, recorded with the call; an exception no check foresaw is recorded
as a failed step (the answer kept, the journal closed, the job at
INTERVENTION_REQUIRED), never raised again by every later command. After
each, ``cancel``, ``restep`` and ``rerun`` work. Through the real CLI,
against the scripted OpenAI-compatible server."""

from __future__ import annotations

import json
import subprocess

import pytest

from logist.store.session import JobFiles
from logist import Status
from logist.engine.create import create_job
from logist.engine.call import request_of
from logist.engine.prepare import prepare
from logist.replay.scripted import Reply, answer
from logist.store.calls import SavedAnswer

from conftest import logist_cli

#: What a model can send that raised past the step before (the first five)
#: or was accepted without complaint (the rest), and the reason now recorded.
TRIGGERS = {
    "deep": ('{"action": "MESSAGE", "message": "x", "thought": ' + "[" * 100_000 + "]" * 100_000 + "}",
             "the answer is nested deeper than 64 levels"),
    "long-integer": ('{"action": "MESSAGE", "message": "x", "current_plan_step": ' + "9" * 5000 + "}",
                     "the answer holds a number longer than 100 digits"),
    "surrogate": ('{"action": "MESSAGE", "message": "x", "file_changes": [{"path": "a.txt", "content": "\\ud800"}]}',
                  "file_changes/0/content: holds a lone surrogate (\\ud800), which is not text"),
    "long-name": (json.dumps({"action": "MESSAGE", "message": "x", "file_changes": [{"path": "a" * 300, "content": "x"}]}),
                  "has a name of 300 bytes; a name may have at most 255"),
    "nul-command": (json.dumps({"action": "CMD", "command": "echo a\x00b"}),
                    "command: holds a NUL byte, which no shell command can carry"),
    "nan": ('{"action": "MESSAGE", "message": "x", "current_plan_step": NaN}', "the answer holds NaN, which is not JSON"),
    "infinity": ('{"action": "MESSAGE", "message": "x", "extra": -Infinity}', "the answer holds -Infinity, which is not JSON"),
    "huge-float": ('{"action": "MESSAGE", "message": "x", "current_plan_step": 1e999999}',
                   "the answer holds the number 1e999999, beyond the range of a number"),
}


def make_job(jobs, job_id: str):
    # Commands run without asking, so a command that reached a shell would run.
    return create_job(jobs, job_id, "Write hello.py that prints a greeting", command_policy="allow",
                      allowed_commands=["echo*"])


def cli_ok(*args: str, code: int = 0):
    done = logist_cli(*args)
    assert done.returncode == code, done.stderr
    return done


def last_entry(job):
    return JobFiles(job.dir).load_history().interactions[-1]


def git_status(job) -> str:
    return subprocess.run(["git", "status", "--porcelain"], cwd=job.workspace, capture_output=True, text=True,
                          check=True).stdout


def person_can_act(job) -> None:
    """restep, rerun and cancel each work (the wedge made every one fail)."""
    cli_ok("job", "restep", job.id, "--entry", "1")
    cli_ok("job", "rerun", job.id)
    cli_ok("job", "cancel", job.id)
    assert job.manifest().status == Status.CANCELED
    assert not JobFiles(job.dir).journal_path.exists()


@pytest.mark.wire
@pytest.mark.parametrize("name", sorted(TRIGGERS))
def test_an_answer_that_wedged_a_job_is_an_invalid_answer(jobs, llm, name):
    raw, reason = TRIGGERS[name]
    job = make_job(jobs, name)
    llm.add(raw)
    done = cli_ok("job", "step", name, "--oneshot", "--base-url", llm.base_url)
    assert "INVALID" in done.stderr
    entry = last_entry(job)
    assert (entry.sequence, entry.response.status) == (2, "INVALID")
    assert reason in entry.response.error
    assert entry.response.raw_response == raw  # the paid call is recorded with its answer, byte for byte
    assert entry.usage.completion_tokens > 0 and job.manifest().totals.llm_calls == 1
    assert not JobFiles(job.dir).journal_path.exists() and git_status(job) == ""
    assert job.manifest().status == Status.RUNNING  # re-asked, quoting the reason
    cli_ok("job", "status", name)
    cli_ok("job", "history", name)
    person_can_act(job)


@pytest.mark.parametrize("name", sorted(TRIGGERS))
def test_a_saved_answer_that_wedged_a_job_is_recorded_by_the_next_command(jobs, name):
    """The answer arrived and was journalled, and the process ended before
    it was applied: the next command (cancel here) applies it, once, as the
    invalid answer it is, and then does its own work."""
    raw, reason = TRIGGERS[name]
    job = make_job(jobs, name)
    saved_answer(job, raw)
    cli_ok("job", "cancel", name)
    recorded, cancel = JobFiles(job.dir).load_history().interactions[1:]
    assert (recorded.response.status, recorded.response.raw_response) == ("INVALID", raw)
    assert reason in recorded.response.error
    assert cancel.user_input.action == "cancel" and job.manifest().status == Status.CANCELED
    assert not JobFiles(job.dir).journal_path.exists()


def saved_answer(job, raw: str, phase=None) -> None:
    """The step's journal as a process killed right after the call's answer
    arrived leaves it (tests/store/test_crash.py kills a real one there)."""
    manifest = job.manifest()
    request = request_of(prepare(job, manifest))
    if phase is not None:
        request.metadata.phase = phase
    calling = JobFiles(job.dir).session.journal.begin_call(2, manifest.workspace_commit, f"{job.id}@t:2:abc", request)
    JobFiles(job.dir).session.journal.call_answered(calling, request, SavedAnswer(raw=raw, prompt_tokens=900, completion_tokens=70,
                                                                 duration_ms=1200))


# --------------------------------------------------------------------------
# The backstop: an exception no check foresaw


@pytest.fixture
def unchecked(monkeypatch):
    """The answer's own checks removed (as if a new trigger got past them):
    a lone surrogate in a file's content then raises UnicodeEncodeError
    while the change is written, as it did before they existed."""
    from logist.protocol import forms as answer_forms

    monkeypatch.setattr(answer_forms, "check_value", lambda value: None)


SURROGATE_WRITE = '{"action": "MESSAGE", "message": "writing", "file_changes": [' \
    '{"path": "ok.txt", "content": "fine\\n"}, {"path": "bad.txt", "content": "\\ud800"}]}'


@pytest.mark.wire
def test_an_exception_applying_an_answer_is_a_recorded_failed_step(jobs, llm, unchecked):
    job = make_job(jobs, "backstop")
    llm.add(SURROGATE_WRITE)
    done = cli_ok("job", "step", "backstop", "--oneshot", "--base-url", llm.base_url, code=3)  # needs a person
    assert "ERROR" in done.stderr
    entry = last_entry(job)
    assert (entry.sequence, entry.kind, entry.response.status) == (2, "llm_call", "FAILED")
    assert entry.response.raw_response == SURROGATE_WRITE
    assert entry.response.error.startswith("the answer could not be applied (UnicodeEncodeError: ")
    assert entry.usage.completion_tokens > 0 and job.manifest().totals.llm_calls == 1
    manifest = job.manifest()
    assert manifest.status == Status.INTERVENTION_REQUIRED and "could not be applied" in manifest.reason
    # Nothing of it stays in the workspace (ok.txt was written before bad.txt failed), and the journal is closed.
    assert not (job.workspace / "ok.txt").exists() and git_status(job) == ""
    assert not JobFiles(job.dir).journal_path.exists()
    shown = cli_ok("job", "status", "backstop").stdout
    assert "INTERVENTION_REQUIRED" in shown and "could not be applied" in shown
    person_can_act(job)


def test_an_exception_applying_a_saved_answer_is_recorded_once_not_on_every_command(jobs, unchecked):
    job = make_job(jobs, "saved")
    saved_answer(job, SURROGATE_WRITE)
    cli_ok("job", "suspend", "saved")  # before: every command raised UnicodeEncodeError, and went on raising it
    failed, suspended = JobFiles(job.dir).load_history().interactions[1:]
    assert (failed.response.status, failed.response.raw_response) == ("FAILED", SURROGATE_WRITE)
    assert "UnicodeEncodeError" in failed.response.error and RECOVERED in failed.note
    assert (failed.usage.prompt_tokens, failed.usage.completion_tokens) == (900, 70)
    assert suspended.user_input.action == "suspend" and not JobFiles(job.dir).journal_path.exists()
    assert git_status(job) == "" and not (job.workspace / "ok.txt").exists()
    cli_ok("job", "resume", "saved")
    assert job.manifest().status == Status.INTERVENTION_REQUIRED
    person_can_act(job)


RECOVERED = "the saved answer was applied when the job was next opened"


def test_a_saved_answer_the_job_no_longer_fits_is_recorded_not_raised(jobs):
    """The saved call was a summary call and the job's next call is not one
    (its config changed): that used to stop every command, cancel included,
    until the config was put back."""
    job = make_job(jobs, "changed")
    saved_answer(job, "A summary of the work so far.", phase="compaction")
    cli_ok("job", "cancel", "changed")
    failed, cancel = JobFiles(job.dir).load_history().interactions[1:]
    assert (failed.kind, failed.response.status) == ("compaction", "FAILED")
    assert failed.response.raw_response == "A summary of the work so far."
    assert "no longer fits the job's next call" in failed.response.error
    assert cancel.user_input.action == "cancel" and job.manifest().totals.llm_calls == 1


# --------------------------------------------------------------------------
# Usage the endpoint reports


@pytest.mark.wire
@pytest.mark.parametrize("usage, counted, note", [
    ({"prompt_tokens": 10**30, "completion_tokens": 5}, (1_000_000_000, 5),
     "the endpoint reported 1,000,000,000,000,000,000,000,000,000,000 prompt_tokens; counted as 1,000,000,000"),
    ({"prompt_tokens": 900, "completion_tokens": -3000}, (900, None),
     "the endpoint reported -3,000 completion_tokens, which is no count; it was estimated instead"),
])
def test_usage_out_of_bounds_is_capped_or_estimated_and_noted(jobs, llm, usage, counted, note):
    job = make_job(jobs, "usage")
    llm.add(Reply(answer("MESSAGE", message="hi"), usage=usage))
    cli_ok("job", "step", "usage", "--oneshot", "--base-url", llm.base_url)
    entry = last_entry(job)
    assert note in entry.note
    prompt, completion = counted
    assert entry.usage.prompt_tokens == prompt
    if completion is None:  # estimated from the text, as when no usage is sent
        assert entry.usage.estimated and 0 < entry.usage.completion_tokens < 100
    else:
        assert entry.usage.completion_tokens == completion
    totals = job.manifest().totals
    assert 0 <= totals.prompt_tokens <= 1_000_000_000 and totals.completion_tokens >= 0
    assert entry.usage.cost_usd is None or 0 <= entry.usage.cost_usd < 10_000


@pytest.mark.wire
def test_a_nul_byte_in_a_summary_reaches_no_git_argument(jobs, llm):
    """The commit message is made of the summary, and no process argument
    can carry a NUL byte (git commit -m raised ValueError, after the files
    were written): it is committed as U+2400."""
    job = make_job(jobs, "nul-summary")
    llm.add(answer("COMPLETED", "Wrote hello.py\x00 and checked it.", ["hello.py"],
                   file_changes=[{"path": "hello.py", "content": "print('Hello')\n"}]))
    cli_ok("job", "step", "nul-summary", "--oneshot", "--base-url", llm.base_url)
    entry = last_entry(job)
    assert entry.response.actions == ["COMPLETED"] and entry.response.files_changed == ["hello.py"]
    message = subprocess.run(["git", "log", "-1", "--format=%B"], cwd=job.workspace, capture_output=True, text=True,
                             check=True).stdout
    assert "Wrote hello.py\u2400 and checked it." in message


def test_a_posted_answer_with_a_lone_surrogate_is_recorded_as_an_invalid_answer(jobs):
    """``job poststep --response-string`` takes what the command line holds,
    and bytes that are not UTF-8 arrive as lone surrogates: kept as their
    escape, so the answer is recorded, and refused for the surrogate."""
    from logist.engine.step import post_answer

    job = make_job(jobs, "posted")
    result = post_answer(job, '{"action": "MESSAGE", "message": "caf\udce9"}')
    assert result.action == "INVALID" and "message: holds a lone surrogate (\\udce9)" in result.error
    assert last_entry(job).response.raw_response == '{"action": "MESSAGE", "message": "caf\\udce9"}'
    person_can_act(job)


@pytest.mark.wire
def test_a_file_change_through_a_pipe_a_command_made_is_an_invalid_answer(jobs, llm):
    """``mkfifo p``, then a file written as ``p/x.txt``: the plan took ``p``
    for a directory (it is not a file) and creating it raised
    FileExistsError after the journal said the answer was being applied."""
    job = create_job(jobs, "pipe", "Write hello.py that prints a greeting", command_policy="allow",
                     allowed_commands=["mkfifo*"])
    llm.add(answer("CMD", command="mkfifo p"),
            answer("MESSAGE", message="writing", file_changes=[{"path": "p/x.txt", "content": "x\n"}]))
    cli_ok("job", "step", "pipe", "--oneshot", "--base-url", llm.base_url)
    cli_ok("job", "step", "pipe", "--oneshot", "--base-url", llm.base_url)
    entry = last_entry(job)
    assert entry.response.status == "INVALID"
    assert "file_changes/0: cannot write p/x.txt: p is not a directory" in entry.response.error
    person_can_act(job)
