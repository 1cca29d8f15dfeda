"""Paths in job files are relative to the job's folder: a jobs directory
can be moved, copied or mounted anywhere (another host's path) and its jobs
step, replay and rewind there. Files written when the history's header named
the absolute workspace path are upgraded without losing where commands ran."""

from __future__ import annotations

import pytest

import json
import shutil

from logist.store.session import JobFiles
from logist import Status
from logist.engine.create import create_job
from logist.engine.loop import run_job
from logist.engine.step import step_once
from logist.store.jobsdir import JobsDir
from logist.engine.rewind import rewind
from logist.replay.apply import replay_history
from logist.replay.scripted import answer
from logist.store.history import HISTORY_FORMAT, TAIL, layout

from conftest import logist_cli

SPEC = dict(allowed_commands=["pwd"])


def test_a_copied_jobs_dir_steps_replays_and_rewinds_where_it_now_is(tmp_path, llm, replay_llm):
    first = create_job(JobsDir(tmp_path / "host-a" / "jobs"), "where", "Say where you are", **SPEC)
    made_in = str(first.workspace)
    llm.add(answer("CMD", command="pwd"))
    step_once(first, endpoints=llm.endpoints)
    shutil.copytree(tmp_path / "host-a", tmp_path / "host-b" / "mnt", symlinks=True)
    shutil.move(str(tmp_path / "host-a"), str(tmp_path / "gone"))  # nothing may still point there

    job = JobsDir(tmp_path / "host-b" / "mnt" / "jobs").job("where")
    for path in (job.manifest_path, job.history_path):
        text = path.read_text()
        # The only place the old path is named: the recorded command, where it ran and what it printed.
        assert str(tmp_path / "host-a") not in text.replace(json.dumps(made_in)[1:-1], ""), path.name
    llm.add(answer("CMD", command="pwd"), answer("COMPLETED", "I was copied."), answer("COMPLETED", "ok"))
    assert run_job(job, endpoints=llm.endpoints)[-1].status == Status.APPROVAL_REQUIRED
    recorded = JobFiles(job.dir).load_history()
    ran = [e.command for e in recorded.interactions if e.command is not None]
    assert [c.cwd for c in ran] == [made_in, str(job.workspace)]
    assert str(job.workspace) in ran[1].output

    # Rewound there: back to the end of the second command's step.
    second = [e.sequence for e in recorded.interactions if e.command is not None][1]
    assert rewind(job, to=second).status == Status.RUNNING

    # Replayed live into a job in a third place: both recorded paths are recognised.
    there = create_job(JobsDir(tmp_path / "host-c"), "copy", "Say where you are", **SPEC)
    server = replay_llm(recorded)
    server.workspace = str(there.workspace)
    replay_history(there, recorded, base_url=server.base_url)
    assert server.mismatches == [] and server.remaining == 0
    assert there.manifest().status == Status.APPROVAL_REQUIRED


def test_job_upgrade_moves_an_old_headers_path_into_the_commands(jobs, llm):
    job = create_job(jobs, "old", "Say where you are", **SPEC)
    llm.add(answer("CMD", command="pwd"), answer("CMD", command="pwd"))
    step_once(job, endpoints=llm.endpoints)
    step_once(job, endpoints=llm.endpoints)
    # As an earlier Logist wrote it: the header names the workspace, commands do not say where they ran.
    old = "/srv/elsewhere/jobs/old/workspace"
    entries = [e.dump() for e in JobFiles(job.dir).load_history().interactions]
    for entry in entries:
        (entry.get("command") or {}).pop("cwd", None)
        entry.pop("workspace_path", None)
    entries[2]["workspace_path"] = "/srv/moved/jobs/old/workspace"  # an entry made after a move named its own
    head = ('{\n  "$schema": "job-history.v3.schema.json",\n  "format": 3,\n  "job_id": "old",\n'
            f'  "workspace_path": {json.dumps(old)},\n  "interactions": [').encode()
    JobFiles(job.dir).history_path.write_bytes(head + b",".join(layout(e) for e in entries) + TAIL)
    assert JobFiles(job.dir).recorded_workspace() == old

    status = logist_cli("job", "status", "old", "--json")  # looking does not rewrite
    assert status.returncode == 0 and JobFiles(job.dir).recorded_workspace() == old
    done = logist_cli("job", "upgrade", "old")
    assert done.returncode == 0, done.stderr
    assert f"from format 3 to format {HISTORY_FORMAT}" in done.stderr
    assert JobFiles(job.dir).recorded_workspace() is None
    upgraded = JobFiles(job.dir).load_history()
    assert upgraded.workspace_path is None
    assert {e.workspace_path for e in upgraded.interactions if e.request is not None} == {"workspace"}
    assert [e.command.cwd for e in upgraded.interactions if e.command] == [old, "/srv/moved/jobs/old/workspace"]
    again = logist_cli("job", "upgrade", "old")
    assert f"already in format {HISTORY_FORMAT}" in again.stderr
    shown = logist_cli("job", "history", "old", "--entry", "3", "--json")
    assert shown.returncode == 0, shown.stderr
