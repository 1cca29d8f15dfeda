"""``job restep`` and ``job rerun``: going back to an earlier step, or to the
baseline, through the library and through the real ``logist`` command."""

from __future__ import annotations

import json
import subprocess

import pytest

from logist.store.session import JobFiles
from logist import Status
from logist.engine.create import create_job
from logist.engine.loop import run_job
from logist.engine.step import step_once
from logist.errors import LogistError
from logist.engine.rewind import rewind
from logist.replay.scripted import answer

from conftest import via, logist_cli, logist_process

#: Fields of a manifest that a rewind is expected to change (SPEC/Totals).
REWIND_VOLATILE = {"last_sequence", "updated_at", "totals"}




STEP1 = answer("MESSAGE", message="step one: writing a.txt and b.txt", file_changes=[
    {"path": "a.txt", "content": "alpha 1\n"}, {"path": "b.txt", "content": "bravo 1\n"},
])
STEP2 = answer("MESSAGE", message="step two: editing a.txt, adding docs", file_changes=[
    {"path": "a.txt", "old": "alpha 1", "new": "alpha 2"}, {"path": "docs/notes.md", "content": "# notes 2\n"},
])
#: Step 3 adds files (one by a file change, one by a command), edits one,
#: deletes one; its answer and the command's output carry unique markers.
STEP3 = answer("CMD", command="touch made-by-step3-cmd.txt", file_changes=[
    {"path": "a.txt", "old": "alpha 2", "new": "alpha 3 ZULU-MARKER-STEP3"},
    {"path": "b.txt", "delete": True},
    {"path": "new/dir/c.txt", "content": "charlie 3\n"},
])
STEP3_MARKER = "ZULU-MARKER-STEP3"


def git(workspace, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=workspace, capture_output=True, text=True, check=True).stdout


def ls_tree(workspace, rev: str) -> str:
    return git(workspace, "ls-tree", "-r", rev)


def all_files(workspace) -> set[str]:
    return {p.relative_to(workspace).as_posix() for p in workspace.rglob("*") if p.is_file() and ".git" not in p.relative_to(workspace).parts}


def make_job(jobs, job_id="rw", **kwargs):
    return create_job(jobs, job_id, "Write a.txt and friends", allowed_commands=["touch *"], **kwargs)


def three_steps(jobs, llm, job_id="rw"):
    job = make_job(jobs, job_id)
    llm.add(STEP1, STEP2, STEP3)
    for _ in range(3):
        result = step_once(job, **via(llm))
        assert result.status == Status.RUNNING, result
    assert (job.workspace / "made-by-step3-cmd.txt").exists()
    assert (job.workspace / "new" / "dir" / "c.txt").exists()
    entries = JobFiles(job.dir).load_history().interactions
    assert [e.kind for e in entries] == ["user_action", "llm_call", "llm_call", "llm_call"]
    return job, entries


def after_entry(job, entry) -> dict:
    """The manifest as ``entry`` left it: the job's definition with the entry's state."""
    return job.manifest().with_state(entry.state).dump()


def without(manifest: dict, keys=REWIND_VOLATILE) -> dict:
    return {k: v for k, v in manifest.items() if k not in keys}


def history_sums(job) -> dict:
    calls = [e for e in JobFiles(job.dir).load_history().interactions if e.kind == "llm_call"]
    return {
        "llm_calls": len(calls),
        "prompt_tokens": sum(e.usage.prompt_tokens or 0 for e in calls),
        "completion_tokens": sum(e.usage.completion_tokens or 0 for e in calls),
    }


def assert_at_entry(job, entry):
    """The workspace and the manifest are exactly as right after ``entry``."""
    assert ls_tree(job.workspace, "HEAD") == ls_tree(job.workspace, entry.workspace_commit)
    assert git(job.workspace, "rev-parse", "HEAD^{tree}") == git(job.workspace, "rev-parse", f"{entry.workspace_commit}^{{tree}}")
    assert git(job.workspace, "status", "--porcelain", "--untracked-files=all", "--ignored") == "", "the working tree is clean"
    on_disk = json.loads(job.manifest_path.read_text())
    assert without(on_disk) == without(after_entry(job, entry))


def assert_no_step3(messages: list[dict]):
    for message in messages:
        assert STEP3_MARKER not in message["content"]
        assert STEP3 not in message["content"]
        assert "made-by-step3-cmd" not in message["content"], "neither step 3's command nor its output"


# 1. restep ---------------------------------------------------------------------


