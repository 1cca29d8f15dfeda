"""A job's checks: its work verified by running it (logist.engine.checks).

Each rule of when checks run and what they decide, through the real
scripted server: passing checks reach the Supervisor with their output in
its prompt; a failing check sends the work back without a Supervisor call
and, over the limit, stops the job naming the check; a solo job ends
SUCCESS only when its checks pass, and without checks waits for a person
unless it was created with --no-review; approve refuses on a failing or
stale check unless --despite-checks, which is recorded; a replay applies a
recorded run without running it; a rerun runs them again.
"""

from __future__ import annotations

import json
import subprocess

import pytest

from logist import Status
from logist.engine.checks import check_job
from logist.engine.create import create_job
from logist.engine.decide import user_action
from logist.engine.loop import run_job
from logist.engine.rewind import rewind
from logist.engine.step import step_once
from logist.errors import TransitionError
from logist.replay.apply import read_history_file, replay_history
from logist.replay.scripted import answer
from logist.workspace import sandbox

#: Passes once fizz.py prints 15 lines.
FIFTEEN = 'test "$(python3 fizz.py | wc -l)" -eq 15'


def write(lines: int, summary: str = "Wrote fizz.py.") -> dict:
    return answer("COMPLETED", summary, ["fizz.py"],
                  file_changes=[{"path": "fizz.py", "content": f"for i in range({lines}):\n    print(i)\n"}])


def make_job(jobs, job_id="fizz", **kwargs):
    return create_job(jobs, job_id, "Write fizz.py printing fifteen lines", **kwargs)


def kinds(job) -> list[str]:
    return [e.kind for e in job.load_history().interactions]


def supervisor_calls(llm) -> list[dict]:
    return [r for r in llm.requests if "You are the Supervisor" in r["messages"][0]["content"]]


def test_passing_checks_reach_the_supervisor_with_their_output(jobs, llm):
    job = make_job(jobs, checks=[FIFTEEN, "echo all-good-marker"])
    llm.add(write(15), answer("COMPLETED", "Fifteen lines, as the checks show."))
    first = step_once(job, endpoints=llm.endpoints)
    assert (first.action, first.status, first.turn) == ("COMPLETED", Status.RUNNING, "check")
    assert job.manifest().checks_due
    ran = step_once(job, endpoints=llm.endpoints)
    assert (ran.action, ran.status, ran.called) == ("CHECKS_PASSED", Status.REVIEWING, False)
    assert job.manifest().calls == 1, "a run of the checks is not a step"
    review = step_once(job, endpoints=llm.endpoints)
    assert (review.role, review.status) == ("Supervisor", Status.APPROVAL_REQUIRED)
    prompt = supervisor_calls(llm)[0]["messages"][-1]["content"]
    assert f"`{FIFTEEN}`: passed" in prompt and "all-good-marker" in prompt
    assert "fizz.py" in prompt and "+    print(i)" in prompt, "the diff since the job began"
    entry = job.load_history().interactions[2]
    assert entry.kind == "check" and [r.exit_code for r in entry.checks.results] == [0, 0]
    assert entry.checks.commit == job.repo.head()
    user_action(job, "approve")
    assert job.manifest().status == Status.SUCCESS


def test_a_failing_check_sends_the_work_back_without_a_supervisor_call(jobs, llm):
    job = make_job(jobs, checks=[FIFTEEN], max_retries_in_a_row=2)
    llm.add(write(3), write(4), write(5))
    results = run_job(job, endpoints=llm.endpoints)
    assert supervisor_calls(llm) == []
    assert [r.action for r in results] == ["COMPLETED", "CHECKS_FAILED"] * 3
    manifest = job.manifest()
    assert manifest.status == Status.INTERVENTION_REQUIRED
    assert FIFTEEN in manifest.reason and "3 RETRYs in a row" in manifest.reason
    # The Worker was shown the failing check and its output before trying again.
    second = llm.requests[1]["messages"][-1]["content"]
    assert "checks ran in the workspace and failed" in second and f"`{FIFTEEN}`: failed (exit 1)" in second
    assert kinds(job).count("check") == 3


