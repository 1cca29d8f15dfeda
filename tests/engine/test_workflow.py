"""The workflow table, walked row by row with real jobs.

Each *position* is a real job put in one state with one role's turn, by
answers posted through :func:`post_answer` and a person's
:func:`user_action` (the same code as a live step after the call). Each
row is fired at every position it covers; the expected state is worked out
here from the position, not from the engine's resolver. A row that no walk
reaches fails :func:`test_every_row_is_walked`, so a new row needs a way to
fire it (:data:`FIRES`) and a position (:data:`POSITIONS`).

Building a position takes several steps, so each is built once per set of
job settings and copied for every walk that starts from it.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Optional

import pytest

from logist.store.session import JobFiles
from logist import Status
from logist.engine.checks import check_job
from logist.engine.create import create_job
from logist.engine.decide import user_action
from logist.engine.step import post_answer
from logist.store.jobsdir import JobsDir
from logist.engine import workflow as wf
from logist.engine.workflow import ADDRESSED, PERSON, PLANNER, SUPERVISOR, TABLE, WORKER
from logist.errors import TransitionError
from logist.resources import data_dir

from conftest import REPO_ROOT, logist_cli

E = wf.Event

S = Status
PLAN = ["Write hello.py", "Review it"]


def exit_(action: str, summary: str = "done") -> str:
    return json.dumps({"action": action, "evidence_files": [], "summary_for_supervisor": summary})


def msg(text: str = "a progress note") -> str:
    return json.dumps({"action": "MESSAGE", "message": text})


def plan(send_to: str, action: str = "MESSAGE", **extra) -> str:
    if action in ("COMPLETED", "RETRY", "STUCK"):
        extra.setdefault("evidence_files", [])
        extra.setdefault("summary_for_supervisor", "planned")
    return json.dumps({"action": action, "plan": PLAN, "current_plan_step": 0, "send_to": send_to,
                       "message": f"{action} for {send_to}", **extra})


def ask(who: str) -> str:
    if who == PLANNER:
        return plan("User", "ASK", question="Which greeting?", required=False)
    return json.dumps({"action": "ASK", "question": "Which greeting?", "required": False})


def post(job, *answers: str) -> None:
    for raw in answers:
        post_answer(job, raw)


# Positions: a job in a state, in a role's turn. ``build`` makes it from a
# fresh job (default or planned workflow); ``resume`` is the state RESUME
# leads back to there; ``retries`` the RETRYs in a row it has made.


@dataclass(frozen=True)
class Position:
    state: Status
    who: str
    steps: int
    build: Callable
    planned: bool = False
    #: The solo workflow (a skill's job): the Worker alone.
    solo: bool = False
    waits_for: Optional[str] = None
    resume: Optional[Status] = None
    retries: int = 0
    #: Reached only by editing the manifest by hand.
    hand_edited: bool = False
    #: The job's checks are due (a COMPLETED waits for them): only a run of the checks is walked there.
    checks_due: bool = False


HELD_CHANGE = [{"path": "held.txt", "content": "held\n"}]


def _roles_ask_before_changing_files(job) -> None:
    for name in ("worker", "supervisor", "planner"):
        role = json.loads((data_dir("roles") / f"{name}.json").read_text())
        role["file_changes"] = "approval"
        (job.jobs_dir.path / "roles" / f"{name}.json").write_text(json.dumps(role))


def _hold_changes(job, pos) -> None:
    _roles_ask_before_changing_files(job)
    if pos.who == PLANNER:
        post_answer(job, plan("User", file_changes=HELD_CHANGE))
    else:
        post_answer(job, json.dumps({"action": "MESSAGE", "message": "a fix", "file_changes": HELD_CHANGE}))


#: The checks of the positions where checks are due: they fail once the workspace has a file "fail".
FAILS_ON_A_FILE = ["test ! -e fail"]


def _set_checks(job, checks=FAILS_ON_A_FILE) -> None:
    user_action(job, "set", settings={"checks": checks})


def _fail_the_checks(job) -> None:
    (job.workspace / "fail").write_text("")


def _planner_checking(job) -> None:
    """The Planner's COMPLETED to User waits for the checks, after a failed run (one RETRY from the checks)."""
    _set_checks(job)
    post(job, plan("User", "COMPLETED"))
    _fail_the_checks(job)
    check_job(job)
    (job.workspace / "fail").unlink()
    post(job, plan("User", "COMPLETED"))


