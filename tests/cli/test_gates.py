"""A person's gates through the CLI: raising a spent budget (``job set``,
``job resubmit`` with budget options), answering without ambiguity, and
canceling being final. The real ``logist`` (its entry point, in the test's
process: tests/conftest.py) against a real server on 127.0.0.1."""

from __future__ import annotations

import json

from logist.store.session import JobFiles
from logist import Status
from logist.engine.create import create_job
from logist.engine.decide import user_action
from logist.engine.step import post_answer
from logist.replay.scripted import answer
from logist.store.recovery import definition_from_history

from conftest import logist_cli

MESSAGE = json.dumps({"action": "MESSAGE", "message": "Halfway: the greeting is drafted."})
ASK = json.dumps({"action": "ASK", "question": "Which greeting?", "required": True})
WRITE = answer("COMPLETED", "Wrote hello.py.", ["hello.py"],
               file_changes=[{"path": "hello.py", "content": "print('Hello')\n"}])
REVIEW = answer("COMPLETED", "hello.py prints Hello.", ["hello.py"])


def code(result, expected: int):
    assert result.returncode == expected, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert "Traceback" not in result.stderr
    return result


def stopped_at_max_steps(jobs, llm):
    """A job whose max_steps (1) stopped it after one real call."""
    code(logist_cli("job", "create", "j", "-o", "Write hello.py", "--max-steps", "1"), 0)
    llm.add(MESSAGE)
    code(logist_cli("job", "run", "j", "--base-url", llm.base_url), 4)
    job = jobs.job("j")
    assert job.manifest().status == Status.INTERVENTION_REQUIRED
    return job


def test_job_set_raises_a_spent_budget_and_the_job_goes_on_where_it_stopped(jobs, llm):
    job = stopped_at_max_steps(jobs, llm)

    raised = code(logist_cli("job", "set", "j", "--max-steps", "4"), 0)
    assert raised.stderr.strip() == "Job 'j' is RUNNING again: logist job run j goes on where it stopped."
    manifest = job.manifest()
    assert manifest.status == Status.RUNNING and manifest.settings.max_steps == 4 and manifest.reason is None
    last = JobFiles(job.dir).load_history().interactions[-1]
    assert (last.kind, last.user_input.action, last.user_input.text) == ("user_action", "set", "max_steps 1 -> 4")
    # The history alone still says what the job is now.
    assert definition_from_history(JobFiles(job.dir)).settings.max_steps == 4

    llm.add(WRITE, REVIEW)
    code(logist_cli("job", "run", "j", "--base-url", llm.base_url), 3)
    assert job.manifest().status == Status.APPROVAL_REQUIRED
    # The Worker's turn went on: its second call carried its first answer.
    assert len(llm.requests) == 3
    second = llm.requests[1]["messages"]
    assert any(m["role"] == "assistant" and m["content"] == MESSAGE for m in second)


def test_job_set_json_and_a_budget_still_spent(jobs, llm):
    job = stopped_at_max_steps(jobs, llm)
    result = code(logist_cli("job", "set", "j", "--max-tokens", "100000", "--json"), 0)
    data = json.loads(result.stdout)
    assert data["status"] == "INTERVENTION_REQUIRED"
    assert data["budgets"] == {"max_steps": 1, "max_cost_usd": None, "max_tokens": 100000, "max_wall_seconds": None}
    text = code(logist_cli("job", "set", "j", "--max-wall-seconds", "600"), 0)
    assert text.stderr.strip() == ("Job 'j' is still stopped: max steps reached (1 of 1 steps); "
                                   "raise it: logist job set j --max-steps N")
    assert code(logist_cli("job", "run", "j", "--base-url", llm.base_url), 4)
    assert len(llm.requests) == 1
    # Raised after all (the set entries in between are looked past).
    code(logist_cli("job", "set", "j", "--max-steps", "2"), 0)
    assert job.manifest().status == Status.RUNNING


def test_job_set_refuses_bad_values_and_no_values(jobs):
    create_job(jobs, "j", "Write hello.py")
    for argv, needle in ((["--max-steps", "0"], "--max-steps"), (["--max-cost", "-1"], "--max-cost"), ([], "at least one budget")):
        result = code(logist_cli("job", "set", "j", *argv), 2)
        assert needle in result.stderr and len(result.stderr.strip().splitlines()) == 1


