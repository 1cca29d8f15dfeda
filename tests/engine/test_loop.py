"""``logist job run --all``: every queued job in queue order, each to its
resting state, one report line per job and an exit status that says whether
a person is needed (3) or a job could not be run at all (1)."""

from __future__ import annotations

import json

import pytest
from filelock import FileLock

from logist.replay.scripted import Reply
from logist.replay.scripted import answer

from conftest import logist_cli, write_config




WRITE = answer("COMPLETED", "Wrote a.txt.", file_changes=[{"path": "a.txt", "content": "a\n"}])
APPROVE = answer("COMPLETED", "a.txt is right.")
ASK = answer("ASK", question="Which greeting do you want?")

OBJECTIVES = {"approve-job": "Objective ALPHA", "ask-job": "Objective BRAVO", "fail-job": "Objective CHARLIE"}


@pytest.fixture(autouse=True)
def serial(isolated, monkeypatch):
    """These tests script the model's answers in queue order: one job after
    another (tests/engine/test_engines.py runs batches on every engine)."""
    monkeypatch.setenv("LOGIST_ENGINE", "serial")


def ok(result, code: int = 0):
    assert result.returncode == code, f"exit {result.returncode}\nstdout:\n{result.stdout}\nstderr:\n{result.stderr}"
    assert "Traceback" not in result.stderr
    return result


def create(job_id: str, *extra: str, objective: str | None = None):
    return ok(logist_cli("job", "create", job_id, "-o", objective or OBJECTIVES[job_id], *extra))


def status_of(job_id: str) -> dict:
    return json.loads(ok(logist_cli("job", "status", job_id, "--json")).stdout)


def index(jobs) -> dict:
    return json.loads(jobs.index_path.read_text())


def requested_jobs(llm) -> list[str]:
    """Which job each request the server received was for (by its objective)."""
    found = []
    for request in llm.requests:
        text = request["messages"][1]["content"]
        hits = [job for job, objective in OBJECTIVES.items() if objective in text]
        assert len(hits) == 1, text
        found.append(hits[0])
    return found


def summary_lines(stderr: str, job_id: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.split(" ", 1)[0] == job_id]


def three_jobs(jobs):
    write_config(jobs, max_retries=0)
    create("approve-job")
    create("ask-job")
    create("fail-job", "--rank", "0")
    assert index(jobs)["queue"] == ["fail-job", "approve-job", "ask-job"]


@pytest.mark.wire
def test_run_all_leaves_each_job_in_its_state(jobs, llm):
    three_jobs(jobs)
    llm.add(Reply(status=400), WRITE, APPROVE, ASK)

    run = ok(logist_cli("job", "run", "--all", "--base-url", llm.base_url), code=3)

    assert run.stdout == ""
    assert requested_jobs(llm) == ["fail-job", "approve-job", "approve-job", "ask-job"], "queue order, --rank 0 first"
    assert llm.remaining == 0
    expected = {"fail-job": "INTERVENTION_REQUIRED", "approve-job": "APPROVAL_REQUIRED", "ask-job": "INPUT_REQUIRED"}
    for job_id, state in expected.items():
        assert status_of(job_id)["status"] == state
        lines = summary_lines(run.stderr, job_id)
        assert len(lines) == 1, run.stderr
        assert state in lines[0]
    assert "HTTP 400" in status_of("fail-job")["reason"]
    assert status_of("ask-job")["question"]["text"] == "Which greeting do you want?"
    # A line as each job finishes (serially: in queue order), with where the batch stands.
    done = [line for line in run.stderr.splitlines() if line.split()[0] in expected]
    assert [line.split()[0] for line in done] == ["fail-job", "approve-job", "ask-job"]
    assert done[-1].endswith("[3/3: 0 done, 3 waiting for a person, 0 failed; 0 running]")
    assert run.stderr.strip().splitlines()[-1].startswith("Batch of 3 jobs (serial) in ")
    assert run.stderr.strip().splitlines()[-1].endswith(" s: 0 done, 3 waiting for a person, 0 failed, 0 skipped.")
    assert "after 2 steps" in summary_lines(run.stderr, "approve-job")[0]
    assert "after 1 step" in summary_lines(run.stderr, "ask-job")[0]
    # Nothing finished, so the queue is unchanged.
    assert index(jobs)["queue"] == ["fail-job", "approve-job", "ask-job"]


@pytest.mark.wire
def test_run_all_json(jobs, llm):
    three_jobs(jobs)
    llm.add(Reply(status=400), WRITE, APPROVE, ASK)
    run = ok(logist_cli("job", "run", "--all", "--json", "--base-url", llm.base_url), code=3)
    data = json.loads(run.stdout)
    assert [(o["job_id"], o["status"], o["steps"], o["error"]) for o in data] == [
        ("fail-job", "INTERVENTION_REQUIRED", 1, None),
        ("approve-job", "APPROVAL_REQUIRED", 2, None),
        ("ask-job", "INPUT_REQUIRED", 1, None),
    ]


@pytest.mark.wire
def test_run_all_only_approval_needed_exits_3(jobs, llm):
    create("approve-job")
    llm.add(WRITE, APPROVE)
    run = ok(logist_cli("job", "run", "--all", "--base-url", llm.base_url), code=3)
    assert len(summary_lines(run.stderr, "approve-job")) == 1
    assert status_of("approve-job")["status"] == "APPROVAL_REQUIRED"