def _out_of_turn(job):
    post(job, msg())
    m = job.manifest()
    m.status = S.REVIEWING  # the Worker's turn in REVIEWING: no exit row takes it
    JobFiles(job.dir).session.write_manifest(m)


POSITIONS = {
    "worker pending": Position(S.PENDING, WORKER, 2, lambda j: (
        post(j, exit_("COMPLETED"), exit_("COMPLETED")), user_action(j, "reject", "not yet"))),
    "worker running": Position(S.RUNNING, WORKER, 3, lambda j: post(j, exit_("RETRY"), msg(), msg()), retries=1),
    "supervisor reviewing": Position(S.REVIEWING, SUPERVISOR, 4, lambda j: post(
        j, exit_("RETRY"), exit_("COMPLETED"), msg(), msg()), retries=1),
    "planner pending": Position(S.PENDING, PLANNER, 3, lambda j: (
        post(j, plan("User"), plan("User"), plan("User", "COMPLETED")), user_action(j, "reject", "not yet")),
        planned=True),
    "planner running": Position(S.RUNNING, PLANNER, 2, lambda j: post(j, plan("User"), plan("User")), planned=True),
    # A failed call that brought no answer is no step: one step (the plan) in the next two.
    "addressed pending": Position(S.PENDING, ADDRESSED, 1, lambda j: (
        post(j, plan("Worker")), post_answer(j, None, error="timed out"), user_action(j, "resubmit", "go on")),
        planned=True),
    "addressed running": Position(S.RUNNING, ADDRESSED, 3, lambda j: post(j, plan("Worker"), msg(), msg()),
                                  planned=True),
    "solo pending": Position(S.PENDING, wf.SOLO, 1, lambda j: (
        post(j, exit_("STUCK")), user_action(j, "resubmit", "go on")), solo=True),
    "solo running": Position(S.RUNNING, wf.SOLO, 3, lambda j: post(j, exit_("RETRY"), msg(), msg()), retries=1,
                             solo=True),
    "worker out of turn": Position(S.REVIEWING, WORKER, 1, _out_of_turn, hand_edited=True),
    "approval default": Position(S.APPROVAL_REQUIRED, SUPERVISOR, 2, lambda j: post(
        j, exit_("COMPLETED"), exit_("COMPLETED"))),
    "approval planned": Position(S.APPROVAL_REQUIRED, PLANNER, 1, lambda j: post(j, plan("User", "COMPLETED")),
                                 planned=True),
    "stuck worker": Position(S.INTERVENTION_REQUIRED, WORKER, 1, lambda j: post(j, exit_("STUCK"))),
    "stuck supervisor": Position(S.INTERVENTION_REQUIRED, SUPERVISOR, 2, lambda j: post(
        j, exit_("COMPLETED"), exit_("STUCK"))),
    "stuck planner": Position(S.INTERVENTION_REQUIRED, PLANNER, 2, lambda j: post(
        j, plan("User"), plan("User", "STUCK")), planned=True),
    "stuck addressed": Position(S.INTERVENTION_REQUIRED, ADDRESSED, 1, lambda j: (
        post(j, plan("Worker")), post_answer(j, None, error="timed out")), planned=True),
    "question worker": Position(S.INPUT_REQUIRED, WORKER, 1, lambda j: post(j, ask(WORKER)),
                                waits_for="question", resume=S.RUNNING),
    "question supervisor": Position(S.INPUT_REQUIRED, SUPERVISOR, 2, lambda j: post(
        j, exit_("COMPLETED"), ask(SUPERVISOR)), waits_for="question", resume=S.REVIEWING),
    "question planner": Position(S.INPUT_REQUIRED, PLANNER, 1, lambda j: post(j, ask(PLANNER)), planned=True,
                                 waits_for="question", resume=S.RUNNING),
    # Suspended while asked, then resumed: the state it was asked in is no
    # longer kept, and the Supervisor's review must still come back.
    "question resumed": Position(S.INPUT_REQUIRED, SUPERVISOR, 2, lambda j: (
        post(j, exit_("COMPLETED"), ask(SUPERVISOR)), user_action(j, "suspend"), user_action(j, "resume")),
        waits_for="question", resume=S.REVIEWING),
    "command worker": Position(S.INPUT_REQUIRED, WORKER, 1, lambda j: post(
        j, json.dumps({"action": "CMD", "command": "echo held"})), waits_for="command", resume=S.RUNNING),
    "changes worker": Position(S.INPUT_REQUIRED, WORKER, 1, lambda j: _hold_changes(j, POSITIONS["worker running"]),
                               waits_for="command", resume=S.RUNNING),
    "suspended running": Position(S.SUSPENDED, WORKER, 1, lambda j: (post(j, msg()), user_action(j, "suspend")),
                                  resume=S.RUNNING),
    "suspended reviewing": Position(S.SUSPENDED, SUPERVISOR, 1, lambda j: (
        post(j, exit_("COMPLETED")), user_action(j, "suspend")), resume=S.REVIEWING),
    "suspended asked": Position(S.SUSPENDED, WORKER, 1, lambda j: (
        post(j, ask(WORKER)), user_action(j, "suspend")), resume=S.INPUT_REQUIRED),
    # Stopped by a spent budget (max_steps 1: the second answer is not applied).
    "budget worker": Position(S.INTERVENTION_REQUIRED, WORKER, 1, lambda j: (
        user_action(j, "set", settings={"max_steps": 1}), post(j, msg(), msg())), waits_for="budget"),
    "draft": Position(S.DRAFT, PERSON, 0, None),
    # A COMPLETED that waits for the job's checks (after a RETRY: one in a row).
    "worker checking": Position(S.RUNNING, WORKER, 2, lambda j: (
        _set_checks(j), post(j, exit_("RETRY"), exit_("COMPLETED"))), retries=1, checks_due=True),
    "solo checking": Position(S.RUNNING, wf.SOLO, 2, lambda j: (
        _set_checks(j), post(j, exit_("RETRY"), exit_("COMPLETED"))), retries=1, solo=True, checks_due=True),
    "planner checking": Position(S.RUNNING, PLANNER, 2, _planner_checking, planned=True, retries=1,
                                 checks_due=True),
}


