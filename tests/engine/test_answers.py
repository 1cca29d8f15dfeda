"""Answers as real models send them, through a real server on 127.0.0.1:
format re-asks, the forms the parser reads, the text-tag protocol, the
seeds' answer shapes and the roles' file change policy."""

from __future__ import annotations

import pytest

import json
import subprocess

from logist.store.session import JobFiles
from logist import Status
from logist.engine.create import create_job
from logist.engine.decide import user_action
from logist.engine.loop import run_job
from logist.engine.step import post_answer, step_once
from logist.store.jobsdir import JobsDir
from logist.protocol.prompt_text import protocol_text
from logist.replay.apply import replay_history
from logist.replay.scripted import answer
from logist.resources import data_dir
from logist.store.prompts import builtin

from conftest import via, logist_cli, write_config

HELLO = [{"path": "hello.py", "content": "print('Hello')\n"}]


def make_job(jobs, job_id="hello", **kwargs):
    return create_job(jobs, job_id, "Write hello.py that prints a greeting", **kwargs)


def role_file(jobs: JobsDir, name: str, **changes) -> None:
    """A jobs directory's copy of a built-in role, with ``changes``."""
    role = json.loads((data_dir("roles") / f"{name.lower()}.json").read_text())
    role.update(changes)
    (jobs.path / "roles" / f"{name.lower()}.json").write_text(json.dumps(role))


def last_entry(job):
    return JobFiles(job.dir).load_history().interactions[-1]


def committed_files(workspace) -> list[str]:
    out = subprocess.run(["git", "ls-files"], cwd=workspace, capture_output=True, text=True, check=True)
    return out.stdout.split()


# --------------------------------------------------------------------------
# format_retries: one corrective re-ask by default


def test_a_bad_answer_is_reasked_once_by_default_quoting_the_error(jobs, llm):
    job = make_job(jobs)
    assert job.manifest().settings.format_retries == 1
    llm.add("Sure! I will write hello.py now.", answer("COMPLETED", "Wrote hello.py.", ["hello.py"], file_changes=HELLO))

    first = step_once(job, endpoints=llm.endpoints)
    assert (first.action, first.status) == ("INVALID", Status.RUNNING)
    assert not (job.workspace / "hello.py").exists()
    second = step_once(job, endpoints=llm.endpoints)
    assert (second.action, second.status) == ("COMPLETED", Status.REVIEWING)
    assert (job.workspace / "hello.py").read_text() == "print('Hello')\n"

    reask = llm.requests[1]["messages"]
    assert reask[-2] == {"role": "assistant", "content": "Sure! I will write hello.py now."}
    assert reask[-1]["content"].startswith(
        "Your last answer was refused: the answer is not valid JSON (Expecting value at line 1 column 1)"
    )
    refused, applied = JobFiles(job.dir).load_history().interactions[1:]
    assert (refused.response.status, refused.response.raw_response) == ("INVALID", "Sure! I will write hello.py now.")
    assert applied.response.status == "SUCCESS" and applied.response.files_changed == ["hello.py"]


def test_format_retries_0_in_config_stops_at_the_first_bad_answer(jobs, llm):
    write_config(jobs, defaults={"format_retries": 0})
    job = make_job(jobs)
    llm.add("not json")
    result = step_once(job, endpoints=llm.endpoints)
    assert result.status == Status.INTERVENTION_REQUIRED
    assert "invalid answer from Worker: the answer is not valid JSON" in job.manifest().reason
    assert len(llm.requests) == 1


def test_a_second_bad_answer_in_the_turn_needs_a_person(jobs, llm):
    job = make_job(jobs)
    llm.add("not json", '{"action": "LAUNCH"}')
    run_job(job, endpoints=llm.endpoints)
    manifest = job.manifest()
    assert manifest.status == Status.INTERVENTION_REQUIRED
    assert "'LAUNCH' is not one of" in manifest.reason
    assert len(llm.requests) == 2


# --------------------------------------------------------------------------
# What real models send


