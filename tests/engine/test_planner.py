"""The planned workflow: a Planner routes work to the job's roles (SPEC section 7)."""

from __future__ import annotations

import json

import pytest

from logist.store.session import JobFiles
from logist import Status
from logist.engine.create import create_job
from logist.engine.decide import user_action
from logist.engine.loop import run_job
from logist.engine.step import step_once
from logist.errors import LogistError

from conftest import logist_cli


def j(**data) -> str:
    return json.dumps(data)


PLAN = ["Write hello.py", "Review hello.py"]


def planner(step, send_to, message, action="MESSAGE", **extra):
    return j(action=action, plan=PLAN, current_plan_step=step, send_to=send_to, message=message,
             thought="private reasoning, not for the workers", **extra)


def test_planned_job_end_to_end(jobs, llm, normalise, snapshot):
    job = create_job(jobs, "plan", "Write hello.py that prints Hello", acceptance=["python hello.py prints Hello"],
                     workflow="planned")
    llm.add(
        planner(0, "Worker", "Write hello.py that prints Hello."),
        j(action="COMPLETED", evidence_files=["hello.py"], summary_for_supervisor="Wrote hello.py.",
          file_changes=[{"path": "hello.py", "content": "print('Hello')\n"}]),
        planner(1, "Supervisor", "Review hello.py against the criterion."),
        j(action="COMPLETED", evidence_files=["hello.py"], summary_for_supervisor="It prints Hello."),
        planner(1, "User", "Done.", action="COMPLETED", summary_for_supervisor="hello.py written and reviewed.",
                evidence_files=["hello.py"]),
    )
    results = run_job(job, endpoints=llm.endpoints)
    assert [(r.role, r.action) for r in results] == [
        ("Planner", "MESSAGE"), ("Worker", "COMPLETED"), ("Planner", "MESSAGE"), ("Supervisor", "COMPLETED"),
        ("Planner", "COMPLETED"),
    ]
    assert results[-1].status == Status.APPROVAL_REQUIRED
    m = job.manifest()
    assert m.plan == PLAN and m.current_plan_step == 1
    shown = logist_cli("job", "show", "plan")
    assert "Plan:\n    0. Write hello.py\n  > 1. Review hello.py\n" in shown.stdout, shown.stdout
    user_action(job, "approve")
    assert job.manifest().status == Status.SUCCESS

    planner_system = llm.requests[0]["messages"][0]["content"]
    assert "--- Roles you can address (send_to) ---\n- Worker: Implements the job" in planner_system
    assert "- Supervisor: Reviews" in planner_system and "- User: the person" in planner_system
    # The Worker sees the Planner's message and plan, never its reasoning.
    worker_prompt = llm.requests[1]["messages"]
    assert len(worker_prompt) == 2
    assert "## Your task (from the Planner)\nWrite hello.py that prints Hello." in worker_prompt[1]["content"]
    assert "private reasoning" not in json.dumps(worker_prompt)
    # The Worker's exit command returns to the Planner's own conversation.
    back = llm.requests[2]["messages"]
    assert back[-1]["content"].startswith("The Worker finished its turn with COMPLETED:\nWrote hello.py.\nEvidence files: hello.py")
    assert back[1] == llm.requests[0]["messages"][1] and len(back) == 4
    assert llm.requests[4]["messages"][-1]["content"].startswith("The Supervisor finished its turn with COMPLETED:")
    # The reasoning is in the record.
    assert "private reasoning" in JobFiles(job.dir).load_history().interactions[1].response.raw_response

    assert normalise(llm.requests[0]["messages"]) == snapshot(name="planner-first")
    assert normalise(llm.requests[2]["messages"][1:]) == snapshot(name="planner-after-worker")
    assert normalise(llm.requests[4]["messages"][-1]) == snapshot(name="planner-after-supervisor")


@pytest.mark.parametrize(
    "answer, error",
    [
        (planner(0, "Intern", "Do it."), "send_to: 'Intern' is not a role of this job (choose one of: Worker, Supervisor, User)"),
        (j(action="STUCK", send_to="User", evidence_files=[], summary_for_supervisor="x"),
         "the Planner's answer must carry message"),
    ],
    ids=["unknown-role", "missing-message"],
)
def test_invalid_planner_answers_are_reasked(jobs, llm, answer, error):
    job = create_job(jobs, "plan", "Anything", workflow="planned", format_retries=1)
    llm.add(answer, planner(0, "Worker", "Now properly."))
    first = step_once(job, endpoints=llm.endpoints)
    assert first.action == "INVALID" and first.status == Status.RUNNING
    second = step_once(job, endpoints=llm.endpoints)
    assert second.action == "MESSAGE" and job.manifest().turn.role == "Worker"
    reask = llm.requests[1]["messages"][-1]["content"]
    assert reask.startswith("Your last answer was refused: " + error)