# Fires: how to make each event happen, and the job settings it needs.


@dataclass(frozen=True)
class Fire:
    fire: Callable
    settings: dict = field(default_factory=dict)
    #: Done to the position's job before the walk starts (its own entries are not the walk's).
    prepare: Optional[Callable] = None


def _checked(job, pos) -> None:
    check_job(job)


def _checked_failing(job, pos) -> None:
    _fail_the_checks(job)
    check_job(job)


def _answer_for(action: str):
    def fire(job, pos):
        post_answer(job, plan("User", action) if pos.who == PLANNER else exit_(action))
    return fire


def _compact(job, pos):
    for name in ("worker", "supervisor", "planner"):
        role = json.loads((data_dir("roles") / f"{name}.json").read_text())
        role.update(prompt_compression=True, compaction_threshold=1, compaction_retain_recent=0)
        (job.jobs_dir.path / "roles" / f"{name}.json").write_text(json.dumps(role))
    post_answer(job, "The turn so far, in short.", summary=True)


FIRES: dict[wf.Event, Fire] = {
    # --no-review: a solo job without checks ends at its COMPLETED (without it, UNCHECKED waits for a person).
    E("COMPLETED"): Fire(_answer_for("COMPLETED"), {"review": False}),
    wf.UNCHECKED: Fire(_answer_for("COMPLETED")),
    wf.CHECKS_DUE: Fire(_answer_for("COMPLETED"), prepare=lambda job: _set_checks(job, ["true"])),
    wf.CHECKS_PASSED: Fire(_checked),
    wf.CHECKS_FAILED: Fire(_checked_failing),
    wf.CHECKS_OVER_LIMIT: Fire(_checked_failing, {"max_retries_in_a_row": 1}),
    wf.CHECK: Fire(_checked, prepare=lambda job: _set_checks(job, ["true"])),
    E("RETRY"): Fire(_answer_for("RETRY")),
    E("STUCK"): Fire(_answer_for("STUCK")),
    E("MESSAGE", "to a role"): Fire(lambda job, pos: post_answer(job, plan("Worker"))),
    E("COMPLETED", "to a role"): Fire(lambda job, pos: post_answer(job, plan("Supervisor", "COMPLETED"))),
    E("MESSAGE", "to User"): Fire(lambda job, pos: post_answer(job, plan("User"))),
    E("COMPLETED", "to User"): Fire(lambda job, pos: post_answer(job, plan("User", "COMPLETED"))),
    E("MESSAGE"): Fire(lambda job, pos: post_answer(job, msg())),
    E("CMD", "run"): Fire(lambda job, pos: post_answer(job, json.dumps({"action": "CMD", "command": "echo hi"})),
                    {"command_policy": "allow", "allowed_commands": ["echo *"]}),
    E("CMD", "denied"): Fire(lambda job, pos: post_answer(job, json.dumps({"action": "CMD", "command": "echo hi"})),
                       {"command_policy": "deny"}),
    E("CMD", "held"): Fire(lambda job, pos: post_answer(job, json.dumps({"action": "CMD", "command": "echo hi"}))),
    E("ASK"): Fire(lambda job, pos: post_answer(job, ask(pos.who))),
    wf.INVALID: Fire(lambda job, pos: post_answer(job, "not json"), {"format_retries": 1}),
    wf.INVALID_LAST: Fire(lambda job, pos: post_answer(job, "not json"), {"format_retries": 0}),
    wf.CHANGES_HELD: Fire(_hold_changes),
    wf.CALL_FAILED: Fire(lambda job, pos: post_answer(job, None, error="HTTP 400: bad request")),
    wf.CALL_INTERRUPTED: Fire(lambda job, pos: post_answer(job, None, error="HTTP 503", fault="transient")),
    wf.LIMIT: Fire(lambda job, pos: post_answer(job, msg()), {"max_steps": "steps"}),
    wf.RETRY_LIMIT: Fire(lambda job, pos: post_answer(job, exit_("RETRY")), {"max_retries_in_a_row": 1}),
    wf.COMPACTION: Fire(_compact),
    wf.OUT_OF_TURN: Fire(lambda job, pos: post_answer(job, exit_("COMPLETED"))),
    E("create"): Fire(None),
    E("approve"): Fire(lambda job, pos: user_action(job, "approve")),
    E("reject"): Fire(lambda job, pos: user_action(job, "reject", "say hello louder")),
    E("resubmit"): Fire(lambda job, pos: user_action(job, "resubmit", "try again")),
    E("answer"): Fire(lambda job, pos: user_action(job, "answer", "Hello")),
    E("skip"): Fire(lambda job, pos: user_action(job, "answer", skip=True)),
    E("approve-command"): Fire(lambda job, pos: user_action(job, "approve-command")),
    E("skip-command"): Fire(lambda job, pos: user_action(job, "skip-command")),
    E("suspend"): Fire(lambda job, pos: user_action(job, "suspend")),
    E("resume"): Fire(lambda job, pos: user_action(job, "resume")),
    E("cancel"): Fire(lambda job, pos: user_action(job, "cancel")),
    # Not enough to free a job a spent max_steps stopped: the state stays.
    E("set"): Fire(lambda job, pos: user_action(job, "set", settings={"max_tokens": 10**9})),
    wf.BUDGET_RAISED: Fire(lambda job, pos: user_action(job, "set", settings={"max_steps": 100})),
}