def test_job_set_on_a_running_job_only_changes_its_budgets(jobs):
    job = create_job(jobs, "j", "Write hello.py")
    post_answer(job, MESSAGE)
    result = code(logist_cli("job", "set", "j", "--max-cost", "2.5"), 0)
    assert "budgets changed; it is RUNNING" in result.stderr
    assert job.manifest().settings.max_cost_usd == 2.5 and job.manifest().status == Status.RUNNING
    finished = create_job(jobs, "done", "Write hello.py")
    user_action(finished, "cancel")
    refused = code(logist_cli("job", "set", "done", "--max-steps", "9"), 1)
    assert "cannot set job 'done': it is CANCELED" in refused.stderr


def test_resubmit_takes_the_same_budget_options(jobs, llm):
    job = stopped_at_max_steps(jobs, llm)
    result = code(logist_cli("job", "resubmit", "j", "--max-steps", "5", "--feedback", "Keep it short", "--json"), 0)
    data = json.loads(result.stdout)
    assert data["status"] == "PENDING" and data["budgets"]["max_steps"] == 5
    llm.add(WRITE, REVIEW)
    code(logist_cli("job", "run", "j", "--base-url", llm.base_url), 3)
    assert "Keep it short" in json.dumps(llm.requests[1]["messages"])
    assert job.manifest().status == Status.APPROVAL_REQUIRED


def test_answer_refuses_a_word_that_could_be_a_job_but_is_not(jobs):
    job = create_job(jobs, "hello", "Write hello.py")
    post_answer(job, ASK)

    ambiguous = code(logist_cli("job", "answer", "yes"), 2)
    assert ambiguous.stderr.strip() == (
        "Error: 'yes' is not a job; to answer job 'hello' with it, say: logist job answer hello \"yes\"  "
        "(or: logist job answer --text \"yes\") (see 'logist job answer --help')")
    assert job.manifest().status == Status.INPUT_REQUIRED, "nothing was answered"
    # A job named without its answer, or an answer in pieces, is refused too.
    assert "give the answer" in code(logist_cli("job", "answer", "hello"), 2).stderr
    assert "one argument: quote it" in code(logist_cli("job", "answer", "hello", "Use", "MIT"), 2).stderr
    assert job.manifest().status == Status.INPUT_REQUIRED

    code(logist_cli("job", "answer", "--text", "yes"), 0)
    assert JobFiles(job.dir).load_history().interactions[-1].user_input.text == "yes"


def test_answer_forms_that_are_clear(jobs):
    forms = {
        "named": (["named", "Use the MIT license"], "Use the MIT license"),
        "current": (["Use the MIT license"], "Use the MIT license"),  # cannot be a job id: the current job
        "option": (["--job", "option", "yes"], "yes"),
        "text": (["text", "--text", "yes"], "yes"),
    }
    for job_id, (argv, text) in forms.items():
        job = create_job(jobs, job_id, "Write hello.py")  # and the current job
        post_answer(job, ASK)
        result = code(logist_cli("job", "answer", *argv, "--json"), 0)
        assert json.loads(result.stdout) | {"workspace_commit": None} == {
            "job_id": job_id, "status": "RUNNING", "role": "Worker", "workspace_commit": None}
        assert JobFiles(job.dir).load_history().interactions[-1].user_input.text == text


def test_cancel_is_final(jobs):
    job = create_job(jobs, "j", "Write hello.py")
    post_answer(job, MESSAGE)
    code(logist_cli("job", "cancel", "j"), 0)
    for command, word in (("rerun", "rerun"), ("restep", "restepped")):
        result = code(logist_cli("job", command, "j"), 1)
        assert result.stderr.strip() == (
            f"Error: job 'j' was canceled, and canceling is final: it cannot be {word} (create a new job to start again)")
    assert "cannot resume job 'j': it is CANCELED" in code(logist_cli("job", "resume", "j"), 1).stderr
    assert job.manifest().status == Status.CANCELED
    assert [e.kind for e in JobFiles(job.dir).load_history().interactions] == ["user_action", "poststep", "user_action"]