def test_a_solo_skill_job_with_failing_checks_does_not_end_success(jobs, llm):
    job = create_job(jobs, "solo", "Write fizz.py printing fifteen lines", workflow="solo", checks=[FIFTEEN],
                     max_retries_in_a_row=1)
    llm.add(write(3), write(4))
    run_job(job, endpoints=llm.endpoints)
    manifest = job.manifest()
    assert manifest.status == Status.INTERVENTION_REQUIRED and FIFTEEN in manifest.reason
    assert Status.SUCCESS.value not in [e.state_after for e in job.load_history().interactions]


def test_a_solo_job_ends_success_when_its_checks_pass(jobs, llm):
    job = create_job(jobs, "solo", "Write fizz.py printing fifteen lines", workflow="solo", checks=[FIFTEEN])
    llm.add(write(3), write(15))
    run_job(job, endpoints=llm.endpoints)
    assert job.manifest().status == Status.SUCCESS
    assert [e.kind for e in job.load_history().interactions][-1] == "check"


@pytest.mark.parametrize("no_review, ends", [(False, Status.APPROVAL_REQUIRED), (True, Status.SUCCESS)])
def test_a_solo_job_without_checks_waits_for_a_person_unless_no_review(jobs, llm, no_review, ends):
    job = create_job(jobs, "solo", "Write fizz.py", workflow="solo", review=False if no_review else None)
    assert job.manifest().no_review is no_review
    llm.add(write(15))
    run_job(job, endpoints=llm.endpoints)
    assert job.manifest().status == ends


def test_approve_refuses_on_a_failing_or_stale_check(jobs, llm):
    job = make_job(jobs, checks=[FIFTEEN])
    llm.add(write(15), answer("COMPLETED", "Looks right."))
    run_job(job, endpoints=llm.endpoints)
    assert job.manifest().status == Status.APPROVAL_REQUIRED
    # A person's edit: the checks have not run on it.
    (job.workspace / "fizz.py").write_text("print(1)\n")
    job.repo.commit_all("a person's edit")
    with pytest.raises(TransitionError, match="checks last ran on another commit"):
        user_action(job, "approve")
    ran = check_job(job)
    assert (ran.action, ran.status) == ("CHECKS_FAILED", Status.APPROVAL_REQUIRED), "on demand: the state stays"
    with pytest.raises(TransitionError, match=r"check `.*` failed.*--despite-checks"):
        user_action(job, "approve")
    assert job.manifest().status == Status.APPROVAL_REQUIRED
    user_action(job, "approve", despite_checks=True)
    last = job.load_history().interactions[-1]
    assert last.user_input.action == "approve" and last.user_input.despite_checks
    assert "failed" in last.user_input.text
    assert job.manifest().status == Status.SUCCESS


def test_replay_applies_recorded_checks_without_running_them(jobs, llm, tmp_path):
    marker = tmp_path / "ran"
    job = make_job(jobs, checks=[f"touch {marker}; {FIFTEEN}"], command_sandbox="none")
    llm.add(write(3), write(15), answer("COMPLETED", "Good."))
    run_job(job, endpoints=llm.endpoints)
    assert job.manifest().status == Status.APPROVAL_REQUIRED and marker.exists()
    recorded = read_history_file(job.history_path)
    assert [e.kind for e in recorded.interactions].count("check") == 2
    marker.unlink()
    # A job whose check, if it ran, would leave the marker and fail.
    again = make_job(jobs, "again", checks=[f"touch {marker}; false"], command_sandbox="none")
    replay_history(again, recorded)
    assert not marker.exists(), "the replay ran no check"
    replayed = again.load_history().interactions
    assert [e.state_after for e in replayed] == [e.state_after for e in recorded.interactions]
    assert all("no check was run" in e.note for e in replayed if e.kind == "check")
    assert again.manifest().last_check.commit == again.repo.head()
    # A rerun goes back before the checks: running the job again runs them.
    rewind(job, baseline=True)
    llm.add(write(15), answer("COMPLETED", "Good."))
    run_job(job, endpoints=llm.endpoints)
    assert marker.exists(), "the rerun ran the checks again"
    assert job.manifest().status == Status.APPROVAL_REQUIRED