#: (event, position) pairs a row covers but no real job can fire, and why.
NOT_WALKED = {
    (wf.COMPACTION, "worker pending"): "a turn that has not started has no rounds to summarise",
    (wf.COMPACTION, "addressed pending"): "a turn that has not started has no rounds to summarise",
    (wf.RETRY_LIMIT, "worker pending"): "RETRYs in a row restart at 0 when a turn is PENDING",
    (wf.COMPACTION, "solo pending"): "a turn that has not started has no rounds to summarise",
    (wf.RETRY_LIMIT, "solo pending"): "RETRYs in a row restart at 0 when a turn is PENDING",
    (E("suspend"), "draft"): "no job rests in DRAFT: create moves it to PENDING in the same entry",
    (E("cancel"), "draft"): "no job rests in DRAFT: create moves it to PENDING in the same entry",
    (E("set"), "draft"): "no job rests in DRAFT: create moves it to PENDING in the same entry",
    (wf.CHECK, "draft"): "no job rests in DRAFT: create moves it to PENDING in the same entry",
    **{(wf.UNREADABLE, name): "root reads any file; tests/engine/test_unreadable_workspace.py fires it as an "
                              "unprivileged user" for name, pos in POSITIONS.items() if pos.state in wf.STEPPABLE},
}
#: Rows walked by a test of their own, and where.
WALKED_ELSEWHERE = {wf.UNREADABLE: "tests/engine/test_unreadable_workspace.py (as an unprivileged user)"}