def test_restep_returns_to_the_step_before(jobs, llm):
    job, entries = three_steps(jobs, llm)
    step2, step3 = entries[2], entries[3]
    before_bytes = job.history_path.read_text()
    totals_before = job.manifest().totals.model_dump()
    assert totals_before["llm_calls"] == 3

    restored = rewind(job)

    assert_at_entry(job, step2)
    files = all_files(job.workspace)
    assert "made-by-step3-cmd.txt" not in files and "new/dir/c.txt" not in files
    assert not (job.workspace / "new").exists(), "directories step 3 created are gone too"
    assert (job.workspace / "a.txt").read_text() == "alpha 2\n"
    assert (job.workspace / "b.txt").read_text() == "bravo 1\n", "the file step 3 deleted is back"
    assert files == {"a.txt", "b.txt", "docs/notes.md"}

    manifest = job.manifest()
    assert restored.model_dump() == manifest.model_dump()
    assert manifest.calls == 2 and manifest.status == Status.RUNNING
    assert manifest.workspace_commit == step2.workspace_commit
    # Totals are not rewound: the third call was paid for.
    assert manifest.totals.model_dump() == totals_before
    assert {k: manifest.totals.model_dump()[k] for k in history_sums(job)} == history_sums(job)

    # The history keeps everything and records the rewind.
    after = JobFiles(job.dir).load_history().interactions
    assert [e.dump() for e in after[:4]] == [e.dump() for e in entries]
    assert len(after) == 5 and after[4].kind == "rewind" and after[4].sequence == 5
    assert manifest.last_sequence == 5
    assert after_entry(job, after[4]) == json.loads(job.manifest_path.read_text())
    assert job.history_path.read_text().startswith(before_bytes[: -len("\n  ]\n}\n")]), "the history was appended to, not rewritten"

    # The abandoned commit stays reachable.
    assert git(job.workspace, "rev-parse", "refs/logist/rewound/5").strip() == step3.workspace_commit
    assert "made-by-step3-cmd.txt" in git(job.workspace, "ls-tree", "-r", "--name-only", "refs/logist/rewound/5")

    # The next live step sees the state after step 2, not step 3's exchange.
    llm.add(answer("MESSAGE", message="step three again"))
    result = step_once(job, endpoints=llm.endpoints)
    assert result.sequence == 6 and result.status == Status.RUNNING
    assert len(llm.requests) == 4
    resent = llm.requests[3]["messages"]
    assert_no_step3(resent)
    assert any(STEP2 == m["content"] for m in resent), "step 2's answer is still in the conversation"
    assert resent == llm.requests[2]["messages"], "the same request as the original third step"
    assert resent[-1]["content"].endswith("[Step 3 of 100]")
    assert job.manifest().totals.llm_calls == 4


def test_restep_through_the_cli(jobs, llm):
    job, entries = three_steps(jobs, llm)
    result = logist_cli("job", "restep", "rw")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    assert "rewound" in result.stderr and "RUNNING" in result.stderr
    assert entries[2].workspace_commit[:12] in result.stderr
    assert_at_entry(job, entries[2])
    history = json.loads(logist_cli("job", "history", "rw", "--json").stdout)
    assert [e["kind"] for e in history] == ["user_action", "llm_call", "llm_call", "llm_call", "rewind"]
    table = logist_cli("job", "history", "rw").stdout.splitlines()
    assert "rewind" in table[-1]
    status = json.loads(logist_cli("job", "status", "rw", "--json").stdout)
    assert status["calls"] == 2 and status["totals"]["llm_calls"] == 3


def test_restep_to_an_earlier_entry(jobs, llm):
    job, entries = three_steps(jobs, llm)
    result = logist_cli("job", "restep", "rw", "--entry", "2")
    assert result.returncode == 0, result.stderr
    assert_at_entry(job, entries[1])
    assert job.manifest().calls == 1
    assert set(all_files(job.workspace)) == {"a.txt", "b.txt"}
    assert (job.workspace / "a.txt").read_text() == "alpha 1\n"
    # Both later steps' commits: the tip is kept, and step 2's commit is its ancestor.
    kept = git(job.workspace, "rev-parse", "refs/logist/rewound/5").strip()
    assert kept == entries[3].workspace_commit
    subprocess.run(["git", "merge-base", "--is-ancestor", entries[2].workspace_commit, kept], cwd=job.workspace, check=True)

    llm.add(answer("MESSAGE", message="second step again"))
    step_once(job, endpoints=llm.endpoints)
    resent = llm.requests[-1]["messages"]
    assert resent == llm.requests[1]["messages"], "the same request as the original second step"
    assert_no_step3(resent)
    assert all(STEP2 != m["content"] for m in resent)


def test_restep_to_the_creation_entry_is_the_baseline(jobs, llm):
    job, entries = three_steps(jobs, llm)
    rewind(job, to=1)
    assert_at_entry(job, entries[0])
    assert git(job.workspace, "rev-parse", "HEAD").strip() == job.manifest().baseline_commit
    assert job.manifest().status == Status.PENDING and job.manifest().calls == 0