@pytest.mark.wire
def test_rank_orders_the_queue(jobs, llm):
    create("approve-job")
    create("ask-job")
    create("fail-job", "--rank", "1")
    assert index(jobs)["queue"] == ["approve-job", "fail-job", "ask-job"]
    llm.add(WRITE, APPROVE, WRITE, APPROVE, WRITE, APPROVE)
    ok(logist_cli("job", "run", "--all", "--base-url", llm.base_url), code=3)  # all wait for approval
    assert requested_jobs(llm) == ["approve-job", "approve-job", "fail-job", "fail-job", "ask-job", "ask-job"]


@pytest.mark.wire
def test_finished_jobs_leave_the_queue(jobs, llm):
    three_jobs(jobs)
    llm.add(Reply(status=400), WRITE, APPROVE, ASK)
    ok(logist_cli("job", "run", "--all", "--base-url", llm.base_url), code=3)
    ok(logist_cli("job", "approve", "approve-job"))
    ok(logist_cli("job", "cancel", "ask-job"))

    run = ok(logist_cli("job", "run", "--all", "--base-url", llm.base_url), code=3)

    assert len(llm.requests) == 4, "no job was steppable"
    assert index(jobs)["queue"] == ["fail-job"]
    assert set(index(jobs)["jobs"]) == {"fail-job", "approve-job", "ask-job"}, "they are still jobs, just not queued"
    assert "SUCCESS" in summary_lines(run.stderr, "approve-job")[0]
    assert "CANCELED" in summary_lines(run.stderr, "ask-job")[0]
    assert "INTERVENTION_REQUIRED" in summary_lines(run.stderr, "fail-job")[0]
    assert status_of("approve-job")["status"] == "SUCCESS"

    # Once nothing in the queue needs a person, run --all is a quiet success.
    ok(logist_cli("job", "cancel", "fail-job"))
    ok(logist_cli("job", "run", "--all", "--base-url", llm.base_url))
    assert index(jobs)["queue"] == []


@pytest.mark.wire
def test_a_broken_job_does_not_stop_the_others(jobs, llm):
    write_config(jobs, max_retries=0)
    create("broken", objective="Objective BROKEN")
    create("approve-job")
    create("ask-job")
    broken_dir = jobs.path / "broken"
    (broken_dir / "job_manifest.json").write_text("{ this is not json")
    (broken_dir / "jobHistory.json").unlink()
    assert index(jobs)["queue"][0] == "broken"
    llm.add(WRITE, APPROVE, ASK)

    run = ok(logist_cli("job", "run", "--all", "--base-url", llm.base_url), code=1)

    assert requested_jobs(llm) == ["approve-job", "approve-job", "ask-job"]
    assert status_of("approve-job")["status"] == "APPROVAL_REQUIRED"
    assert status_of("ask-job")["status"] == "INPUT_REQUIRED"
    lines = summary_lines(run.stderr, "broken")
    assert len(lines) == 1 and "error" in lines[0] and "jobHistory.json is missing" in lines[0]
    assert len(summary_lines(run.stderr, "approve-job")) == 1
    assert len(summary_lines(run.stderr, "ask-job")) == 1
    assert "broken" in index(jobs)["queue"], "a job that could not run stays queued"
    # The others' summary and the listing still work.
    listing = json.loads(ok(logist_cli("job", "list", "--json")).stdout)
    assert {j["job_id"]: j["status"] for j in listing["jobs"]}["broken"] == "UNREADABLE"


@pytest.mark.wire
def test_a_busy_job_does_not_stop_the_others(jobs, llm):
    create("ask-job")
    create("approve-job")
    llm.add(WRITE, APPROVE)
    lock = FileLock(str(jobs.path / "ask-job" / ".lock"))
    with lock:
        run = ok(logist_cli("job", "run", "--all", "--base-url", llm.base_url), code=1)
    assert requested_jobs(llm) == ["approve-job", "approve-job"]
    lines = summary_lines(run.stderr, "ask-job")
    assert len(lines) == 1 and "busy" in lines[0]
    assert status_of("ask-job")["status"] == "PENDING"
    assert status_of("approve-job")["status"] == "APPROVAL_REQUIRED"


@pytest.mark.wire
def test_a_repairable_job_is_repaired_and_run(jobs, llm):
    """A manifest that cannot be parsed, but a history to rebuild it from:
    run --all repairs it like any other command that changes a job."""
    create("approve-job")
    (jobs.path / "approve-job" / "job_manifest.json").write_text("garbage")
    llm.add(WRITE, APPROVE)
    ok(logist_cli("job", "run", "--all", "--base-url", llm.base_url), code=3)
    assert len(llm.requests) == 2
    assert status_of("approve-job")["status"] == "APPROVAL_REQUIRED"


def test_run_all_with_a_job_name_is_a_usage_error(jobs):
    create("approve-job")
    result = logist_cli("job", "run", "approve-job", "--all")
    assert result.returncode == 2 and "--all" in result.stderr and "Traceback" not in result.stderr


@pytest.mark.wire
def test_a_batch_does_not_count_a_canceled_job_as_done(jobs, llm):
    for job_id in ("first", "dropped", "last"):
        ok(logist_cli("job", "create", job_id, "-o", "Say hi"))
    ok(logist_cli("job", "cancel", "dropped"))
    llm.add(answer("STUCK", summary="Cannot."), answer("STUCK", summary="Cannot either."))
    run = logist_cli("job", "run", "--all", "--engine", "serial", "--base-url", llm.base_url)
    lines = run.stderr.strip().splitlines()
    dropped = [line for line in lines if line.startswith("dropped ")]
    assert len(dropped) == 1 and "CANCELED (not run)" in dropped[0], run.stderr
    assert "1 canceled" in dropped[0] and ": 0 done" in dropped[0]
    assert lines[-1].endswith(" s: 0 done, 2 waiting for a person, 0 failed, 0 skipped, 1 canceled."), run.stderr