def covers(rule: wf.Rule, pos: Position) -> bool:
    if pos.state not in rule.states or (rule.waits_for and rule.waits_for != pos.waits_for):
        return False
    if pos.hand_edited != (rule.event == wf.OUT_OF_TURN):
        return False
    if pos.checks_due != (rule.event in (wf.CHECKS_PASSED, wf.CHECKS_FAILED, wf.CHECKS_OVER_LIMIT)):
        return False
    return rule.who == {PERSON} or pos.who in rule.who


WALKS = [
    (index, name)
    for index, rule in enumerate(TABLE)
    for name, pos in POSITIONS.items()
    if covers(rule, pos) and (rule.event, name) not in NOT_WALKED
]


def expected(target, pos: Position) -> Status:
    """The row's target at ``pos``, worked out from the position itself."""
    if isinstance(target, Status):
        return target
    reviewing = pos.who == SUPERVISOR
    return {
        wf.SAME: pos.state,
        wf.WORKING: S.REVIEWING if reviewing else S.RUNNING,
        wf.START: S.REVIEWING if reviewing else S.PENDING,
        wf.RESUME: pos.resume,
    }[target]


_templates: dict[str, Path] = {}


def job_at(name: str, settings: dict, tmp_path: Path, tmp_path_factory):
    """A copy of the position's job, built once per set of settings."""
    pos = POSITIONS[name]
    settings = {k: (pos.steps if v == "steps" else v) for k, v in settings.items()}
    key = f"{name}:{sorted(settings.items())}"
    if key not in _templates:
        root = tmp_path_factory.mktemp("position") / "jobs"
        jobs = JobsDir(root)
        jobs.init()
        workflow = "planned" if pos.planned else "solo" if pos.solo else "default"
        job = create_job(jobs, "walk", "Write hello.py", workflow=workflow, **settings)
        pos.build(job)
        m = job.manifest()
        assert (m.status, wf.who_acts(m), m.calls, m.retries_in_a_row, m.checks_due) == (
            pos.state, pos.who, pos.steps, pos.retries, pos.checks_due)
        _templates[key] = root
    target = tmp_path / "walk-jobs"
    shutil.copytree(_templates[key], target)
    return JobsDir(target).job("walk")