def test_restep_to_unknown_or_rewind_entry_is_refused(jobs, llm):
    job, _ = three_steps(jobs, llm)
    bad = logist_cli("job", "restep", "rw", "--entry", "42")
    assert bad.returncode == 2
    assert bad.stderr.startswith("Error:") and len(bad.stderr.strip().splitlines()) == 1
    assert "42" in bad.stderr and "Traceback" not in bad.stderr
    rewind(job)
    with pytest.raises(LogistError, match="rewind"):
        rewind(job, to=5)


def test_restep_twice_in_a_row(jobs, llm):
    job, entries = three_steps(jobs, llm)
    rewind(job)
    assert_at_entry(job, entries[2])
    second = logist_cli("job", "restep", "rw")
    assert second.returncode == 0, second.stderr
    assert_at_entry(job, entries[1])
    assert job.manifest().calls == 1
    after = JobFiles(job.dir).load_history().interactions
    assert [e.kind for e in after] == ["user_action", "llm_call", "llm_call", "llm_call", "rewind", "rewind"]
    assert git(job.workspace, "rev-parse", "refs/logist/rewound/5").strip() == entries[3].workspace_commit
    assert git(job.workspace, "rev-parse", "refs/logist/rewound/6").strip() == entries[2].workspace_commit
    assert job.manifest().totals.llm_calls == 3

    llm.add(answer("MESSAGE", message="second step again"))
    step_once(job, endpoints=llm.endpoints)
    assert llm.requests[-1]["messages"] == llm.requests[1]["messages"]


def test_restep_after_a_new_step_goes_back_along_the_new_line(jobs, llm):
    """Rewind, take a new third step, restep: back to step 2 (the step before
    the new one), not to the abandoned third step."""
    job, entries = three_steps(jobs, llm)
    rewind(job)
    llm.add(answer("MESSAGE", message="a different third step", file_changes=[{"path": "other.txt", "content": "x\n"}]))
    step_once(job, endpoints=llm.endpoints)
    assert job.manifest().calls == 3

    rewind(job)

    assert_at_entry(job, entries[2])
    assert not (job.workspace / "made-by-step3-cmd.txt").exists()
    assert not (job.workspace / "other.txt").exists()
    assert job.manifest().calls == 2
    llm.add(answer("MESSAGE", message="third step, third time"))
    step_once(job, endpoints=llm.endpoints)
    assert_no_step3(llm.requests[-1]["messages"])
    assert llm.requests[-1]["messages"] == llm.requests[2]["messages"]


def test_restep_from_a_waiting_state(jobs, llm):
    """A Worker that finished and a Supervisor that approved: restep undoes the
    review and the job is the Supervisor's to step again."""
    job = make_job(jobs)
    llm.add(
        answer("COMPLETED", summary="wrote a.txt", file_changes=[{"path": "a.txt", "content": "a\n"}]),
        answer("COMPLETED", summary="looks right"),
    )
    run_job(job, endpoints=llm.endpoints)
    assert job.manifest().status == Status.APPROVAL_REQUIRED
    entries = JobFiles(job.dir).load_history().interactions
    rewind(job)
    assert_at_entry(job, entries[1])
    manifest = job.manifest()
    assert manifest.status == Status.REVIEWING and manifest.turn.role == "Supervisor"
    llm.add(answer("COMPLETED", summary="still right"))
    assert step_once(job, endpoints=llm.endpoints).status == Status.APPROVAL_REQUIRED
    assert llm.requests[-1]["messages"] == llm.requests[1]["messages"]


# 2. rerun, and restep with nothing to go back to ----------------------------------


def test_rerun_returns_to_the_baseline(jobs, llm):
    job, entries = three_steps(jobs, llm)
    baseline = job.manifest().baseline_commit
    result = logist_cli("job", "rerun", "rw")
    assert result.returncode == 0, result.stderr
    assert "baseline" in result.stderr and "PENDING" in result.stderr

    manifest = job.manifest()
    assert git(job.workspace, "rev-parse", "HEAD").strip() == baseline
    assert manifest.workspace_commit == baseline
    assert ls_tree(job.workspace, "HEAD") == ""
    assert all_files(job.workspace) == set()
    assert git(job.workspace, "status", "--porcelain", "--untracked-files=all") == ""
    assert manifest.status == Status.PENDING
    assert manifest.turn.role == "Worker" and manifest.turn.rounds == 0 and manifest.turn.pending is None
    assert manifest.turn.last_call is None and manifest.turn.prompt_call is None
    assert manifest.calls == 0
    assert manifest.totals.llm_calls == 3
    assert without(manifest.dump()) == without(after_entry(job, entries[0]))
    after = JobFiles(job.dir).load_history().interactions
    assert len(after) == 5 and after[-1].kind == "rewind"
    assert git(job.workspace, "rev-parse", "refs/logist/rewound/5").strip() == entries[3].workspace_commit

    llm.add(answer("MESSAGE", message="first step again"))
    step_once(job, endpoints=llm.endpoints)
    assert llm.requests[-1]["messages"] == llm.requests[0]["messages"]
    assert llm.requests[-1]["messages"][-1]["content"].endswith("[Step 1 of 100]")


