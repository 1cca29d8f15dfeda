"""Format 1 jobs (no ``format`` field) upgrade to format 2 without loss.

``tests/data/v1-calc`` is the calc fixture as Logist recorded it in format
1. ``tests/data/v1-calc-replayed.json`` holds what replaying that recording
gave before format 2 existed (the statuses after each replayed entry and
the workspace tree, blob by blob), made with the format 1 code.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from logist.store.session import JobFiles
from logist.replay.apply import replay_history
from logist.replay.fixtures import create_from_fixture, load_fixture
from logist.store.entries import HistoryEntry
from logist.store.history import HISTORY_FORMAT
from logist.store.requests import messages_of
from logist.store.upgrade import upgrade_history_data

from conftest import logist_cli

DATA = Path(__file__).resolve().parents[1] / "data"
V1 = DATA / "v1-calc"


def _v1_history() -> dict:
    return json.loads((V1 / "jobHistory.json").read_text(encoding="utf-8"))


def _tree(workspace: Path) -> dict:
    listing = subprocess.run(["git", "ls-tree", "-r", "HEAD"], cwd=workspace, capture_output=True, text=True, check=True)
    return {line.split("\t")[1]: line.split()[2] for line in listing.stdout.splitlines()}


def test_the_v1_history_upgrades_losslessly_in_memory():
    v1 = _v1_history()
    assert "format" not in v1
    v2 = upgrade_history_data(v1)
    assert v2["format"] == HISTORY_FORMAT and v2["job_id"] == v1["job_id"]
    entries = {e["sequence"]: e for e in v2["interactions"]}
    old = {e["sequence"]: e for e in v1["interactions"]}
    assert list(entries) == list(old)
    continued = 0
    for number, entry in entries.items():
        before = old[number]
        state = HistoryEntry.model_validate(entry).state
        assert "manifest_after" not in entry and state.status == before["manifest_after"]["status"]
        assert (entry["state_before"], entry["state_after"]) == (before["state_before"], before["state_after"])
        assert state.last_sequence == before["manifest_after"]["last_sequence"]
        assert state.calls == before["manifest_after"]["steps"]
        if before.get("request"):
            # Every request is rebuilt exactly as it was recorded in full.
            assert messages_of(entries, number) == before["request"]["prompt"], number
            continued += "continues" in entry["request"]
    assert continued >= 3, "later rounds of a turn are stored as what they added"
    assert entries[1]["definition"]["objective"] == old[1]["manifest_after"]["objective"]
    assert len(json.dumps(v2)) < len(json.dumps(v1)) / 2


def test_a_v1_job_directory_is_upgraded_by_job_upgrade_and_keeps_the_old_files(jobs):
    job = create_from_fixture(jobs, V1, "calc1")
    for name in ("job_manifest.json", "jobHistory.json"):
        shutil.copy(V1 / name, job.dir / name)
    (job.dir / "README.md").unlink()  # format 1 jobs had none
    v1_bytes = (job.dir / "jobHistory.json").read_bytes()
    assert JobFiles(job.dir).history_format() == 1

    # Read-only commands work on the old format as it is.
    status = logist_cli("job", "status", "calc1", "--json", env={"LOGIST_JOBS_DIR": str(jobs.path)})
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["status"] == "SUCCESS"
    assert (job.dir / "jobHistory.json").read_bytes() == v1_bytes, "looking does not rewrite"

    done = logist_cli("job", "upgrade", "calc1", env={"LOGIST_JOBS_DIR": str(jobs.path)})
    assert done.returncode == 0, done.stderr
    assert "from format 1" in done.stderr and done.stdout == "", "what was done is chatter: stderr"
    assert JobFiles(job.dir).history_format() == HISTORY_FORMAT
    assert (job.dir / "jobHistory.json.v1").read_bytes() == v1_bytes
    assert "job_manifest.json.v1" in (job.dir / "README.md").read_text() or "*.v1" in (job.dir / "README.md").read_text()
    manifest = json.loads((job.dir / "job_manifest.json").read_text())
    assert (manifest["format"], manifest["status"], manifest["calls"]) == (2, "SUCCESS", 6)
    assert "messages" not in manifest["turn"]
    again = logist_cli("job", "upgrade", "calc1", env={"LOGIST_JOBS_DIR": str(jobs.path)})
    assert f"already in format {HISTORY_FORMAT}" in again.stderr

    # Every recorded request comes back exactly, now from the format 3 file.
    for entry in _v1_history()["interactions"]:
        if entry.get("request"):
            shown = logist_cli("job", "history", "calc1", "--entry", str(entry["sequence"]), "--json",
                               env={"LOGIST_JOBS_DIR": str(jobs.path)})
            assert shown.returncode == 0, shown.stderr
            assert json.loads(shown.stdout)["request_body"]["messages"] == entry["request"]["prompt"]


def test_the_upgraded_v1_history_replays_to_the_same_statuses_and_workspace(jobs):
    expected = json.loads((DATA / "v1-calc-replayed.json").read_text())
    fixture = load_fixture(V1)
    job = create_from_fixture(jobs, fixture, "calc2")
    statuses = []
    replay_history(job, fixture.history(), on_entry=lambda entry, result: statuses.append(str(result.status)))
    assert statuses == expected["statuses"]
    assert str(job.manifest().status) == expected["final_status"]
    assert _tree(job.workspace) == expected["tree"]
    kinds = {e.kind for e in JobFiles(job.dir).load_history().interactions}
    assert "replay" in kinds and "llm_call" not in kinds, "replayed answers are recorded as such"
    assert job.manifest().totals.llm_calls == 0 and job.manifest().totals.replayed == 6


def test_fields_a_newer_version_added_are_kept_not_refused(jobs):
    from logist.engine.create import create_job
    from logist.engine.step import post_answer

    job = create_job(jobs, "newer", "Do it")
    data = json.loads(job.manifest_path.read_text())
    data["settings"]["a_newer_setting"] = 1
    data["a_newer_field"] = {"a": 1}
    data["turn"]["a_newer_turn_field"] = True
    job.manifest_path.write_text(json.dumps(data))
    history = json.loads(job.history_path.read_text())
    history["interactions"][0]["a_newer_entry_field"] = "kept"
    job.history_path.write_text(json.dumps(history))  # not canonical any more: rewritten on the next append

    post_answer(job, json.dumps({"action": "MESSAGE", "message": "hi"}))
    after = json.loads(job.manifest_path.read_text())
    assert after["settings"]["a_newer_setting"] == 1 and after["a_newer_field"] == {"a": 1}
    assert after["turn"]["a_newer_turn_field"] is True
    entries = json.loads(job.history_path.read_text())["interactions"]
    assert entries[0]["a_newer_entry_field"] == "kept" and len(entries) == 2
    assert entries[1]["state"]["turn"]["a_newer_turn_field"] is True


def test_a_job_from_a_newer_logist_is_shown_but_not_changed(jobs):
    from logist.engine.create import create_job
    from logist.engine.step import post_answer
    from logist.errors import LogistError

    job = create_job(jobs, "future", "Do it")
    history = job.history_path.read_text().replace(f'"format": {HISTORY_FORMAT},', f'"format": {HISTORY_FORMAT + 1},', 1)
    job.history_path.write_text(history)
    status = logist_cli("job", "status", "future", "--json", env={"LOGIST_JOBS_DIR": str(jobs.path)})
    assert status.returncode == 0, status.stderr
    assert json.loads(status.stdout)["status"] == "PENDING"
    before = job.history_path.read_bytes()
    try:
        post_answer(job, json.dumps({"action": "MESSAGE", "message": "hi"}))
    except LogistError as exc:
        assert f"written by a newer Logist (format {HISTORY_FORMAT + 1})" in str(exc)
    else:
        raise AssertionError("a newer format was changed")
    assert job.history_path.read_bytes() == before
    done = logist_cli("job", "step", "future", "--oneshot", env={"LOGIST_JOBS_DIR": str(jobs.path)})
    assert done.returncode != 0 and "newer Logist" in done.stderr and "Traceback" not in done.stderr