def test_a_restep_to_an_entry_before_a_check_runs_it_again(jobs, llm, tmp_path):
    marker = tmp_path / "ran"
    job = make_job(jobs, checks=[f"touch {marker}; {FIFTEEN}"], command_sandbox="none")
    llm.add(write(15), answer("COMPLETED", "Good."))
    run_job(job, endpoints=llm.endpoints)
    assert kinds(job) == ["user_action", "llm_call", "check", "llm_call"] and marker.exists()
    marker.unlink()
    rewind(job, to=2)  # the Worker's COMPLETED: its checks are due again
    assert job.manifest().checks_due and not marker.exists()
    ran = step_once(job, endpoints=llm.endpoints)
    assert (ran.action, ran.status) == ("CHECKS_PASSED", Status.REVIEWING) and marker.exists()
    last = job.load_history().interactions[-1]
    assert last.kind == "check" and "no check was run" not in last.note


def test_a_check_does_not_change_the_work(jobs, llm):
    job = make_job(jobs, checks=["echo junk > junk.txt; rm fizz.py"])
    llm.add(write(15))
    step_once(job, endpoints=llm.endpoints)
    head = job.repo.head()
    step_once(job, endpoints=llm.endpoints)
    assert (job.workspace / "fizz.py").exists() and not (job.workspace / "junk.txt").exists()
    assert job.repo.head() == head and not job.repo.is_dirty()


def test_a_check_on_the_workspace_itself_is_put_back(jobs, monkeypatch):
    monkeypatch.setattr(sandbox, "throwaway_works", lambda: False)  # a system without the view
    job = make_job(jobs, checks=["echo junk > junk.txt"])
    head = job.repo.head()
    ran = check_job(job)
    assert ran.action == "CHECKS_PASSED", ran.error
    assert not (job.workspace / "junk.txt").exists() and job.repo.head() == head and not job.repo.is_dirty()


@pytest.mark.skipif(not sandbox.throwaway_works(), reason="no throwaway view of a workspace here")
def test_a_check_on_a_throwaway_view_leaves_not_even_its_caches(jobs, monkeypatch):
    job = make_job(jobs, checks=["echo .cache/ > .gitignore && mkdir .cache && echo 1 > .cache/seen && cat .cache/seen"])
    # Nothing is put back: the workspace is not even looked at after the run.
    monkeypatch.setattr(type(job.repo), "reset_to", lambda *args: pytest.fail("the workspace was put back"))
    ran = check_job(job)
    assert ran.action == "CHECKS_PASSED", ran.error
    assert not (job.workspace / ".cache").exists() and not (job.workspace / ".gitignore").exists()
    assert job.load_history().interactions[-1].checks.results[0].output == "1"


def test_edits_made_by_hand_are_committed_before_the_checks_run_on_them(jobs):
    # Two checks: the step's journal is written with the first one's group and
    # noted again with the second's.
    job = make_job(jobs, checks=["grep -q edited notes.txt", "test -f notes.txt && ! test -e .git/x"])
    before = job.repo.head()
    (job.workspace / "notes.txt").write_text("edited by a person\n")
    ran = check_job(job)
    assert ran.action == "CHECKS_PASSED", ran.error
    head = job.repo.head()
    assert head != before and not job.repo.is_dirty()
    subject = subprocess.run(["git", "log", "-1", "--format=%s"], cwd=job.workspace, capture_output=True, text=True)
    assert "changes made by hand" in subject.stdout
    last = job.load_history().interactions[-1]
    assert last.kind == "check" and last.checks.commit == head == job.manifest().last_check.commit
    assert [r.exit_code for r in last.checks.results] == [0, 0]
    assert not job.journal_path.exists()


def test_set_replaces_the_checks_and_records_it(jobs):
    job = make_job(jobs, checks=["true"])
    manifest = user_action(job, "set", settings={"checks": ["false", "true"]})
    assert manifest.settings.checks == ["false", "true"]
    last = job.load_history().interactions[-1]
    assert last.definition.settings.checks == ["false", "true"] and "checks false ; true" in last.user_input.text
    assert user_action(job, "set", settings={"checks": []}).settings.checks == []
    data = json.loads(job.manifest_path.read_text())
    assert data["settings"]["checks"] == []


def test_checks_removed_while_due_let_the_work_go_on(jobs, llm):
    job = make_job(jobs, checks=["false"])
    llm.add(write(15))
    step_once(job, endpoints=llm.endpoints)
    assert job.manifest().checks_due
    user_action(job, "set", settings={"checks": []})
    ran = step_once(job, endpoints=llm.endpoints)
    assert (ran.action, ran.status) == ("CHECKS_PASSED", Status.REVIEWING)