@pytest.mark.parametrize("index, name", WALKS, ids=[f"{i}-{TABLE[i].event}-{n}" for i, n in WALKS])
def test_row(index, name, tmp_path, tmp_path_factory):
    rule, pos = TABLE[index], POSITIONS[name]
    fire = FIRES[rule.event]
    if rule.event == E("create"):
        jobs = JobsDir(tmp_path / "created")
        job = create_job(jobs, "walk", "Write hello.py")
        assert JobFiles(job.dir).load_history().interactions[0].state_before == pos.state
        assert job.manifest().status == rule.to
        return
    job = job_at(name, fire.settings, tmp_path, tmp_path_factory)
    if fire.prepare is not None:
        fire.prepare(job)
    before = job.manifest()
    assert before.status == pos.state
    fire.fire(job, pos)
    after = job.manifest()
    assert after.status == expected(rule.to, pos), f"{rule.event} at {name}"
    assert after.last_sequence == before.last_sequence + 1
    if rule.remember:
        assert after.resume_status == expected(rule.remember, pos)
    elif rule.to == wf.RESUME:
        assert after.resume_status is None
    if after.status == S.INTERVENTION_REQUIRED and pos.state != S.INTERVENTION_REQUIRED:
        assert after.reason


def test_every_row_is_walked():
    walked = {index for index, _ in WALKS}
    missing = [f"{r.event} by {sorted(r.who)} in {sorted(r.states)}" for i, r in enumerate(TABLE)
               if i not in walked and r.event not in WALKED_ELSEWHERE]
    assert missing == []
    assert set(FIRES) | set(WALKED_ELSEWHERE) == wf.EVENTS
    assert all(POSITIONS[name].state in TABLE[i].states for i, name in WALKS)


def test_rows_of_one_event_never_overlap():
    seen: dict[tuple, int] = {}
    for index, rule in enumerate(TABLE):
        for state in rule.states:
            for who in rule.who:
                key = (state, rule.event, who, rule.waits_for)
                assert key not in seen, f"rows {seen[key]} and {index} both take {key}"
                seen[key] = index


def test_a_refusal_names_the_state_and_the_rows_hints(jobs):
    job = create_job(jobs, "hello", "Write hello.py")
    post_answer(job, exit_("COMPLETED"))
    with pytest.raises(TransitionError) as refused:
        user_action(job, "resume")
    assert str(refused.value) == (
        "cannot resume job 'hello': it is REVIEWING (resume needs SUSPENDED); step it (logist job step)"
    )
    post_answer(job, exit_("COMPLETED"))
    with pytest.raises(TransitionError, match=r"needs INTERVENTION_REQUIRED\); approve it \(logist job approve\) "
                                              r"or reject it \(logist job reject --feedback TEXT\)$"):
        user_action(job, "resubmit", "again")


def test_the_workflow_page_table_is_the_markdown_output():
    page = (REPO_ROOT / "docs" / "workflow.md").read_text(encoding="utf-8")
    start = page.index("<!-- generated by python -m logist.docs_pages: workflow -->\n")
    end = page.index("<!-- end of workflow -->")
    result = logist_cli("workflow", "--markdown")
    assert result.returncode == 0, result.stderr
    # Refresh: python -m logist.docs_pages.
    assert page[start:end].split("\n", 1)[1] == result.stdout


def test_json_lists_every_row():
    result = logist_cli("workflow", "--json")
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert [(r["event"], r["states"], r["who"]) for r in data["rows"]] == [
        (str(r.event), [s.value for s in Status if s in r.states], sorted(r.who, key=list(wf.WHO_NAMES).index))
        for r in TABLE
    ]
    assert set(data["targets"]) == {wf.SAME, wf.WORKING, wf.START, wf.RESUME}
    assert {r["turn"] for r in data["rows"]} <= set(data["turn_effects"])
    assert data["hints"]["APPROVAL_REQUIRED"].startswith("approve it (logist job approve)")


def test_plain_output_has_a_line_per_row():
    result = logist_cli("workflow")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.split("\n\n")[0].splitlines()
    assert len(lines) == 1 + len(TABLE)
    assert lines[1].split() == ["PENDING,", "RUNNING", "COMPLETED", "Worker", "REVIEWING", "handoff"]
