"""Exit codes, the same for every command that runs steps (the table in
``logist/cli/app.py``): 0 done, 1 error, 2 usage, 3 a job needs a person,
4 a job stopped at a spent budget. Each through the real ``logist`` (its
entry point, in the test's process: tests/conftest.py) against a real server
on 127.0.0.1."""

from __future__ import annotations

import json

import pytest

from logist import Status
from logist.engine.create import create_job
from logist.engine.decide import user_action
from logist.engine.step import post_answer
from logist.cli.app import (EXIT_BUDGET, EXIT_CODES, EXIT_ERROR, EXIT_INTERRUPTED, EXIT_NEEDS_PERSON, EXIT_OK,
                            EXIT_USAGE)
from logist.replay.scripted import answer

from conftest import logist_cli

MESSAGE = json.dumps({"action": "MESSAGE", "message": "working on it"})
ASK = json.dumps({"action": "ASK", "question": "Which greeting?", "required": True})
COMPLETED = answer("COMPLETED", "done")
STUCK = answer("STUCK", "I cannot go on without the spec")

#: outcome -> (job settings, answers posted first, the answer the command applies, state after, code)
OUTCOMES = {
    "input": ({}, [], ASK, Status.INPUT_REQUIRED, EXIT_NEEDS_PERSON),
    "intervention": ({}, [], STUCK, Status.INTERVENTION_REQUIRED, EXIT_NEEDS_PERSON),
    "approval": ({}, [COMPLETED], COMPLETED, Status.APPROVAL_REQUIRED, EXIT_NEEDS_PERSON),
    "budget": ({"max_steps": 1}, [MESSAGE], MESSAGE, Status.INTERVENTION_REQUIRED, EXIT_BUDGET),
}

COMMANDS = {
    "job step": lambda url, raw: ["job", "step", "j", "--base-url", url],
    "job run": lambda url, raw: ["job", "run", "j", "--base-url", url],
    "job run --all": lambda url, raw: ["job", "run", "--all", "--base-url", url],
    "job poststep": lambda url, raw: ["job", "poststep", "j", "--response-string", raw],
}


def test_the_table_has_one_row_per_code():
    assert [code for code, _ in EXIT_CODES] == [EXIT_OK, EXIT_ERROR, EXIT_USAGE, EXIT_NEEDS_PERSON, EXIT_BUDGET,
                                               EXIT_INTERRUPTED] == [0, 1, 2, 3, 4, 130]


def test_the_states_that_exit_3_are_the_workflow_tables():
    """Made from the rows that stop a turn or make it wait for a person, not listed."""
    from logist.cli import app
    from logist.engine import workflow

    assert app.WAITING_FOR_PERSON is workflow.WAITING_FOR_PERSON
    assert workflow.NEEDS_PERSON == ("INPUT_REQUIRED", "APPROVAL_REQUIRED", "INTERVENTION_REQUIRED")
    assert workflow.WAITING_FOR_PERSON == workflow.NEEDS_PERSON + ("SUSPENDED",)
    assert ("waits for a person: INPUT_REQUIRED, APPROVAL_REQUIRED, INTERVENTION_REQUIRED, SUSPENDED"
            in app.exit_codes_help())


@pytest.mark.parametrize("outcome", OUTCOMES)
@pytest.mark.parametrize("command", COMMANDS)
def test_every_command_that_runs_steps_exits_alike(jobs, llm, command, outcome):
    settings, first, raw, state, code = OUTCOMES[outcome]
    job = create_job(jobs, "j", "Write hello.py", **settings)
    for earlier in first:
        post_answer(job, earlier)
    llm.add(raw)
    result = logist_cli(*COMMANDS[command](llm.base_url, raw))
    assert result.returncode == code, result.stderr
    assert "Traceback" not in result.stderr
    assert job.manifest().status == state
    line = result.stderr.strip().splitlines()[-1]
    if code == EXIT_BUDGET:
        assert "max steps reached" in result.stderr and "logist job set j --max-steps N" in result.stderr
    elif command != "job run --all":
        assert f"Job 'j'" in line and ("needs intervention" in line or str(state) in line), line