def test_what_a_real_model_sends_is_applied_and_recorded_as_sent(jobs, llm):
    job = make_job(jobs)
    raw = (
        "<think>The user wants hello.py. {I should write it}.</think>\n"
        "Here is my answer:\n```json\n"
        + json.dumps({"action": "completed", "evidence_files": ["hello.py"], "summary_for_supervisor": "Wrote it.",
                      "file_changes": HELLO, "confidence": 0.9, "question": None})
        + "\n```\nLet me know if you need more."
    )
    llm.add(raw)
    result = step_once(job, endpoints=llm.endpoints)
    assert (result.action, result.status) == ("COMPLETED", Status.REVIEWING)
    assert (job.workspace / "hello.py").read_text() == "print('Hello')\n"
    entry = last_entry(job)
    assert entry.response.raw_response == raw
    assert entry.response.actions == ["COMPLETED"]
    assert entry.response.notes == [
        "the reasoning block before the answer was set aside",
        "the text around the fenced block was ignored",
        "action 'completed' read as COMPLETED",
    ]
    assert entry.response.extra_fields == {"confidence": 0.9}
    # The next round repeats the answer exactly as the model sent it.
    llm.add(answer("COMPLETED", "Fine."))
    step_once(job, endpoints=llm.endpoints)
    assert job.manifest().status == Status.APPROVAL_REQUIRED


def test_an_answer_in_the_exact_shape_records_no_notes(jobs, llm):
    job = make_job(jobs)
    llm.add(answer("MESSAGE", message="Starting."))
    step_once(job, endpoints=llm.endpoints)
    raw = json.loads(job.history_path.read_text())["interactions"][-1]["response"]
    assert "notes" not in raw and "extra_fields" not in raw


# --------------------------------------------------------------------------
# Seed 003's exit command


SEED_003_EXIT = {
    "action": "COMPLETED",
    "evidence_files": ["hello.py"],
    "summary_for_supervisor": "Implemented hello.py, which prints a greeting.",
    "job_manifest_url": "file:///jobs/hello/job_manifest.json",
}


def test_the_seed_003_exit_command_is_accepted_and_its_fields_kept(jobs, llm):
    job = make_job(jobs)
    raw = json.dumps({**SEED_003_EXIT, "file_changes": HELLO}, indent=2)
    llm.add(raw, answer("COMPLETED", "It prints a greeting."))
    run_job(job, endpoints=llm.endpoints)
    assert job.manifest().status == Status.APPROVAL_REQUIRED
    worker = JobFiles(job.dir).load_history().interactions[1]
    assert worker.response.evidence_files == ["hello.py"]
    assert worker.response.summary_for_supervisor == SEED_003_EXIT["summary_for_supervisor"]
    assert worker.response.extra_fields == {"job_manifest_url": SEED_003_EXIT["job_manifest_url"]}
    assert worker.response.raw_response == raw
    # The Supervisor got the summary and the evidence.
    assert "Implemented hello.py" in llm.requests[1]["messages"][1]["content"]
    assert "### hello.py" in llm.requests[1]["messages"][1]["content"]


# --------------------------------------------------------------------------
# The roles' file change policy


def test_the_built_in_supervisor_may_not_change_files(jobs, llm):
    job = make_job(jobs)
    llm.add(
        answer("COMPLETED", "Wrote hello.py.", ["hello.py"], file_changes=HELLO),
        answer("COMPLETED", "Fixed the greeting myself.", ["hello.py"],
               file_changes=[{"path": "hello.py", "content": "print('Hi')\n"}]),
        answer("RETRY", "hello.py should print 'Hi'."),
    )
    step_once(job, endpoints=llm.endpoints)
    refused = step_once(job, endpoints=llm.endpoints)
    assert (refused.action, refused.status) == ("INVALID", Status.REVIEWING)
    assert "file_changes: the Supervisor role may not change files" in refused.error
    assert "file_changes: refused" in refused.error
    assert (job.workspace / "hello.py").read_text() == "print('Hello')\n"
    sent_back = step_once(job, endpoints=llm.endpoints)
    assert llm.requests[2]["messages"][-1]["content"].startswith(
        "Your last answer was refused: file_changes: the Supervisor role may not change files")
    assert sent_back.status == Status.RUNNING
    assert "hello.py should print 'Hi'." in job.manifest().turn.feedback


def test_a_worker_whose_manifest_refuses_file_changes(jobs, llm):
    role_file(jobs, "Worker", file_changes="refused")
    write_config(jobs, defaults={"format_retries": 0})
    job = make_job(jobs)
    llm.add(answer("MESSAGE", message="x", file_changes=HELLO))
    step_once(job, endpoints=llm.endpoints)
    manifest = job.manifest()
    assert manifest.status == Status.INTERVENTION_REQUIRED
    assert "the Worker role may not change files" in manifest.reason
    assert not (job.workspace / "hello.py").exists()


