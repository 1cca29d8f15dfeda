"""CMD, ASK and MESSAGE through whole steps, and skills in the prompt."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from logist.store.session import JobFiles
from logist import Status
from logist.engine.create import create_job
from logist.engine.decide import user_action
from logist.engine.loop import step_turn
from logist.engine.step import step_once
from logist.errors import LogistError, TransitionError

PY = sys.executable

CALC = "def add(a, b):\n    return a - b\n"
TEST_CALC = (
    "from calc import add\n\n"
    "assert add(2, 3) == 5, f'add(2, 3) returned {add(2, 3)}'\n"
    "print('all tests passed')\n"
)
RUN_TESTS = f"{PY} test_calc.py"


def a(action, **fields) -> str:
    if action in ("COMPLETED", "STUCK", "RETRY"):
        fields.setdefault("evidence_files", [])
        fields.setdefault("summary_for_supervisor", "done")
    return json.dumps({"action": action, **fields})


def calc_job(jobs, tmp_path, **kwargs):
    (tmp_path / "calc.py").write_text(CALC)
    (tmp_path / "test_calc.py").write_text(TEST_CALC)
    return create_job(
        jobs, "calc", "Make the tests pass", acceptance=[f"{RUN_TESTS} passes"],
        files=[str(tmp_path / "calc.py"), str(tmp_path / "test_calc.py")], **kwargs,
    )


def git_subjects(workspace) -> list[str]:
    out = subprocess.run(["git", "log", "--format=%s"], cwd=workspace, capture_output=True, text=True, check=True)
    return out.stdout.splitlines()


def test_worker_runs_tests_sees_failure_fixes_and_reruns(jobs, llm, tmp_path, normalise, snapshot):
    job = calc_job(jobs, tmp_path, allowed_commands=[f"{PY} test_calc.py*"])
    llm.add(
        a("CMD", command=RUN_TESTS),
        a("MESSAGE", message="add subtracts; fixing it", file_changes=[{"path": "calc.py", "old": "a - b", "new": "a + b"}]),
        a("CMD", command=RUN_TESTS),
        a("COMPLETED", evidence_files=["calc.py"], summary_for_supervisor="add() now adds; the tests pass."),
    )
    results = step_turn(job, endpoints=llm.endpoints)
    assert [r.action for r in results] == ["CMD", "MESSAGE", "CMD", "COMPLETED"]
    assert results[-1].status == Status.REVIEWING

    failing = llm.requests[1]["messages"][-1]["content"]
    assert "AssertionError: add(2, 3) returned -1" in failing and "Exit code: 1" in failing
    assert failing.endswith("[Step 2 of 100]")
    assert normalise(failing.replace(PY, "<python>")) == snapshot
    passing = llm.requests[3]["messages"][-1]["content"]
    assert "all tests passed" in passing and "Exit code: 0" in passing
    assert llm.requests[2]["messages"][-1]["content"].startswith("[Continue after informational message]")

    assert (job.workspace / "calc.py").read_text() == "def add(a, b):\n    return a + b\n"
    assert git_subjects(job.workspace) == [
        "logist: calc entry 3 Worker MESSAGE: add subtracts; fixing it",
        "logist: files given to job calc",
        "logist: baseline of job calc (empty workspace)",
    ]
    commands = [e.command for e in JobFiles(job.dir).load_history().interactions if e.command]
    assert [(c.decision, c.exit_code) for c in commands] == [("run", 1), ("run", 0)]


def test_policy_ask_holds_until_approved_or_skipped(jobs, llm, tmp_path):
    job = calc_job(jobs, tmp_path)  # default policy: ask
    llm.add(a("CMD", command=RUN_TESTS))
    result = step_once(job, endpoints=llm.endpoints)
    m = job.manifest()
    assert result.status == Status.INPUT_REQUIRED and m.pending_command == RUN_TESTS
    # The refusal names what it waits for: the held command, not a question.
    with pytest.raises(TransitionError, match=r"INPUT_REQUIRED; it cannot be stepped: decide on its held command \(logist job approve-command / skip-command\)$"):
        step_once(job, endpoints=llm.endpoints)
    with pytest.raises(TransitionError, match="waiting for a decision on a command"):
        user_action(job, "answer", "yes")
    after = user_action(job, "approve-command")
    assert after.status == Status.RUNNING and after.pending_command is None
    assert "returned -1" in after.turn.pending

    llm.add(a("CMD", command="rm -rf /tmp/nothing-here"))
    step_once(job, endpoints=llm.endpoints)
    assert "returned -1" in llm.requests[-1]["messages"][-1]["content"]
    user_action(job, "skip-command")
    llm.add(a("STUCK", summary_for_supervisor="cannot go on"))
    step_once(job, endpoints=llm.endpoints)
    assert llm.requests[-1]["messages"][-1]["content"].startswith("User skipped the command.")
    kinds = [(e.kind, e.user_input.action if e.user_input else None) for e in JobFiles(job.dir).load_history().interactions]
    assert ("user_action", "approve-command") in kinds and ("user_action", "skip-command") in kinds


def test_policy_deny_tells_the_model(jobs, llm, tmp_path):
    job = calc_job(jobs, tmp_path, command_policy="deny")
    llm.add(a("CMD", command=RUN_TESTS), a("STUCK", summary_for_supervisor="no commands"))
    first = step_once(job, endpoints=llm.endpoints)
    assert first.status == Status.RUNNING
    step_once(job, endpoints=llm.endpoints)
    told = llm.requests[1]["messages"][-1]["content"]
    assert told.startswith("The command was refused: this job's command policy does not allow running commands.")
    assert JobFiles(job.dir).load_history().interactions[-2].command.decision == "deny"


def test_policy_allow_runs_matches_and_holds_the_rest(jobs, llm, tmp_path):
    job = calc_job(jobs, tmp_path, allowed_commands=[f"{PY} test_calc.py*"])
    llm.add(a("CMD", command=RUN_TESTS), a("CMD", command="curl http://example.invalid"))
    assert step_once(job, endpoints=llm.endpoints).status == Status.RUNNING
    held = step_once(job, endpoints=llm.endpoints)
    assert held.status == Status.INPUT_REQUIRED
    assert job.manifest().pending_command == "curl http://example.invalid"


def test_command_sees_no_secret_and_is_cut_and_timed_out(jobs, llm, tmp_path, monkeypatch):
    canary = "canary-value-5d1c2f"
    monkeypatch.setenv("LOGIST_API_KEY", "sk-" + canary)
    monkeypatch.setenv("MY_SERVICE_TOKEN", canary)
    monkeypatch.setenv("DEPLOY_PASSWORD", canary)
    job = create_job(jobs, "env", "Inspect the environment", allowed_commands=["*"], command_timeout=1)
    m = job.manifest()
    m.settings.command_output_limit = 1000

    JobFiles(job.dir).session.write_manifest(m)
    llm.add(
        a("CMD", command="env"),
        a("CMD", command="sleep 20"),
        a("CMD", command=f"{PY} -c \"print('x' * 50000)\""),
        a("STUCK", summary_for_supervisor="done looking"),
    )
    results = step_turn(job, endpoints=llm.endpoints)
    assert [r.action for r in results] == ["CMD", "CMD", "CMD", "STUCK"]
    env_output = llm.requests[1]["messages"][-1]["content"]
    assert "PATH=" in env_output, "the command really ran"
    assert canary not in env_output
    timed_out = llm.requests[2]["messages"][-1]["content"]
    assert "did not finish within 1 s and was killed" in timed_out
    long_output = llm.requests[3]["messages"][-1]["content"]
    assert "characters cut from the middle" in long_output and len(long_output) < 2000


def test_ask_answer_skip_and_required(jobs, llm):
    job = create_job(jobs, "ask", "Write a README")
    llm.add(a("ASK", question="Which license?"))
    step_once(job, endpoints=llm.endpoints)
    with pytest.raises(LogistError, match="required; it cannot be skipped"):
        user_action(job, "answer", skip=True)
    with pytest.raises(TransitionError, match="holds no command"):
        user_action(job, "approve-command")
    user_action(job, "answer", "MIT")
    llm.add(a("ASK", question="Add a badge?", required=False))
    step_once(job, endpoints=llm.endpoints)
    assert llm.requests[-1]["messages"][-1]["content"].startswith("User response: MIT")
    user_action(job, "answer", skip=True)
    llm.add(a("STUCK", summary_for_supervisor="x"))
    step_once(job, endpoints=llm.endpoints)
    assert llm.requests[-1]["messages"][-1]["content"].startswith("User skipped the question.")


def test_skill_in_system_prompt(jobs, llm, normalise, snapshot):
    job = create_job(jobs, "docs", skill="write-docs", params={"module": "calc"})
    llm.add(a("STUCK", summary_for_supervisor="no module"))
    step_once(job, endpoints=llm.endpoints)
    system, opening = llm.requests[0]["messages"][0]["content"], llm.requests[0]["messages"][1]["content"]
    assert "--- Active Skill: write-docs ---\nWrite documentation for `calc` into `docs/calc.md`" in system
    assert "## Parameters\n- module: calc\n- output: docs/calc.md" in opening
    assert opening.endswith("[Step 1 of 30]")
    assert normalise(system) == snapshot(name="system")
    assert normalise(opening) == snapshot(name="opening")


def test_context_file_in_system_prompt(jobs, llm):
    (jobs.path / "context.md").write_text("All code is Python 3.11.")
    job = create_job(jobs, "ctx", "Anything")
    llm.add(a("STUCK", summary_for_supervisor="x"))
    step_once(job, endpoints=llm.endpoints)
    system = llm.requests[0]["messages"][0]["content"]
    assert "--- System Context ---\nAll code is Python 3.11.\n\n--- Role: Worker ---" in system
    (job.dir / "context.md").write_text("The job's own context wins.")
    user_action(job, "resubmit", "go on")
    llm.add(a("STUCK", summary_for_supervisor="x"))
    step_once(job, endpoints=llm.endpoints)
    assert "--- System Context ---\nThe job's own context wins." in llm.requests[1]["messages"][0]["content"]


def test_a_turn_goes_on_while_its_rows_say_so_and_an_interrupted_call_ends_the_loop(jobs, llm):
    """job step calls again while the workflow row a step applied leaves the
    turn going on (workflow.GOES_ON); a call the endpoint failed for now keeps
    the turn (row "call interrupted", turn "keep") but makes no further call."""
    from logist.replay.scripted import NO_RETRY, Reply

    job = create_job(jobs, "t", "Say hello")
    llm.add(a("MESSAGE", message="working on it"), Reply(status=503, headers=NO_RETRY), a("MESSAGE", message="unsent"))
    results = step_turn(job, endpoints=llm.endpoints)
    assert [(r.action, r.turn) for r in results] == [("MESSAGE", "continue"), ("ERROR", "keep")]
    assert results[-1].interrupted and results[-1].status == Status.RUNNING
    assert len(llm.requests) == 2, "no call after the interrupted one"


def test_an_empty_answer_to_a_required_question_is_refused_with_the_reason(jobs, llm):
    from logist.errors import UsageError

    job = create_job(jobs, "ask", "Write a README")
    llm.add(a("ASK", question="Which license?"))
    step_once(job, endpoints=llm.endpoints)
    before = job.history_path.read_bytes(), job.manifest_path.read_bytes()
    for empty in ("", "   \n"):
        with pytest.raises(UsageError, match=r"required, and an empty answer tells the model nothing"):
            user_action(job, "answer", empty)
    assert (job.history_path.read_bytes(), job.manifest_path.read_bytes()) == before, "nothing recorded"
    assert str(job.manifest().status) == "INPUT_REQUIRED"
    user_action(job, "answer", "MIT")
    assert str(job.manifest().status) != "INPUT_REQUIRED"