def _one_error_line(result):
    assert result.returncode == 1, (result.returncode, result.stderr)
    assert result.stdout == ""
    assert "Traceback" not in result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error:"), result.stderr
    return lines[0]


@pytest.mark.parametrize("calls", [0, 1])
def test_restep_with_no_earlier_step_is_a_clear_error(jobs, llm, calls):
    job = make_job(jobs)
    llm.add(STEP1)
    for _ in range(calls):
        step_once(job, endpoints=llm.endpoints)
    history_before = job.history_path.read_bytes()
    manifest_before = job.manifest_path.read_bytes()
    head_before = git(job.workspace, "rev-parse", "HEAD")

    line = _one_error_line(logist_cli("job", "restep", "rw"))
    assert "rw" in line and "earlier step" in line

    assert job.history_path.read_bytes() == history_before, "a refused restep records nothing"
    assert job.manifest_path.read_bytes() == manifest_before
    assert git(job.workspace, "rev-parse", "HEAD") == head_before
    assert git(job.workspace, "for-each-ref", "refs/logist/") == ""


def test_restep_after_rerun_is_a_clear_error(jobs, llm):
    job, _ = three_steps(jobs, llm)
    rewind(job, baseline=True)
    _one_error_line(logist_cli("job", "restep", "rw"))


# 3. Hand edits survive a restep -------------------------------------------------------


def test_hand_edits_before_restep_are_kept(jobs, llm):
    job, entries = three_steps(jobs, llm)
    (job.workspace / "a.txt").write_text("edited by a person\n")
    (job.workspace / "hand-notes.md").write_text("my notes, never committed\n")
    (job.workspace / "docs" / "notes.md").unlink()

    result = logist_cli("job", "restep", "rw")
    assert result.returncode == 0, result.stderr

    assert_at_entry(job, entries[2])
    kept = git(job.workspace, "rev-parse", "refs/logist/rewound/5").strip()
    assert git(job.workspace, "show", f"{kept}:hand-notes.md") == "my notes, never committed\n"
    assert git(job.workspace, "show", f"{kept}:a.txt") == "edited by a person\n"
    assert "docs/notes.md" not in git(job.workspace, "ls-tree", "-r", "--name-only", kept)
    # The model's third step is kept too, under the hand edits.
    subprocess.run(["git", "merge-base", "--is-ancestor", entries[3].workspace_commit, kept], cwd=job.workspace, check=True)
    assert "made-by-step3-cmd.txt" in git(job.workspace, "ls-tree", "-r", "--name-only", kept)


# A restep killed while it records ---------------------------------------------------------


@pytest.mark.wire
@pytest.mark.parametrize("point", ["before_history_append", "after_history", "after_manifest"])
def test_restep_killed_while_recording_is_finished_by_the_next_command(jobs, llm, point):
    job, entries = three_steps(jobs, llm)
    killed = logist_process("job", "restep", "rw", env={"LOGIST_FAILPOINT": point})
    assert killed.returncode == -9, killed.stderr

    llm.add(answer("MESSAGE", message="step three again"))
    result = logist_cli("job", "step", "rw", "--oneshot", "--base-url", llm.base_url)  # the next command: here
    assert result.returncode == 0, result.stderr

    kinds = [e.kind for e in JobFiles(job.dir).load_history().interactions]
    if point == "before_history_append":
        # Killed before the rewind was recorded: it is undone as a whole and
        # the job goes on from where it was (after step 3), with a repair note.
        assert "rewind" not in kinds and "repair" in kinds
        assert llm.requests[-1]["messages"][:-1] != llm.requests[2]["messages"][:-1]
        assert (job.workspace / "made-by-step3-cmd.txt").exists()
        assert git(job.workspace, "rev-parse", "refs/logist/rewound/5").strip() == entries[3].workspace_commit
        return
    # The rewind was completed, then the step ran from the state after step 2.
    assert llm.requests[-1]["messages"] == llm.requests[2]["messages"]
    assert kinds[:5] == ["user_action", "llm_call", "llm_call", "llm_call", "rewind"]
    assert kinds[-1] == "llm_call" and kinds.count("rewind") == 1
    assert not (job.workspace / "made-by-step3-cmd.txt").exists()
    assert git(job.workspace, "rev-parse", "refs/logist/rewound/5").strip() == entries[3].workspace_commit