@pytest.mark.parametrize(
    "answer, step, note",
    [
        (j(action="MESSAGE", plan=PLAN, current_plan_step=5, send_to="Worker", message="x"), len(PLAN) - 1,
         f"current_plan_step 5 is past the plan's last step ({len(PLAN) - 1}, counted from 0): read as {len(PLAN) - 1}"),
        (j(action="MESSAGE", current_plan_step=0, send_to="Worker", message="x"), None,
         "current_plan_step 0 was left out: there is no plan yet"),
    ],
    ids=["step-out-of-range", "step-without-a-plan"],
)
def test_a_plan_step_the_schema_allows_is_read_with_a_note(jobs, llm, answer, step, note):
    """The decoding schema allows any step from 0: the answer check reads one past the plan, not refuses it."""
    job = create_job(jobs, "plan", "Anything", workflow="planned", format_retries=0)
    llm.add(answer)
    first = step_once(job, endpoints=llm.endpoints)
    assert first.action == "MESSAGE" and job.manifest().turn.role == "Worker"
    assert job.manifest().current_plan_step == step
    assert note in job.load_history().interactions[-1].response.notes


def test_invalid_planner_answer_without_retries_needs_a_person(jobs, llm):
    job = create_job(jobs, "plan", "Anything", workflow="planned", format_retries=0)
    llm.add(planner(0, "Intern", "Do it."))
    step_once(job, endpoints=llm.endpoints)
    m = job.manifest()
    assert m.status == Status.INTERVENTION_REQUIRED and "'Intern' is not a role of this job" in m.reason


def test_planner_asks_the_user_and_gets_the_answer(jobs, llm):
    job = create_job(jobs, "plan", "Anything", workflow="planned")
    llm.add(j(action="ASK", plan=PLAN, current_plan_step=0, send_to="User", question="Which greeting?"))
    assert step_once(job, endpoints=llm.endpoints).status == Status.INPUT_REQUIRED
    user_action(job, "answer", "Hello")
    llm.add(planner(0, "Worker", "Print Hello."))
    step_once(job, endpoints=llm.endpoints)
    assert llm.requests[1]["messages"][-1]["content"].startswith("User response: Hello")


def test_reject_returns_to_the_planner_with_feedback(jobs, llm):
    job = create_job(jobs, "plan", "Anything", workflow="planned")
    llm.add(planner(0, "User", "Done.", action="COMPLETED", summary_for_supervisor="done", evidence_files=[]))
    step_once(job, endpoints=llm.endpoints)
    user_action(job, "reject", "Also write a test.")
    llm.add(planner(0, "Worker", "Write a test."))
    step_once(job, endpoints=llm.endpoints)
    last = llm.requests[-1]["messages"]
    assert len(last) == 4, "the Planner keeps its conversation"
    assert last[-1]["content"].startswith("A person reviewed the result and rejected it:\nAlso write a test.")


def test_planned_options_are_checked(jobs):
    with pytest.raises(LogistError, match="--role adds a role the Planner can address"):
        create_job(jobs, "x", "Anything", extra_roles=["Worker"])
    with pytest.raises(LogistError, match="workflow: Input should be 'default', 'planned' or 'solo'"):
        create_job(jobs, "y", "Anything", workflow="chaotic")


def test_a_later_planner_answer_names_its_plan_step_by_text(jobs, llm):
    """As docs/roles-and-prompts.md says: the plan sent once, a later answer
    names the current step by its text (TaskWeaver's habit) and is read."""
    job = create_job(jobs, "plan", "Write hello.py", workflow="planned", format_retries=0)
    llm.add(
        j(response={"thought": "t", "plan": "1. Write hello.py\n2. Review hello.py", "current_plan_step": "1. Write hello.py",
                    "send_to": "Worker", "message": "Write hello.py."}),
        j(action="COMPLETED", evidence_files=["hello.py"], summary_for_supervisor="Wrote hello.py.",
          file_changes=[{"path": "hello.py", "content": "print('Hello')\n"}]),
        j(response={"thought": "t", "current_plan_step": "Review hello.py", "send_to": "Supervisor",
                    "message": "Review hello.py."}),
    )
    results = [step_once(job, endpoints=llm.endpoints) for _ in range(3)]
    assert [r.action for r in results] == ["MESSAGE", "COMPLETED", "MESSAGE"], [r.error for r in results]
    m = job.manifest()
    assert m.plan == PLAN and m.current_plan_step == 1 and m.turn.role == "Supervisor"
    assert "current_plan_step 'Review hello.py' read as step 1 (counted from 0)" in \
        job.load_history().interactions[-1].response.notes