def _held_by_the_supervisor(jobs, llm):
    role_file(jobs, "Supervisor", file_changes="approval")
    job = make_job(jobs)
    llm.add(
        answer("COMPLETED", "Wrote hello.py.", ["hello.py"], file_changes=HELLO),
        answer("MESSAGE", message="A small fix.", file_changes=[{"path": "hello.py", "old": "Hello", "new": "Hi"}]),
    )
    step_once(job, **via(llm))
    held = step_once(job, **via(llm))
    assert held.status == Status.INPUT_REQUIRED
    assert "file changes held" in held.summary and "hello.py" in held.summary
    manifest = job.manifest()
    assert manifest.pending_changes == [{"path": "hello.py", "old": "Hello", "new": "Hi"}]
    assert (job.workspace / "hello.py").read_text() == "print('Hello')\n"
    return job


def test_file_changes_held_for_approval_are_applied_when_a_person_approves(jobs, llm):
    job = _held_by_the_supervisor(jobs, llm)
    shown = logist_cli("job", "status", "hello")
    assert "approve-command" in shown.stdout + shown.stderr
    approved = logist_cli("job", "approve-command", "hello")
    assert approved.returncode == 0, approved.stderr
    assert (job.workspace / "hello.py").read_text() == "print('Hi')\n"
    manifest = job.manifest()
    assert manifest.status == Status.REVIEWING and manifest.pending_changes is None
    assert manifest.workspace_commit == subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=job.workspace, capture_output=True, text=True).stdout.strip()
    llm.add(answer("COMPLETED", "Fixed and checked."))
    step_once(job, endpoints=llm.endpoints)
    told = llm.requests[-1]["messages"][-1]["content"]
    assert told.startswith("A person approved your file changes and they are applied: hello.py.")
    assert job.manifest().status == Status.APPROVAL_REQUIRED


def test_file_changes_held_for_approval_are_dropped_when_a_person_skips_them(jobs, llm):
    job = _held_by_the_supervisor(jobs, llm)
    user_action(job, "skip-command")
    assert (job.workspace / "hello.py").read_text() == "print('Hello')\n"
    assert job.manifest().pending_changes is None
    llm.add(answer("COMPLETED", "Fine as it is."))
    step_once(job, endpoints=llm.endpoints)
    assert llm.requests[-1]["messages"][-1]["content"].startswith("A person declined your file changes")


def test_held_file_changes_replay_to_the_same_workspace(jobs, llm, tmp_path):
    job = _held_by_the_supervisor(jobs, llm)
    user_action(job, "approve-command")
    copy_jobs = JobsDir(tmp_path / "again")
    copy_jobs.init()
    role_file(copy_jobs, "Supervisor", file_changes="approval")
    again = make_job(copy_jobs, "again")
    replay_history(again, JobFiles(job.dir).load_history())
    assert again.manifest().status == Status.REVIEWING
    assert (again.workspace / "hello.py").read_text() == "print('Hi')\n"


# --------------------------------------------------------------------------
# Seed 004: the Planner's shapes


def test_the_seed_004_planner_drives_a_planned_job(jobs, llm):
    job = create_job(jobs, "plan", "Write hello.py that prints Hello", workflow="planned")
    delegate = {"response": {
        "thought": "One file, then a review.",
        "plan": "1. Write hello.py\n2. Review hello.py",
        "current_plan_step": "1. Write hello.py",
        "plan_reasoning": "A small task.",
        "send_to": "Worker",
        "message": "Write hello.py that prints Hello.",
        "stop": "InProcess",
    }}
    done = {"response": {
        "thought": "Reviewed and done.",
        "plan": ["Write hello.py", "Review hello.py"],
        "current_plan_step": 1,
        "send_to": "User",
        "message": "hello.py prints Hello.",
        "stop": "Completed",
    }}
    llm.add(json.dumps(delegate), answer("COMPLETED", "Wrote hello.py.", ["hello.py"], file_changes=HELLO), json.dumps(done))
    results = run_job(job, endpoints=llm.endpoints)
    assert [(r.role, r.action) for r in results] == [("Planner", "MESSAGE"), ("Worker", "COMPLETED"), ("Planner", "COMPLETED")]
    manifest = job.manifest()
    assert manifest.status == Status.APPROVAL_REQUIRED
    assert manifest.plan == ["Write hello.py", "Review hello.py"] and manifest.current_plan_step == 1
    assert manifest.last_exit.summary == "hello.py prints Hello."
    first = JobFiles(job.dir).load_history().interactions[1]
    assert first.response.extra_fields == {"stop": "InProcess"}
    assert first.state.plan_reasoning == "A small task." and manifest.plan_reasoning == "A small task."
    assert 'the {"response": ...} wrapper was unwrapped' in first.response.notes
    assert "## Your task (from the Planner)\nWrite hello.py that prints Hello." in llm.requests[1]["messages"][1]["content"]