def test_job_run_on_a_job_that_waits_exits_3_and_says_what_to_do(jobs):
    job = create_job(jobs, "j", "Write hello.py")
    post_answer(job, ASK)
    result = logist_cli("job", "run", "j", "--base-url", "http://127.0.0.1:9/v1")
    assert result.returncode == EXIT_NEEDS_PERSON, result.stderr
    # It names what the job waits for: here a question, not a held command.
    assert result.stderr.strip() == "Job 'j' is INPUT_REQUIRED: answer its question (logist job answer TEXT)."
    as_json = logist_cli("job", "run", "j", "--json")
    assert as_json.returncode == EXIT_NEEDS_PERSON and json.loads(as_json.stdout) == []


def test_a_job_a_budget_stopped_exits_4_until_the_budget_is_raised(jobs, llm):
    job = create_job(jobs, "j", "Write hello.py", max_steps=1)
    post_answer(job, MESSAGE)
    first = logist_cli("job", "run", "j", "--base-url", llm.base_url)
    assert first.returncode == EXIT_BUDGET, first.stderr
    again = logist_cli("job", "step", "j", "--base-url", llm.base_url)
    assert again.returncode == EXIT_BUDGET, again.stderr
    assert "Job 'j' stopped at a budget: max steps reached (1 of 1 steps); raise it: logist job set j --max-steps N" in again.stderr
    assert llm.requests == []
    # A job stopped for another reason is not a budget's doing.
    other = create_job(jobs, "k", "Write hello.py")
    post_answer(other, STUCK)
    assert logist_cli("job", "run", "k").returncode == EXIT_NEEDS_PERSON


def test_done_is_0(jobs, llm):
    job = create_job(jobs, "j", "Write hello.py")
    llm.add(MESSAGE)
    step = logist_cli("job", "step", "j", "--oneshot", "--base-url", llm.base_url)
    assert step.returncode == EXIT_OK and job.manifest().status == Status.RUNNING, step.stderr
    post_answer(job, COMPLETED)
    post_answer(job, COMPLETED)
    user_action(job, "approve")
    finished = logist_cli("job", "run", "j")
    assert finished.returncode == EXIT_OK, finished.stderr
    assert finished.stderr.strip() == "Job 'j' is SUCCESS: nothing to run."
    # An answer posted to a finished job is not applied: that is an error.
    posted = logist_cli("job", "poststep", "j", "--response-string", MESSAGE)
    assert posted.returncode == EXIT_ERROR and "SUCCESS; it cannot be stepped" in posted.stderr


def test_errors_are_1(jobs):
    job = create_job(jobs, "j", "Write hello.py")
    user_action(job, "cancel")
    canceled = logist_cli("job", "run", "j")
    assert canceled.returncode == EXIT_ERROR
    assert canceled.stderr.strip() == "Error: job 'j' is CANCELED; it cannot be stepped: it was canceled"
    missing = logist_cli("job", "step", "nosuch")
    assert missing.returncode == EXIT_USAGE and "no job 'nosuch'" in missing.stderr


def test_usage_is_2(jobs):
    create_job(jobs, "j", "Write hello.py")
    for argv in (["job", "run", "j", "--no-such-option"], ["job", "run", "j", "--all"], ["job", "set", "j"]):
        result = logist_cli(*argv)
        assert result.returncode == EXIT_USAGE, (argv, result.stderr)
        assert result.stderr.startswith("Error: ") and len(result.stderr.strip().splitlines()) == 1


def test_replay_ends_with_the_code_of_the_state_it_reached(jobs, tmp_path):
    recorded = create_job(jobs, "recorded", "Write hello.py")
    post_answer(recorded, ASK)
    replay = create_job(jobs, "again", "Write hello.py")
    result = logist_cli("job", "replay", "again", "--history", str(recorded.history_path))
    assert result.returncode == EXIT_NEEDS_PERSON, result.stderr
    assert replay.manifest().status == Status.INPUT_REQUIRED
