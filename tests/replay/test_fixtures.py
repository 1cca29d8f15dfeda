"""The recorded jobs in fixtures/: each replays two ways to what was recorded,
and a new fixture can be recorded from a live run and re-recorded."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from logist.store.session import JobFiles
from logist import JobManifest, LogistError, Status
from logist.engine.create import create_job
from logist.engine.decide import user_action
from logist.engine.loop import run_job
from logist.store.jobsdir import JobsDir
from logist.cli.app import EXIT_NEEDS_PERSON, WAITING_FOR_PERSON
from logist.replay.demo import run_demo
from logist.replay.fixtures import create_from_fixture, load_fixture, record_fixture, rerecord
from logist.replay.apply import ReplayDivergedError, replay_history

from conftest import REPO_ROOT, Normaliser, logist_cli

FIXTURES_DIR = REPO_ROOT / "fixtures"
FIXTURES = sorted(p.name for p in FIXTURES_DIR.iterdir() if (p / "job.json").is_file())
#: The default workflow with file changes and a Supervisor RETRY; a job with
#: CMD (allowed and approved) and ASK answered by a person.
REQUIRED = {"wordcount", "calc"}


def test_the_required_fixtures_are_there():
    assert REQUIRED <= set(FIXTURES)
    kinds = {name: [e for e in load_fixture(FIXTURES_DIR / name).history().interactions] for name in REQUIRED}
    wordcount = [(e.role, e.response.actions) for e in kinds["wordcount"] if e.kind == "llm_call"]
    assert ("Supervisor", ["RETRY"]) in wordcount
    assert any(e.response.files_changed for e in kinds["wordcount"] if e.kind == "llm_call")
    calc_actions = [a for e in kinds["calc"] if e.kind == "llm_call" for a in e.response.actions]
    assert {"CMD", "ASK", "COMPLETED"} <= set(calc_actions)
    people = [e.user_input.action for e in kinds["calc"] if e.kind == "user_action"]
    assert people == ["create", "answer", "approve-command", "approve"]


def comparable(job_dir_or_history, workspace: str | None = None, replayed: bool = False) -> list[dict]:
    """History entries with volatile values (times, shas, paths, endpoint)
    replaced, so a recording and its replays can be compared whole.

    ``replayed``: the entries of a ``job replay``, whose answers are recorded
    as ``replay`` entries and counted apart from calls; they are compared as
    the calls they stand for, without the totals."""
    history = JobFiles(job_dir_or_history).load_history() if isinstance(job_dir_or_history, Path) else job_dir_or_history
    entries = []
    for entry in history.interactions:
        data = entry.dump()
        if replayed:
            data["kind"] = "llm_call" if data["kind"] == "replay" else data["kind"]
        if replayed is not None:
            data["state"].pop("totals", None)
        data.pop("duration_ms", None)  # a time, and left out when 0 (an answer that took no call)
        # A call's key names the job and when it was made; a replay makes its own (and by the current
        # rule: a recording made in format 4 says its keys are derived by that format's, key_format).
        metadata = (data.get("request") or {}).get("metadata") or {}
        metadata.pop("idempotency_key", None)
        metadata.pop("key_format", None)
        # Where a command ran (files from before paths were relative: the header's or the entry's path).
        where = (data.get("command") or {}).pop("cwd", None) or data.pop("workspace_path", None) or history.workspace_path
        data.pop("workspace_path", None)
        text = json.dumps(data).replace(json.dumps(where)[1:-1], "<workspace>") if where else json.dumps(data)
        entries.append(json.loads(text))
    normalised = Normaliser(Path("/nonexistent"))(entries)
    for data in normalised:
        if data.get("response") and data["response"].get("error"):
            data["response"]["error"] = _endpoint(data["response"]["error"])
    return normalised


def _endpoint(text: str) -> str:
    return re.sub(r"LLM call to \S+ failed", "LLM call to <endpoint> failed", text)


def workspace_tree(workspace: Path) -> dict[str, str]:
    return {
        p.relative_to(workspace).as_posix(): p.read_text(encoding="utf-8")
        for p in sorted(workspace.rglob("*"))
        if p.is_file() and ".git" not in p.relative_to(workspace).parts
    }


def responses(history_entries: list[dict]) -> list[dict]:
    return [e["response"] for e in history_entries if e["kind"] == "llm_call"]


# Acceptance 2: each fixture, two ways --------------------------------------------------------------


@pytest.mark.parametrize("name", FIXTURES)
def test_fixture_replays_live_and_through_poststep_to_the_recording(name, tmp_path, replay_llm, snapshot):
    fixture = load_fixture(FIXTURES_DIR / name)
    recorded = fixture.history()

    # Live: every step a real call against the strict replay server, the
    # person's recorded actions in between.
    live = create_from_fixture(JobsDir(tmp_path / "live"), fixture)
    server = replay_llm(fixture.path)
    replay_history(live, recorded, base_url=server.base_url)
    assert server.mismatches == [] and server.remaining == 0

    # ``job replay``: the recorded answers through poststep.
    posted = create_from_fixture(JobsDir(tmp_path / "posted"), fixture)
    result = logist_cli("--jobs-dir", str(tmp_path / "posted"), "job", "replay", fixture.spec["job_id"],
                        "--history", str(fixture.history_path), timeout=120)
    # Its exit code is that of the state it reached: 3 when the job waits for a person.
    waits = str(fixture.manifest().status) in WAITING_FOR_PERSON
    assert result.returncode == (EXIT_NEEDS_PERSON if waits else 0), result.stderr

    # When the code changed on purpose, re-record: python fixtures/NAME/script.py
    # (hand-written answers) or python fixtures/record.py --again fixtures/NAME.
    expected = comparable(recorded)
    final = Normaliser(tmp_path)(fixture.manifest().dump())
    assert comparable(live.dir) == expected, f"{live.dir} differs from the recording"
    assert Normaliser(tmp_path)(live.manifest().dump()) == final
    assert comparable(posted.dir, replayed=True) == expected, f"{posted.dir} differs from the recording"
    assert {**Normaliser(tmp_path)(posted.manifest().dump()), "totals": None} == {**final, "totals": None}
    assert "llm_call" not in {e.kind for e in JobFiles(posted.dir).load_history().interactions}
    assert posted.manifest().totals.replayed == fixture.manifest().totals.llm_calls
    assert workspace_tree(live.workspace) == workspace_tree(posted.workspace)
    git_log = ["git", "log", "--format=%s"]
    assert subprocess.run(git_log, cwd=live.workspace, capture_output=True, text=True).stdout == subprocess.run(
        git_log, cwd=posted.workspace, capture_output=True, text=True).stdout

    assert Normaliser(tmp_path)(live.manifest().dump()) == snapshot(name="final manifest")
    assert responses(expected) == snapshot(name="responses")
    assert workspace_tree(live.workspace) == snapshot(name="workspace")


def test_fixture_commands_are_portable():
    for name in FIXTURES:
        fixture = load_fixture(FIXTURES_DIR / name)
        commands = [e.command.command for e in fixture.history().interactions if e.command]
        for command in commands + fixture.spec.get("allowed_commands", []):
            assert not command.startswith(("/", "\\")) and sys.executable not in command, (name, command)


# Recording a new fixture, and re-recording one ------------------------------------------------------------


def test_a_live_run_recorded_as_a_fixture_replays_elsewhere(tmp_path, llm, replay_llm):
    """The documented path: run a job against any endpoint, record it, replay it."""
    given = tmp_path / "given"
    given.mkdir()
    (given / "notes.txt").write_text("first line\n")
    job = create_job(
        JobsDir(tmp_path / "mine"), "notes", "Add a second line to notes.txt", files=[str(given / "notes.txt")],
        allowed_commands=["cat notes.txt"], max_steps=20,
    )
    llm.add(
        json.dumps({"action": "CMD", "command": "cat notes.txt",
                    "file_changes": [{"path": "notes.txt", "old": "first line\n", "new": "first line\nsecond line\n"}]}),
        json.dumps({"action": "ASK", "question": "Is that enough?", "required": False}),
        json.dumps({"action": "COMPLETED", "evidence_files": ["notes.txt"], "summary_for_supervisor": "Added the line."}),
        json.dumps({"action": "COMPLETED", "evidence_files": ["notes.txt"], "summary_for_supervisor": "Fine."}),
    )
    run_job(job, endpoints=llm.endpoints)
    user_action(job, "answer", skip=True)
    run_job(job, endpoints=llm.endpoints)
    assert job.manifest().status == Status.APPROVAL_REQUIRED

    recorder = subprocess.run(
        [sys.executable, str(FIXTURES_DIR / "record.py"), str(job.dir), str(tmp_path / "fixtures" / "notes")],
        capture_output=True, text=True, timeout=120,
    )
    assert recorder.returncode == 0, recorder.stderr
    fixture = load_fixture(tmp_path / "fixtures" / "notes")
    assert fixture.spec == {
        "$schema": "fixture-job.schema.json", "job_id": "notes", "objective": "Add a second line to notes.txt", "files": ["notes.txt"],
        "max_steps": 20, "command_policy": "allow", "allowed_commands": ["cat notes.txt"],
    }
    assert (fixture.path / "workspace" / "notes.txt").read_text() == "first line\n", "the files as the job started"
    assert fixture.history_path.read_bytes() == job.history_path.read_bytes()

    replayed = create_from_fixture(JobsDir(tmp_path / "elsewhere"), fixture, "notes-again")
    server = replay_llm(fixture.path)
    replay_history(replayed, fixture.history(), base_url=server.base_url)
    assert server.mismatches == [] and server.remaining == 0
    assert replayed.manifest().status == Status.APPROVAL_REQUIRED
    assert (replayed.workspace / "notes.txt").read_text() == "first line\nsecond line\n"


def test_a_fixture_is_re_recorded_after_the_prompts_change(tmp_path, replay_llm):
    copy = tmp_path / "wordcount"
    shutil.copytree(FIXTURES_DIR / "wordcount", copy)
    # As if the recording were made before a change to the prompts.
    old = json.loads((copy / "jobHistory.json").read_text())
    for entry in old["interactions"]:
        for message in (entry.get("request") or {}).get("prompt") or (entry.get("request") or {}).get("added") or []:
            message["content"] = message["content"].replace("Answer with one JSON object", "Reply with one JSON object")
    (copy / "jobHistory.json").write_text(json.dumps(old, indent=2))

    stale = create_from_fixture(JobsDir(tmp_path / "stale"), copy)
    with pytest.raises(ReplayDivergedError, match="replay mismatch at step 2"):
        replay_history(stale, load_fixture(copy).history(), base_url=replay_llm(copy).base_url)

    differences = rerecord(copy)
    assert len(differences) == 4 and all("Reply with one JSON object" in d for d in differences)
    fresh = create_from_fixture(JobsDir(tmp_path / "fresh"), copy)
    server = replay_llm(copy)
    replay_history(fresh, load_fixture(copy).history(), base_url=server.base_url)
    assert server.mismatches == [] and fresh.manifest().status == Status.APPROVAL_REQUIRED
    # The answers are the recorded ones; the prompts are today's.
    assert responses(comparable(fresh.dir)) == responses(comparable(load_fixture(FIXTURES_DIR / "wordcount").history()))
    assert "Reply with one JSON object" not in (copy / "jobHistory.json").read_text()


def test_a_job_from_a_repository_is_not_recorded(tmp_path, llm):
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=repo, check=True)
    (repo / "a.txt").write_text("a\n")
    subprocess.run(["git", "add", "."], cwd=repo, check=True)
    subprocess.run(["git", "commit", "-qm", "a"], cwd=repo, check=True)
    job = create_job(JobsDir(tmp_path / "jobs"), "cloned", "Edit a.txt", from_repo=str(repo))
    with pytest.raises(LogistError, match="created from a repository; only jobs created from files"):
        record_fixture(job, tmp_path / "fixture")
    assert not (tmp_path / "fixture").exists()


# The demo replays the wordcount fixture through a strict replay server ------------------------------------


def test_the_demo_runs_the_bundled_recording_to_approval(jobs):
    lines: list[str] = []
    last = run_demo(jobs, echo=lines.append)
    assert last.status == Status.APPROVAL_REQUIRED
    steps = [line.split()[1:4] for line in lines if line.startswith("  #")]
    assert steps == [["Worker", "COMPLETED", "->"], ["Supervisor", "RETRY", "->"], ["Worker", "COMPLETED", "->"],
                     ["Supervisor", "COMPLETED", "->"]]
    assert "  logist job approve demo" in lines
    job = jobs.job("demo")
    # Under another name and path than the recording: the same answers and states.
    demo, recorded = comparable(job.dir), comparable(load_fixture("wordcount").history())
    assert responses(demo) == responses(recorded)
    assert [e["state_after"] for e in demo] == [e["state_after"] for e in recorded]
    user_action(job, "approve")
    assert job.manifest().status == Status.SUCCESS


def test_the_demo_refuses_to_pretend_when_the_requests_differ(jobs):
    (jobs.path / "context.md").write_text("Answer in French.\n")
    with pytest.raises(LogistError) as failed:
        run_demo(jobs, echo=lambda line: None)
    message = str(failed.value)
    assert message.startswith("the demo job 'demo' ended INTERVENTION_REQUIRED instead of waiting for approval: ")
    assert "replay mismatch at step 2 (Worker call 1 of 2): message 0 (system) differs" in message
    assert "--- System Context ---" in message
    assert jobs.job("demo").manifest().status == Status.INTERVENTION_REQUIRED


def test_recording_never_writes_over_a_folder_that_is_not_a_fixture(jobs, tmp_path):
    job = create_job(jobs, "hello", "Write hello.py")
    other = create_job(jobs, "other", "Something else")
    with pytest.raises(LogistError, match="neither empty nor a fixture folder"):
        record_fixture(job, other.dir)
    assert other.workspace.is_dir() and (other.dir / "jobHistory.json").is_file()


@pytest.mark.wire
def test_a_fixture_replays_the_same_requests_whatever_the_jobs_directory_sets(tmp_path, llm, replay_llm):
    """What shaped the recorded requests besides the job (the window, so the
    max_tokens and when to compact, and the structured_output form) comes
    with the recording: a jobs directory that says otherwise replays it byte
    for byte, live and through poststep."""
    mine, elsewhere, another = (JobsDir(tmp_path / name) for name in ("mine", "elsewhere", "another"))
    for jobs, window, form in ((mine, 4096, "json_object"), (elsewhere, 16384, "json_schema"),
                               (another, 2048, "off")):
        jobs.path.mkdir(parents=True)
        (jobs.path / "config.json").write_text(json.dumps(
            {"model_settings": {"gpt-4o-mini": {"context_window": window, "structured_output": form}}}))
    job = create_job(mine, "notes", "Write notes.txt")
    llm.add(
        json.dumps({"action": "COMPLETED", "evidence_files": ["notes.txt"], "summary_for_supervisor": "Wrote it.",
                    "file_changes": [{"path": "notes.txt", "content": "a note\n"}]}),
        json.dumps({"action": "COMPLETED", "evidence_files": ["notes.txt"], "summary_for_supervisor": "Fine."}),
    )
    run_job(job, base_url=llm.base_url)
    assert job.manifest().status == Status.APPROVAL_REQUIRED
    recorded_requests = list(llm.requests)
    assert {r["max_tokens"] for r in recorded_requests} == {1024}  # a quarter of config.json's 4,096
    assert {r["response_format"]["type"] for r in recorded_requests} == {"json_object"}
    record_fixture(job, tmp_path / "fixtures" / "notes")
    fixture = load_fixture(tmp_path / "fixtures" / "notes")
    metadata = [e.request.metadata for e in fixture.history().interactions if e.kind == "llm_call"]
    assert {(m.context_window, m.context_window_from, m.structured_output) for m in metadata} == {
        (4096, "config.json model_settings", "json_object")}

    live = create_from_fixture(elsewhere, fixture)
    server = replay_llm(fixture.path)
    replay_history(live, fixture.history(), base_url=server.base_url)
    assert server.mismatches == [] and server.remaining == 0

    def canonical(requests: list[dict], workspace: Path) -> list[dict]:
        return [json.loads(json.dumps(r).replace(str(workspace), "<workspace>")) for r in requests]

    assert canonical(server.requests, live.workspace) == canonical(recorded_requests, job.workspace)
    posted = create_from_fixture(another, fixture)
    replay_history(posted, fixture.history())
    expected = comparable(fixture.history())
    assert comparable(live.dir) == expected
    assert comparable(posted.dir, replayed=True) == expected
    assert live.manifest().status == posted.manifest().status == Status.APPROVAL_REQUIRED


@pytest.mark.wire
def test_a_replay_mismatch_says_which_setting_differs_and_where_it_came_from(tmp_path, llm, replay_llm):
    jobs = JobsDir(tmp_path / "mine")
    jobs.path.mkdir(parents=True)
    (jobs.path / "config.json").write_text(json.dumps({"model_settings": {"gpt-4o-mini": {"context_window": 4096}}}))
    job = create_job(jobs, "notes", "Write notes.txt")
    llm.add(json.dumps({"action": "STUCK", "reason": "nothing to do"}))
    run_job(job, base_url=llm.base_url)
    record_fixture(job, tmp_path / "fixture")
    # A job that does not replay the recording (a plain run) against the strict server.
    other = create_from_fixture(JobsDir(tmp_path / "elsewhere"), tmp_path / "fixture", "other")
    server = replay_llm(tmp_path / "fixture")
    run_job(other, base_url=server.base_url)
    assert server.mismatches, "the request differs: the recording's window made its max_tokens"
    assert "max_tokens is 2048, the recording used 1024" in server.mismatches[0]
    assert "a context window of 4,096 tokens from config.json model_settings" in server.mismatches[0]