def test_a_planner_answer_without_action_to_the_user_asks_the_person(jobs, llm):
    job = create_job(jobs, "plan", "Write a greeting", workflow="planned")
    llm.add(json.dumps({"plan": ["Ask", "Write"], "current_plan_step": 0, "send_to": "User",
                        "message": "Which greeting do you want?"}))
    result = step_once(job, endpoints=llm.endpoints)
    assert (result.action, result.status) == ("ASK", Status.INPUT_REQUIRED)
    assert job.manifest().question.text == "Which greeting do you want?"


def test_an_answer_without_action_is_still_refused_from_a_worker(jobs, llm):
    job = make_job(jobs, format_retries=0)
    llm.add(json.dumps({"send_to": "User", "message": "hi"}))
    step_once(job, endpoints=llm.endpoints)
    assert "'action' is a required property" in job.manifest().reason


# --------------------------------------------------------------------------
# The text-tag protocol (seed 002)


def _tags_roles(jobs):
    role_file(jobs, "Worker", protocol="tags")
    role_file(jobs, "Supervisor", protocol="tags")


TAGS_SPEC = dict(command_policy="allow", allowed_commands=["ls*", "echo Hello > hello.txt"])


def test_a_tags_role_completes_a_job_and_replays(jobs, llm, tmp_path, replay_llm):
    _tags_roles(jobs)
    job = make_job(jobs, "tags", **TAGS_SPEC)
    preview = logist_cli("job", "preview", "tags", "--json")
    assert preview.returncode == 0, preview.stderr
    system = json.loads(preview.stdout)["messages"][0]["content"]
    # Seed 002's base prompt, and no role text: the built-in roles' instructions teach the JSON protocol.
    assert system == builtin().render("protocol/tags")

    llm.add("[CMD] ls", "[MESSAGE] Looking around first.", "[ASK] Which greeting should it print?")
    assert run_job(job, endpoints=llm.endpoints)[-1].status == Status.INPUT_REQUIRED
    assert job.manifest().question.text == "Which greeting should it print?"
    answered = logist_cli("job", "answer", "tags", "Hello")
    assert answered.returncode == 0, answered.stderr
    llm.add("echo Hello > hello.txt\nThat writes the file.", "[DONE] Wrote hello.txt with Hello.", "[DONE] hello.txt says Hello.")
    run_job(job, endpoints=llm.endpoints)
    manifest = job.manifest()
    assert manifest.status == Status.APPROVAL_REQUIRED
    assert (job.workspace / "hello.txt").read_text() == "Hello\n"
    assert "hello.txt" in committed_files(job.workspace)

    entries = [e for e in JobFiles(job.dir).load_history().interactions if e.kind == "llm_call"]
    assert [e.response.actions[0] for e in entries] == ["CMD", "MESSAGE", "ASK", "CMD", "COMPLETED", "COMPLETED"]
    untagged = entries[3]
    assert untagged.response.raw_response == "echo Hello > hello.txt\nThat writes the file."
    assert untagged.response.notes == ["no known tag: the first line was read as a command ([CMD])"]
    assert untagged.command.command == "echo Hello > hello.txt" and untagged.command.decision == "run"
    assert entries[4].response.summary_for_supervisor == "Wrote hello.txt with Hello."
    # Each turn opens with the job as seed 002's custom prompt; what the model said comes back verbatim.
    assert llm.requests[0]["messages"][1]["content"] == "Write hello.py that prints a greeting\n\n[Step 1 of 100]"
    assert llm.requests[1]["messages"][2] == {"role": "assistant", "content": "[CMD] ls"}
    assert llm.requests[3]["messages"][-1]["content"].startswith("User response: Hello")

    recorded = JobFiles(job.dir).load_history()
    for where, base_url in (("live", True), ("posted", False)):
        other_jobs = JobsDir(tmp_path / where)
        other_jobs.init()
        _tags_roles(other_jobs)
        other = make_job(other_jobs, "tags", **TAGS_SPEC)
        server = replay_llm(recorded) if base_url else None
        if server is not None:
            server.workspace = str(other.workspace)
        replay_history(other, recorded, base_url=server.base_url if server else None)
        assert other.manifest().status == Status.APPROVAL_REQUIRED, where
        assert (other.workspace / "hello.txt").read_text() == "Hello\n", where
        if server is not None:
            assert server.mismatches == [] and server.remaining == 0


