"""Requests rebuilt from a format 2 history are the requests that were sent.

A later round of a turn records only the messages it added and the entry it
continues (logist/store/entries.py). These tests run real jobs against a
real HTTP server and check, for every call the history records, that
``logist job history JOB --entry N --json`` gives back exactly the body the
server received: all roles, a compaction, a command, a question, an invalid
answer and a failed call.
"""

from __future__ import annotations

import json

from logist.store.session import JobFiles
from logist.engine.create import create_job
from logist.engine.decide import user_action
from logist.engine.step import step_once
from logist.replay.scripted import NO_RETRY, Reply, answer
from logist.resources import data_dir
from logist.store.entries import CALL_KINDS

from conftest import logist_cli, write_config


def _entry_json(job_id: str, number: int, jobs) -> dict:
    done = logist_cli("job", "history", job_id, "--entry", str(number), "--json", env={"LOGIST_JOBS_DIR": str(jobs.path)})
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def _calls(job) -> list:
    return [e for e in JobFiles(job.dir).load_history().interactions if e.kind in CALL_KINDS]


def test_every_recorded_request_is_rebuilt_exactly_in_a_planned_job_with_compaction(jobs, llm):
    write_config(jobs, max_retries=0)
    worker = json.loads((data_dir("roles") / "worker.json").read_text())
    worker.update(prompt_compression=True, compaction_threshold=2, compaction_retain_recent=1,
                  max_tokens=900, response_format={"type": "json_object"})
    (jobs.path / "roles" / "worker.json").write_text(json.dumps(worker))
    job = create_job(jobs, "all", "Write notes.md", workflow="planned", command_policy="allow",
                     allowed_commands=["ls*"], format_retries=1)
    plan = json.dumps({"action": "MESSAGE", "plan": ["write notes.md"], "current_plan_step": 0, "send_to": "Worker",
                       "message": "Write notes.md with three notes."})
    llm.add(
        plan,                                                        # Planner delegates to the Worker
        answer("MESSAGE", message="note 1", file_changes=[{"path": "notes.md", "content": "1\n"}]),
        answer("CMD", command="ls -a"),                              # a command that runs
        "this is not JSON",                                          # refused, re-asked
        "Rounds 1-3: wrote note 1, listed files, one refused answer.",  # the Worker's summary call
        answer("MESSAGE", message="note 3"),
        Reply(status=400),                                           # a failed call
    )
    for _ in range(7):
        step_once(job, endpoints=llm.endpoints)
    assert job.manifest().status.value == "INTERVENTION_REQUIRED"
    user_action(job, "resubmit", "The endpoint is back; go on.")
    llm.add(answer("ASK", question="Plain text or a list?", required=True))
    step_once(job, endpoints=llm.endpoints)
    assert job.manifest().status.value == "INPUT_REQUIRED"
    user_action(job, "answer", "A list.")
    llm.add(
        answer("COMPLETED", "notes.md written", evidence=["notes.md"]),  # back to the Planner
        json.dumps({"action": "MESSAGE", "plan": ["write notes.md"], "current_plan_step": 0, "send_to": "Supervisor",
                    "message": "Check notes.md."}),
        answer("COMPLETED", "looks right"),                          # Supervisor, back to the Planner
        json.dumps({"action": "COMPLETED", "plan": ["write notes.md"], "current_plan_step": 0, "send_to": "User",
                    "message": "All done.", "summary_for_supervisor": "notes.md is written and checked",
                    "evidence_files": ["notes.md"]}),                # Planner
    )
    for _ in range(4):
        step_once(job, endpoints=llm.endpoints)
    assert job.manifest().status.value == "APPROVAL_REQUIRED"

    calls = _calls(job)
    assert len(calls) == len(llm.requests) == 12
    assert {e.role for e in calls} == {"Planner", "Worker", "Supervisor"}
    assert [e.kind for e in calls].count("compaction") == 1
    forms = [("prompt" if e.request.prompt is not None else "continues") for e in calls]
    assert forms.count("continues") >= 5, forms
    for entry, sent in zip(calls, llm.requests):
        shown = _entry_json("all", entry.sequence, jobs)
        assert shown["request_body"] == sent, f"step {entry.sequence} ({entry.kind}, {entry.role})"
        assert shown["sequence"] == entry.sequence
    # The call after the compaction sends its prompt in full, the summary in its system message.
    after = calls[calls.index(next(e for e in calls if e.kind == "compaction")) + 1]
    assert after.request.prompt is not None
    assert "Rounds 1-3: wrote note 1" in after.request.prompt[0].content


def test_a_later_round_records_only_what_it_added(jobs, llm):
    job = create_job(jobs, "grow", "Take notes")
    for i in range(1, 6):
        llm.add(answer("MESSAGE", message=f"note {i} " + "x" * 500))
    for _ in range(5):
        step_once(job, endpoints=llm.endpoints)
    calls = _calls(job)
    assert calls[0].request.prompt is not None and calls[0].request.continues is None
    for previous, entry in zip(calls, calls[1:]):
        assert entry.request.prompt is None
        assert entry.request.continues == previous.sequence
        assert [m.role for m in entry.request.added] == ["user"]
    # The file grows with each round's new messages, not with the whole conversation.
    sizes = [len(json.dumps(e.dump())) for e in calls[1:]]
    assert max(sizes) - min(sizes) < 200, sizes


def test_entries_are_found_by_number_without_reading_the_whole_file(jobs, llm):
    job = create_job(jobs, "find", "Take notes")
    for i in range(1, 9):
        llm.add(answer("MESSAGE", message=f"note {i}"))
        step_once(job, endpoints=llm.endpoints)
    everything = [e.dump() for e in JobFiles(job.dir).entries()]
    assert [e["sequence"] for e in everything] == list(range(1, 10))
    assert list(JobFiles(job.dir).entries_since(6)) == [6, 7, 8, 9]
    assert JobFiles(job.dir).entry(4).dump() == everything[3]
    assert [e.dump() for e in JobFiles(job.dir).entries(block=64)] == everything, "small read blocks change nothing"


def test_single_entries_are_parsed_alone_by_number(jobs, llm):

    job = create_job(jobs, "single", "Take notes")
    for i in range(1, 6):
        llm.add(answer("MESSAGE", message=f"note {i}"))
        step_once(job, endpoints=llm.endpoints)
    everything = {e["sequence"]: e for e in (x.dump() for x in JobFiles(job.dir).entries())}
    assert JobFiles(job.dir).read_entries({2, 4, 6, 99}) == {n: everything[n] for n in (2, 4, 6)}, "the last one too; no 99"
    # A history not in the canonical layout (edited by hand) is read whole instead.
    data = json.loads(job.history_path.read_text())
    job.history_path.write_text(json.dumps(data))
    assert JobFiles(job.dir).read_entries({1, 3}) == {n: everything[n] for n in (1, 3)}
