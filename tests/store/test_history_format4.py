"""History format 4: every call entry seed-shaped and self-contained, and
formats 1, 2 and 3 upgraded to it without loss. Real jobs, real git, the
replay of recorded fixtures."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
from pathlib import Path

import pytest

from logist.store.session import JobFiles
from logist.replay.apply import replay_history
from logist.replay.fixtures import create_from_fixture, load_fixture
from logist.store.entries import SEED_FIELDS
from logist.store.history import HISTORY_FORMAT
from logist.store.requests import HistoryReader
from logist.store.upgrade import UPGRADES

from conftest import logist_cli

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "tests" / "data"
RECORDED = [ROOT / "fixtures" / "calc", ROOT / "fixtures" / "wordcount", DATA / "v1-calc", DATA / "v2-calc",
            DATA / "v3-calc"]


#: State fields added after the digests were recorded (the Planner's reasoning
#: and thought; whether checks are due, and their last run), left out when they
#: hold their default.
ADDED_SINCE = {"plan_reasoning": None, "planner_thought": None, "checks_due": False, "last_check": None}


def _as_recorded(state) -> dict:
    dumped = state.model_dump(mode="json")
    return {k: v for k, v in dumped.items() if not (k in ADDED_SINCE and v == ADDED_SINCE[k])}


def assert_seed_shaped(entry: dict) -> None:
    """A call entry as the file holds it carries every field of seed 003, even when empty."""
    where = f"entry {entry['sequence']}"
    for name in SEED_FIELDS["entry"]:
        assert name in entry, f"{where}: {name}"
    assert entry["workspace_path"] == "workspace", where
    for part, fields in (("request", SEED_FIELDS["request"]), ("response", SEED_FIELDS["response"])):
        for name in fields:
            assert name in entry[part], f"{where}: {part}.{name}"
    meta = entry["request"]["metadata"]
    assert isinstance(meta, dict), f"{where}: the metadata itself, not a pointer"
    for name in SEED_FIELDS["metadata"]:
        assert name in meta, f"{where}: request.metadata.{name}"
    assert meta["role"] and meta["phase"] and meta["model"], where
    assert entry["response"]["status"] in ("SUCCESS", "INVALID", "FAILED", "UNKNOWN"), where
    assert isinstance(entry["request"]["files_context"], list), where
    assert ("prompt" in entry["request"]) != ("continues" in entry["request"]), where


@pytest.mark.parametrize("recorded", RECORDED, ids=lambda p: p.name)
def test_every_call_entry_of_every_fixture_replayed_today_is_seed_shaped(jobs, recorded):
    fixture = load_fixture(recorded)
    job = create_from_fixture(jobs, fixture, "walk")
    replay_history(job, fixture.history())
    kinds = {}
    for entry in JobFiles(job.dir).written():
        kinds[entry["kind"]] = kinds.get(entry["kind"], 0) + 1
        if "request" in entry:
            assert_seed_shaped(entry)
        else:
            assert "workspace_path" not in entry, "only a call entry says where its workspace is"
    assert kinds.get("replay") and kinds.get("user_action"), kinds
    assert JobFiles(job.dir).history_format() == HISTORY_FORMAT


def test_a_new_jobs_llm_calls_are_seed_shaped(jobs, llm):
    from logist.engine.create import create_job
    from logist.engine.step import step_once
    from logist.replay.scripted import answer

    job = create_job(jobs, "fresh", "Look around", command_policy="allow", allowed_commands=["ls *"])
    llm.add(answer("CMD", command="ls -la ."), answer("MESSAGE", message="seen"), "not json at all")
    for _ in range(3):
        step_once(job, endpoints=llm.endpoints)
    calls = [e for e in JobFiles(job.dir).written() if e["kind"] == "llm_call"]
    assert len(calls) == 3 and "continues" in calls[1]["request"]
    for entry in calls:
        assert_seed_shaped(entry)
    assert [e["response"]["status"] for e in calls] == ["SUCCESS", "SUCCESS", "INVALID"]
    assert calls[0]["response"]["summary_for_supervisor"] is None and calls[0]["request"]["files_context"] == []


def _digest(body: dict) -> str:
    return hashlib.sha256(json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()).hexdigest()


def _tree(workspace: Path) -> dict:
    listing = subprocess.run(["git", "ls-tree", "-r", "HEAD"], cwd=workspace, capture_output=True, text=True, check=True)
    return {line.split("\t")[1]: line.split()[2] for line in listing.stdout.splitlines()}


def test_upgrades_are_one_function_per_version():
    assert len(UPGRADES) == HISTORY_FORMAT - 1


@pytest.mark.parametrize("version", [2, 3])
def test_an_older_history_upgrades_keeps_the_old_file_and_rebuilds_every_request_byte_for_byte(jobs, version):
    """tests/data/v<N>-calc: the calc fixture as format N wrote it; v<N>-calc-replayed.json: the SHA-256
    of every request body and every entry's state the format N code read from it, and what replaying it gave."""
    source = DATA / f"v{version}-calc"
    expected = json.loads((DATA / f"v{version}-calc-replayed.json").read_text())
    job = create_from_fixture(jobs, source, "old")
    for name in ("job_manifest.json", "jobHistory.json"):
        shutil.copy(source / name, job.dir / name)
    old = (job.dir / "jobHistory.json").read_bytes()
    assert JobFiles(job.dir).history_format() == version
    env = {"LOGIST_JOBS_DIR": str(jobs.path)}
    looked = logist_cli("job", "status", "old", "--json", env=env)
    assert looked.returncode == 0, looked.stderr
    assert (job.dir / "jobHistory.json").read_bytes() == old, "looking does not rewrite"

    done = logist_cli("job", "upgrade", "old", env=env)
    assert done.returncode == 0, done.stderr
    assert f"from format {version} to format {HISTORY_FORMAT}" in done.stderr
    assert (job.dir / f"jobHistory.json.v{version}").read_bytes() == old, "the old file is kept beside it"
    assert JobFiles(job.dir).history_format() == HISTORY_FORMAT
    json.loads((job.dir / "jobHistory.json").read_bytes())  # one JSON document
    entries = {e["sequence"]: e for e in JobFiles(job.dir).written()}
    bodies = {str(n): _digest(JobFiles(job.dir).recorded_body(e, HistoryReader(JobFiles(job.dir)).messages(n)))
              for n, e in entries.items() if "request" in e}
    assert bodies == expected["request_bodies_sha256"]
    states = {str(e.sequence): hashlib.sha256(json.dumps(_as_recorded(e.state), sort_keys=True).encode())
              .hexdigest() for e in JobFiles(job.dir).load_history().interactions}
    assert states == expected["states_sha256"], "every entry's state after it reads as the old code read it"
    for entry in entries.values():
        if "request" in entry:
            assert_seed_shaped(entry)


@pytest.mark.parametrize("version", [1, 2, 3])
def test_an_older_history_replays_to_the_same_statuses_and_workspace(jobs, version):
    source = DATA / f"v{version}-calc"
    expected = json.loads((DATA / f"v{version}-calc-replayed.json").read_text())
    fixture = load_fixture(source)
    job = create_from_fixture(jobs, fixture, "again")
    statuses = []
    replay_history(job, fixture.history(), on_entry=lambda entry, result: statuses.append(str(result.status)))
    assert statuses == expected["statuses"]
    assert str(job.manifest().status) == expected["final_status"]
    assert _tree(job.workspace) == expected["tree"]
    assert JobFiles(job.dir).load_history().format == HISTORY_FORMAT