def test_an_untagged_answer_is_a_command_under_the_command_policy(jobs, llm):
    _tags_roles(jobs)
    job = make_job(jobs, "tags")  # command_policy ask: every command waits for a person
    llm.add("rm -rf build")
    result = step_once(job, endpoints=llm.endpoints)
    assert (result.action, result.status) == ("CMD", Status.INPUT_REQUIRED)
    assert job.manifest().pending_command == "rm -rf build"


def test_tags_optional_question_and_retry(jobs, llm):
    _tags_roles(jobs)
    job = make_job(jobs, "tags")
    llm.add("[ASK:optional] Add a docstring?")
    step_once(job, endpoints=llm.endpoints)
    assert job.manifest().question.required is False
    user_action(job, "answer", skip=True)
    llm.add("[RETRY] The approach was wrong; start with tests.")
    assert step_once(job, endpoints=llm.endpoints).status == Status.RUNNING
    assert "start with tests" in job.manifest().turn.feedback


def test_an_empty_tags_answer_is_reasked_in_the_tags_protocol(jobs, llm):
    _tags_roles(jobs)
    job = make_job(jobs, "tags")
    llm.add("   ", "[MESSAGE] ok")
    step_once(job, endpoints=llm.endpoints)
    step_once(job, endpoints=llm.endpoints)
    reask = llm.requests[1]["messages"][-1]["content"]
    assert reask.startswith("Your last answer was refused: the answer is empty")
    assert "Answer again starting with one of the tags as the protocol describes." in reask


def test_a_skill_can_choose_the_tags_protocol(jobs, llm):
    skill = jobs.path / "skills" / "quick-commit"
    skill.mkdir(parents=True)
    (skill / "SKILL.md").write_text(
        "---\nname: quick-commit\ndescription: Commit the work\nprotocol: tags\n---\nRun git status, then commit.\n"
    )
    job = create_job(jobs, "commit", skill="quick-commit")
    assert job.manifest().skill.protocol == "tags"
    llm.add("[CMD] git status --porcelain")
    step_once(job, endpoints=llm.endpoints)
    assert llm.requests[0]["messages"][0]["content"].startswith(builtin().render("protocol/tags"))
    assert llm.requests[0]["messages"][1]["content"] == "Execute skill: quick-commit\n\n[Step 1 of 100]"
    assert job.manifest().pending_command == "git status --porcelain"
    # A skill that names no protocol leaves each role's own, and the manifest as it was.
    other = jobs.path / "skills" / "plain"
    other.mkdir()
    (other / "SKILL.md").write_text("---\nname: plain\ndescription: Say hi\n---\nSay hi.\n")
    plain = create_job(jobs, "plain", skill="plain")
    assert "protocol" not in json.loads((plain.dir / "job_manifest.json").read_text())["skill"]
    llm.add(answer("MESSAGE", message="hi"))
    assert step_once(plain, endpoints=llm.endpoints).action == "MESSAGE"
    assert protocol_text("json") in llm.requests[-1]["messages"][0]["content"]


def test_a_planner_cannot_speak_tags(jobs, llm):
    role_file(jobs, "Planner", protocol="tags")
    job = create_job(jobs, "plan", "Anything", workflow="planned")
    shown = logist_cli("job", "preview", "plan")
    assert shown.returncode == 1
    assert "protocol: tags cannot be a Planner's protocol" in shown.stderr and "planner.json" in shown.stderr
    assert len(shown.stderr.strip().splitlines()) == 1
    assert llm.requests == []


def test_post_answer_reads_the_role_protocol_too(jobs):
    _tags_roles(jobs)
    job = make_job(jobs, "tags")
    result = post_answer(job, "[MESSAGE] posted by hand")
    assert (result.action, result.summary) == ("MESSAGE", "posted by hand")
