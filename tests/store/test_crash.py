"""Crash safety with real processes: a ``logist job step`` child is killed with
SIGKILL at every failpoint (and from outside while it waits for the LLM), and
the job must stay readable, keep every entry written before, and either agree
(manifest, history, workspace HEAD) or be repaired by the next command, which
records a ``repair`` entry. Right after each kill both files parse with a
plain ``json.load`` and ``job status`` (which takes no lock) shows the state
recovery will arrive at. Then the job must run on to APPROVAL_REQUIRED.

Damaged files without a journal (a torn history, a garbage manifest) are moved
aside, kept, reported in the history and repaired.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from logist.store.session import JobFiles
from logist.engine.call import entry_key
from logist import HistoryEntry, JobManifest
from logist.engine.create import create_job
from logist.engine.step import step_once
from logist.store.jobsdir import JobsDir
from logist.failpoints import POINTS
from logist.replay.scripted import Reply
from logist.replay.scripted import answer

from conftest import via, logist_forked as logist_process
from forked import ForkedPopen

pytestmark = pytest.mark.slow




#: The step before the crash: a progress note that writes a file (entry 2).
FIRST = answer("MESSAGE", message="Planning the greeting.", file_changes=[{"path": "plan.md", "content": "# Plan\nprint Hello\n"}])
#: The answer of the step that is killed: it writes files, so a crash after
#: applying leaves a dirty workspace. ``draft.txt`` is written only here.
CRASHED = answer(
    "COMPLETED", "Wrote hello.py and a draft.", ["hello.py"],
    file_changes=[
        {"path": "hello.py", "content": "print('Hello')\n"},
        {"path": "draft.txt", "content": "first draft\n"},
        {"path": "plan.md", "delete": True},
    ],
)
#: The Worker's answer when the crashed one was dropped and the step is redone.
REDONE = answer("COMPLETED", "Wrote hello.py.", ["hello.py"], file_changes=[{"path": "hello.py", "content": "print('Hello')\n"}])
REVIEW_OK = answer("COMPLETED", "hello.py prints Hello; criterion met.", ["hello.py"])

KILL_WHILE_WAITING = "kill_while_waiting"

#: Per crash point: ``saved``: the answer had arrived and was journalled but
#: the step was not recorded, so the next command applies the saved answer
#: (no new call); ``kept``: the crashed step's answer ends up recorded (from
#: the history itself, or applied from the journal); ``recovery``: must the
#: next command record a ``repair`` entry (True / False / None = either is
#: acceptable, the files already agree). A kill while waiting for the answer
#: leaves a call of unknown outcome, recorded as such; the call is made again.
EXPECTED = {
    # Killed before the request was sent: to the next command, a call of unknown outcome like any other.
    "after_calling": dict(saved=False, kept=False, recovery=False),
    "after_call": dict(saved=True, kept=True, recovery=False),
    "after_apply": dict(saved=True, kept=True, recovery=False),
    "after_commit": dict(saved=True, kept=True, recovery=False),
    "before_history_append": dict(saved=True, kept=True, recovery=False),
    "after_history": dict(saved=False, kept=True, recovery=True),
    "after_manifest": dict(saved=False, kept=True, recovery=None),
    "mid_transcript": dict(saved=False, kept=True, recovery=False),  # the views are written after the step is recorded
    KILL_WHILE_WAITING: dict(saved=False, kept=False, recovery=False),
}
assert set(POINTS) <= set(EXPECTED), "a new failpoint needs an expectation here"


# -- helpers ---------------------------------------------------------------


def git(workspace: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=workspace, capture_output=True, text=True, check=True).stdout


def head(workspace: Path) -> str:
    return git(workspace, "rev-parse", "HEAD").strip()


def tree(workspace: Path, rev: str = "HEAD") -> set[str]:
    return set(git(workspace, "ls-tree", "-r", "--name-only", rev).split())


def read_json(path: Path):
    return json.loads(path.read_text(encoding="utf-8"))


def entries_raw(job) -> list[dict]:
    """History entries straight from the file with ``json.loads``."""
    return read_json(job.history_path)["interactions"]


def disagreements(job, entries: list[dict]) -> list[str]:
    """What keeps manifest, history and workspace from agreeing (empty = agree)."""
    manifest = read_json(job.manifest_path)
    problems = []
    last_seq = entries[-1]["sequence"] if entries else 0
    if manifest["last_sequence"] != last_seq:
        problems.append(f"manifest.last_sequence {manifest['last_sequence']} != last history entry {last_seq}")
    actual = head(job.workspace)
    if manifest["workspace_commit"] != actual:
        problems.append(f"manifest.workspace_commit {manifest['workspace_commit']} != HEAD {actual}")
    dirty = git(job.workspace, "status", "--porcelain")
    if dirty:
        problems.append(f"workspace not clean: {dirty!r}")
    return problems


def assert_consistent(job) -> list[dict]:
    """Files parse with json.loads, agree, no journal left; returns the entries."""
    read_json(job.manifest_path)
    entries = entries_raw(job)
    assert disagreements(job, entries) == []
    assert [e["sequence"] for e in entries] == list(range(1, len(entries) + 1))
    leftovers = sorted(p.name for p in job.dir.iterdir() if p.name in ("step_journal.json", "jobHistory.json.append"))
    assert leftovers == []
    return entries


def child_env(**extra: str) -> dict:
    env = dict(os.environ)
    env.update(extra)
    return env


def step_child(llm, **env: str) -> subprocess.Popen:
    return ForkedPopen(
        [sys.executable, "-m", "logist", "job", "step", "--oneshot", "hello", "--base-url", llm.base_url],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(**env),
    )


def make_job(jobs: JobsDir):
    return create_job(
        jobs, "hello", "Write hello.py that prints a greeting",
        details="Use plain Python.", acceptance=["python hello.py prints Hello"],
    )


def ok(result: subprocess.CompletedProcess, code: int = 0) -> subprocess.CompletedProcess:
    """``result`` exited ``code`` (3: the job it ran waits for a person) without a traceback."""
    assert result.returncode == code, f"rc={result.returncode}\nstdout={result.stdout}\nstderr={result.stderr}"
    assert "Traceback" not in result.stderr
    return result


# -- killed mid-step -------------------------------------------------------


def key_of(headers: dict) -> str | None:
    return next((v for k, v in headers.items() if k.lower() == "idempotency-key"), None)


@pytest.mark.wire
@pytest.mark.parametrize("point", [*POINTS, KILL_WHILE_WAITING])
def test_killed_step_is_recoverable(jobs, llm, point):
    expect = EXPECTED[point]
    job = make_job(jobs)
    llm.add(FIRST)
    step_once(job, base_url=llm.base_url)  # entry 2: an earlier entry that must survive
    before = entries_raw(job)
    assert [e["sequence"] for e in before] == [1, 2]
    head_before = head(job.workspace)
    assert read_json(job.manifest_path)["workspace_commit"] == head_before

    # -- the crash ---------------------------------------------------------
    if point == KILL_WHILE_WAITING:
        llm.add(Reply(content=CRASHED, delay=30))
        child = step_child(llm)
        deadline = time.monotonic() + 20
        while len(llm.requests) < 2:
            assert child.poll() is None, f"the child ended before calling the LLM: {child.communicate()}"
            assert time.monotonic() < deadline, "the child never called the LLM"
            time.sleep(0.02)
        os.kill(child.pid, signal.SIGKILL)
    else:
        if point != "after_calling":  # that one dies before asking for it
            llm.add(CRASHED)
        child = step_child(llm, LOGIST_FAILPOINT=point)
    out, err = child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL, f"rc={child.returncode}\nstdout={out}\nstderr={err}"
    sent = point != "after_calling"  # killed after the journal said "calling", before the request left
    assert len(llm.requests) == (2 if sent else 1), "the killed child made exactly one call (or none yet)"
    crashed_key = key_of(llm.headers[1]) if sent else json.loads((job.dir / "step_journal.json").read_text())["key"]
    assert crashed_key and crashed_key.startswith("hello@") and ":3:" in crashed_key

    # -- right after the crash: readable, nothing earlier lost ---------------
    read_json(job.manifest_path)
    entries_now = entries_raw(job)  # a plain json.load of the file, at every failpoint
    assert entries_now[: len(before)] == before
    if point == "before_history_append":
        assert (job.dir / "jobHistory.json.append").exists()
    # A command that only looks shows the recovered state, never a stale one;
    # a call the journal holds and the history does not is shown as waiting.
    status = json.loads(ok(logist_process("job", "status", "hello", "--json")).stdout)
    recorded = expect["kept"] and not expect["saved"]
    assert (status["status"], status["last_sequence"]) == (("REVIEWING", 3) if recorded else ("RUNNING", 2)), point
    journal_left = (job.dir / "step_journal.json").exists()
    if not recorded:
        assert journal_left
        assert status["unrecorded_call"] == {
            "step": 3, "answered": expect["saved"], "idempotency_key": crashed_key}, point
    problems = disagreements(job, entries_now)
    if point == "after_apply":
        assert any("not clean" in p for p in problems), "after_apply must leave the workspace dirty"
        assert (job.workspace / "draft.txt").exists()
    if point == "after_commit":
        assert head(job.workspace) != head_before and "draft.txt" in tree(job.workspace)
    crash_commit = head(job.workspace)
    if expect["recovery"] is False and not journal_left:
        assert problems == []
    if problems and not journal_left:
        assert expect["recovery"], f"{point}: {problems} but no recovery is expected"

    # -- the next command records the crashed call once, then steps -----------
    if expect["kept"]:
        llm.add(REVIEW_OK)  # the crashed Worker step was finished: the Supervisor is next
    else:
        llm.add(REDONE, REVIEW_OK)  # the call's outcome is unknown: the Worker makes it again
    # A kept step leaves the Supervisor's review, which ends waiting for approval (exit 3).
    ok(logist_process("job", "step", "--oneshot", "hello", "--base-url", llm.base_url), code=3 if expect["kept"] else 0)
    entries = assert_consistent(job)
    assert entries[: len(before)] == before, "an entry written before the crash was lost or changed"
    rest = entries[len(before):]
    crashed = rest.pop(0)
    assert crashed["kind"] == "llm_call" and crashed["sequence"] == 3
    assert entry_key(job, job.manifest(), crashed["sequence"]) == crashed_key
    if expect["kept"]:
        assert crashed["response"]["raw_response"] == CRASHED and crashed["response"].get("status", "SUCCESS") == "SUCCESS"
        assert crashed["usage"]["prompt_tokens"] > 0 and crashed["usage"]["completion_tokens"] > 0
        assert {"hello.py", "draft.txt"} <= tree(job.workspace, crashed["workspace_commit"])
        assert "plan.md" not in tree(job.workspace, crashed["workspace_commit"])
        if expect["saved"]:
            assert "the saved answer was applied" in crashed["note"]
        else:
            assert crashed["workspace_commit"] == crash_commit != head_before
        assert len(llm.requests) == 3, "the crashed step's call was made once, never again"
    else:
        # The call of unknown outcome: counted, shown, nothing applied; the
        # call made again is the same request, sent with the same key.
        assert crashed["response"]["status"] == "UNKNOWN" and crashed["response"]["raw_response"] is None
        assert "in flight" in crashed["note"] and "usage" not in crashed
        assert crashed["workspace_commit"] == head_before and crashed["state_after"] == "RUNNING"
        redone = rest[0]
        assert redone["response"]["raw_response"] == REDONE
        again = 2 if sent else 1  # the request made again (the first to reach the server, when none had)
        if sent:
            assert llm.requests[2] == llm.requests[1], "the same request is made again"
        assert key_of(llm.headers[again]) == crashed_key == entry_key(job, job.manifest(), redone["sequence"])
    recoveries = [e for e in rest if e["kind"] == "repair"]
    if expect["recovery"] is not None:
        assert len(recoveries) == (1 if expect["recovery"] else 0), recoveries
    if problems and not journal_left:
        assert recoveries, f"{point}: the next command repaired {problems} without recording it"
    if recoveries:
        (recovery,) = recoveries
        assert rest[0] is recovery, "recovery is recorded before the next call"
        assert recovery["note"]
        m = HistoryEntry.model_validate(recovery).state.model_dump(mode="json")
        assert m["last_sequence"] == recovery["sequence"]
        assert m["workspace_commit"] == recovery["workspace_commit"] == crash_commit
    assert [e["kind"] for e in rest if e["kind"] != "repair"] == ["llm_call"]

    # -- the job runs on to APPROVAL_REQUIRED ---------------------------------
    if not expect["kept"]:
        ok(logist_process("job", "run", "hello", "--base-url", llm.base_url), code=3)
    entries = assert_consistent(job)
    manifest = read_json(job.manifest_path)
    assert manifest["status"] == "APPROVAL_REQUIRED"
    assert llm.remaining == 0
    assert entries[: len(before)] == before
    calls = [e for e in entries if e["kind"] == "llm_call"]
    assert [e["kind"] for e in entries if e["kind"] != "repair"] == ["user_action"] + ["llm_call"] * len(calls)
    # Every request the server saw is recorded exactly once, and counted once.
    # (A call killed before its request left is recorded, of unknown outcome, like one in flight.)
    assert len(calls) == len(llm.requests) + (0 if sent else 1) == manifest["totals"]["llm_calls"] == \
        (3 if expect["kept"] else 4)
    assert manifest["totals"]["unknown_calls"] == (0 if expect["kept"] else 1)
    assert manifest["calls"] == 3, "a call of unknown outcome does not use up a step"
    assert manifest["totals"]["prompt_tokens"] == sum(e["usage"]["prompt_tokens"] for e in calls if "usage" in e)
    assert (job.workspace / "hello.py").read_text() == "print('Hello')\n"
    assert ("draft.txt" in tree(job.workspace)) == expect["kept"]
    assert (job.workspace / "draft.txt").exists() == expect["kept"], "a dropped answer's files must be gone"
    assert (job.workspace / "plan.md").exists() != expect["kept"]


class PowerLoss(BaseException):
    """Raised at a failpoint: the process stops there (no handler of Logist's catches it)."""


def test_a_power_loss_inside_a_steps_append_is_cut_back_to_where_its_journal_says(jobs, llm, monkeypatch):
    """A step's append journal is not fsynced (its step journal, fsynced,
    says where the append starts): a power loss inside the append can leave
    half an entry and no append journal. The next command cuts the history
    back to the step journal's ``history_offset`` (no file moved aside) and
    records the saved answer, without calling again."""
    job = make_job(jobs)
    llm.add(FIRST)
    step_once(job, **via(llm))
    before = entries_raw(job)
    intact = job.history_path.read_bytes()
    llm.add(CRASHED)

    def stop(name: str) -> None:
        if name == "before_history_append":
            raise PowerLoss(name)

    monkeypatch.setattr("logist.store.history.failpoint", stop)
    with pytest.raises(PowerLoss):
        step_once(job, **via(llm))
    monkeypatch.undo()
    journal = read_json(job.journal_path)
    assert journal["phase"] == "applying" and journal["history_offset"] == len(intact) - len(b"\n  ]\n}\n")
    # What the disk may hold after the power loss: the append journal (never fsynced) gone, half an entry.
    (job.dir / "jobHistory.json.append").unlink()
    with open(job.history_path, "r+b") as handle:
        handle.seek(journal["history_offset"])
        handle.write(b',\n    {\n      "sequence": 3, "kind": "llm_call", "timest')
        handle.truncate()

    llm.add(REVIEW_OK)
    step_once(job, **via(llm))
    assert sorted(job.dir.glob("*.corrupt-*")) == []
    entries = assert_consistent(job)
    assert entries[: len(before)] == before
    recovered, repaired, reviewed = entries[len(before):]
    assert (recovered["kind"], recovered["role"], recovered["sequence"]) == ("llm_call", "Worker", 3)
    assert json.loads(recovered["response"]["raw_response"]) == json.loads(CRASHED)
    assert repaired["kind"] == "repair" and "half-written history entry" in repaired["note"]
    assert (reviewed["kind"], reviewed["role"]) == ("llm_call", "Supervisor")
    assert len(llm.requests) == 3, "the crashed step's saved answer was recorded, not asked for again"


# -- damaged files without a journal ---------------------------------------


def _entry_spans(data: bytes) -> list[tuple[int, int]]:
    """(start, end) byte offsets of each entry in a canonical history file."""
    starts = []
    pos = data.find(b"\n    {")
    while pos >= 0:
        starts.append(pos)
        pos = data.find(b"\n    {", pos + 1)
    ends = [s - 1 for s in starts[1:]] + [len(data) - len(b"\n  ]\n}\n")]
    return list(zip(starts, ends))


def _three_step_job(jobs, llm):
    job = make_job(jobs)
    llm.add(FIRST, REDONE)
    step_once(job, **via(llm))
    step_once(job, **via(llm))
    assert read_json(job.manifest_path)["status"] == "REVIEWING"
    return job


@pytest.mark.wire
@pytest.mark.parametrize("where", ["inside_last_entry", "middle_of_file"])
def test_torn_history_is_moved_aside_and_readable_entries_kept(jobs, llm, where):
    job = _three_step_job(jobs, llm)
    original = job.history_path.read_bytes()
    spans = _entry_spans(original)
    entries_before = entries_raw(job)
    assert len(spans) == len(entries_before) == 3
    if where == "inside_last_entry":
        start, end = spans[-1]
        cut = (start + end) // 2
    else:
        cut = len(original) // 2
    torn = original[:cut]
    kept = sum(1 for _, end in spans if end <= cut)
    assert kept < 3
    job.history_path.write_bytes(torn)  # by hand: no append journal
    with pytest.raises(ValueError):
        json.loads(torn)
    manifest_before = read_json(job.manifest_path)

    head_before = git(job.workspace, "rev-parse", "HEAD").strip()
    # The Worker's turn goes on from a workspace without hello.py: its COMPLETED writes the file it names.
    llm.add(REDONE)
    ok(logist_process("job", "step", "--oneshot", "hello", "--base-url", llm.base_url))

    asides = sorted(job.dir.glob("jobHistory.json.corrupt-*"))
    assert len(asides) == 1, sorted(p.name for p in job.dir.iterdir())
    assert asides[0].read_bytes() == torn, "the damaged file is kept byte for byte"
    entries = assert_consistent(job)
    assert entries[:kept] == entries_before[:kept], "the readable entries are kept"
    recovery = entries[kept]
    assert recovery["kind"] == "repair"
    assert asides[0].name in recovery["note"], "the loss is reported in the history"
    assert f"kept the {kept} entries" in recovery["note"]
    # The manifest's state (the Supervisor's review) refers to entries that are
    # lost, and the next entries would take their numbers: the job goes on
    # from the end of its last whole entry, its state and its workspace, as
    # a restep would; the workspace as it was is kept under a ref.
    last_whole = HistoryEntry.model_validate(entries_before[kept - 1])
    assert manifest_before["status"] == "REVIEWING" != last_whole.state_after
    assert HistoryEntry.model_validate(recovery).state.status == last_whole.state_after
    assert recovery["workspace_commit"] == last_whole.workspace_commit
    assert f"goes on from the end of entry {kept} ({last_whole.state_after})" in recovery["note"]
    lost = git(job.workspace, "for-each-ref", "--format=%(refname) %(objectname)", "refs/logist/lost/").split()
    assert lost[1] == head_before == manifest_before["workspace_commit"] and lost[1] in recovery["note"]
    # The totals still count the lost entries' calls (they were paid for).
    assert HistoryEntry.model_validate(recovery).state.totals.llm_calls == manifest_before["totals"]["llm_calls"] == 2
    assert [e["kind"] for e in entries[kept + 1:]] == ["llm_call"]
    assert entries[-1]["role"] == "Worker" and entries[-1]["sequence"] == kept + 2
    assert read_json(job.manifest_path)["status"] == "REVIEWING"


@pytest.mark.wire
def test_a_salvaged_history_leaves_the_job_steppable_from_its_last_whole_entry(jobs, llm):
    """The Worker's turn had three rounds (entries 2 to 4); entry 3 is torn.
    The turn's calls the manifest names are gone: the next step used to fail
    with "the history has no entry 4" until a ``job rerun``."""
    job = make_job(jobs)
    notes = [answer("MESSAGE", message=f"note {i}", file_changes=[{"path": f"n{i}.txt", "content": f"{i}\n"}])
             for i in range(3)]
    llm.add(*notes)
    for _ in notes:
        step_once(job, base_url=llm.base_url)
    original = job.history_path.read_bytes()
    start, end = _entry_spans(original)[2]
    job.history_path.write_bytes(original[: (start + end) // 2])

    llm.add(answer("MESSAGE", message="going on"))
    ok(logist_process("job", "step", "--oneshot", "hello", "--base-url", llm.base_url))
    entries = assert_consistent(job)
    assert [(e["sequence"], e["kind"]) for e in entries] == [(1, "user_action"), (2, "llm_call"), (3, "repair"),
                                                              (4, "llm_call")]
    # The call was made from entry 2's conversation: its round and the new one.
    assert JobFiles(job.dir).load_history().interactions[-1].state.turn.rounds == 2
    assert sorted(p.name for p in job.workspace.glob("n*.txt")) == ["n0.txt"]
    assert len(llm.requests) == 4


@pytest.mark.wire
def test_garbage_manifest_is_moved_aside_and_rebuilt_from_history(jobs, llm):
    job = make_job(jobs)
    llm.add(FIRST)
    step_once(job, base_url=llm.base_url)
    entries_before = entries_raw(job)
    good = read_json(job.manifest_path)
    read = entries_before  # format 4: every entry as read
    assert JobManifest.model_validate(good).with_state(HistoryEntry.model_validate(read[-1]).state).dump() == good, (
        "the last entry carries the manifest's state")
    garbage = b"\x00\xff{ this is not a manifest ]]"
    job.manifest_path.write_bytes(garbage)

    llm.add(REDONE, REVIEW_OK)
    ok(logist_process("job", "step", "--oneshot", "hello", "--base-url", llm.base_url))

    asides = sorted(job.dir.glob("job_manifest.json.corrupt-*"))
    assert len(asides) == 1, sorted(p.name for p in job.dir.iterdir())
    assert asides[0].read_bytes() == garbage, "the damaged file is kept byte for byte"
    entries = assert_consistent(job)
    assert entries[: len(entries_before)] == entries_before
    recovery, call = entries[len(entries_before):]
    assert recovery["kind"] == "repair" and call["kind"] == "llm_call"
    assert "job_manifest.json" in recovery["note"] and asides[0].name in recovery["note"]
    recovery_read = recovery
    rebuilt = JobManifest.model_validate(good).with_state(HistoryEntry.model_validate(recovery_read).state).dump()
    volatile = ("last_sequence", "updated_at")
    assert {k: v for k, v in rebuilt.items() if k not in volatile} == {k: v for k, v in good.items() if k not in volatile}
    assert rebuilt["last_sequence"] == recovery["sequence"] == 3
    # The rebuilt manifest carried the conversation on: the Worker's next call
    # continues the turn that entry 2 left.
    assert llm.requests[-1]["messages"][2] == {"role": "assistant", "content": FIRST}

    ok(logist_process("job", "run", "hello", "--base-url", llm.base_url), code=3)
    assert_consistent(job)
    assert read_json(job.manifest_path)["status"] == "APPROVAL_REQUIRED"


@pytest.mark.wire
def test_a_git_lock_left_by_a_killed_step_is_cleared_by_recovery(jobs, llm):
    # The step is killed after applying its answer (files changed, not
    # committed) while a git process of its holds the index: the lock file
    # stays (a runner's node lost mid-commit leaves the same). The next
    # command, holding the job's lock, removes it and repairs the step.
    job = make_job(jobs)
    llm.add(FIRST)
    step_once(job, base_url=llm.base_url)
    llm.add(CRASHED)
    child = step_child(llm, LOGIST_FAILPOINT="after_apply")
    child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL
    lock = job.workspace / ".git" / "index.lock"
    lock.write_text("")  # what the killed git process left
    llm.add(REVIEW_OK)  # the saved answer is applied without a call: the Supervisor is next
    repaired = ok(logist_process("job", "step", "--oneshot", "hello", "--base-url", llm.base_url), code=3)
    assert "removed the git lock files a killed git process left: index.lock" in repaired.stderr
    assert not lock.exists()
    assert json.loads(ok(logist_process("job", "status", "hello", "--json")).stdout)["status"] == "APPROVAL_REQUIRED"
    assert (job.workspace / "draft.txt").exists(), "the saved answer was applied again, from a clean index"


def held_command_job(jobs, llm, command: str = "echo ran > ran.txt"):
    job = create_job(jobs, "held", "Hold a command")
    llm.add(answer("CMD", command=command))
    step_once(job, **via(llm))
    assert str(job.manifest().status) == "INPUT_REQUIRED" and job.manifest().pending_command == command
    return job


def test_an_interrupted_approve_command_is_recorded_as_what_it_is(jobs, llm):
    """approve-command killed while its command runs: the repair says a
    person's approved command was interrupted, not an LLM call."""
    job = held_command_job(jobs, llm)
    killed = logist_process("job", "approve-command", "held", env={"LOGIST_FAILPOINT": "command_started"})
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    ok(logist_process("job", "fsck", "held"))
    last = JobFiles(job.dir).load_history().interactions[-1]
    assert last.kind == "repair"
    assert "(the command a person approved (approve-command)) was interrupted before it was recorded" in last.note
    assert "LLM call" not in last.note
    assert str(job.manifest().status) == "INPUT_REQUIRED", "the command is still held for a person"


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="needs the kernel's start times (/proc)")
def test_a_hand_written_journals_process_group_without_a_start_time_is_left_alone(jobs, llm):
    job = held_command_job(jobs, llm)
    bystander = subprocess.Popen(["sleep", "120"], start_new_session=True)
    try:
        (job.dir / "step_journal.json").write_text(json.dumps(
            {"phase": "applying", "sequence": job.manifest().last_sequence + 1, "command_pgid": bystander.pid}))
        ok(logist_process("job", "fsck", "held"))
        assert not (job.dir / "step_journal.json").exists()
        time.sleep(0.2)
        assert bystander.poll() is None, "a process group the journal names without a start time is not killed"
    finally:
        bystander.kill()
        bystander.wait()


@pytest.mark.wire
@pytest.mark.parametrize("replace", ["gitdir", "removed"])
def test_a_saved_answer_is_recorded_and_cancel_works_when_git_is_gone(jobs, llm, replace, tmp_path):
    """The step is killed once its paid answer is saved, and the workspace's
    .git is then removed or replaced by a ``gitdir:`` file: the next command
    records the answer (counted, nothing applied) and cancel works."""
    import shutil

    job = make_job(jobs)
    llm.add(CRASHED)
    child = step_child(llm, LOGIST_FAILPOINT="after_call")
    child.communicate(timeout=60)
    assert child.returncode == -signal.SIGKILL
    git_dir = job.workspace / ".git"
    shutil.move(git_dir, tmp_path / "moved-git")
    if replace == "gitdir":
        git_dir.write_text(f"gitdir: {tmp_path / 'moved-git'}\n")
    canceled = ok(logist_process("job", "cancel", "hello"))
    assert "CANCELED" in canceled.stdout + canceled.stderr
    entries = JobFiles(job.dir).load_history().interactions
    answered = [e for e in entries if e.kind == "llm_call"]
    assert len(answered) == 1 and answered[0].response.raw_response == CRASHED, "the paid answer is recorded"
    assert answered[0].usage is not None and job.manifest().totals.llm_calls == 1
    assert len(llm.requests) == 1, "and never paid again"
    assert entries[-1].user_input.action == "cancel" and str(job.manifest().status) == "CANCELED"
    assert not (job.dir / "step_journal.json").exists()
