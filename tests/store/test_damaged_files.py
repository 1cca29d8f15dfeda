"""A job file that is no JSON Logist could have written: nested thousands
deep (Python's parser runs out of stack on it), or a folder where the file
should be. Each is moved aside and repaired like any corrupt file, by the
next command that changes the job; a command that only looks shows the
job as repair would leave it. Never an internal error."""

from __future__ import annotations

import shutil

import pytest

from logist.store.session import JobFiles
from logist.engine.create import create_job
from logist.engine.step import step_once
from logist.replay.scripted import answer

from conftest import logist_cli

DAMAGE = {
    "nested-array": lambda path: path.write_text("[" * 10_000 + "]" * 10_000),
    "nested-object": lambda path: path.write_text('{"a": ' * 10_000 + "1" + "}" * 10_000),
    "folder": lambda path: (path.unlink(), path.mkdir(), (path / "inside.txt").write_text("kept\n")),
}


@pytest.mark.wire
@pytest.mark.parametrize("damage", sorted(DAMAGE))
@pytest.mark.parametrize("name", ["job_manifest.json", "jobHistory.json"])
def test_a_job_file_nested_too_deep_or_a_folder_is_moved_aside_and_repaired(jobs, llm, name, damage):
    job = create_job(jobs, "hurt", "Write hello.py that prints a greeting")
    llm.add(answer("MESSAGE", message="first", file_changes=[{"path": "a.txt", "content": "a\n"}]),
            answer("MESSAGE", message="after the repair"))
    step_once(job, base_url=llm.base_url)
    path = job.dir / name
    DAMAGE[damage](path)

    shown = logist_cli("job", "status", "hurt")
    assert shown.returncode == 0, shown.stderr
    assert "Status:  RUNNING" in shown.stdout

    done = logist_cli("job", "step", "hurt", "--oneshot", "--base-url", llm.base_url)
    assert done.returncode == 0, done.stderr
    assert "internal error" not in done.stderr and "repaired job hurt" in done.stderr
    (aside,) = job.dir.glob(f"{name}.corrupt-*")
    assert aside.is_dir() if damage == "folder" else aside.read_text().startswith(("[[[[", '{"a": {"a"'))
    assert path.is_file()
    entries = JobFiles(job.dir).load_history().interactions
    repair, call = entries[-2:]
    assert repair.kind == "repair" and aside.name in repair.note
    assert call.response.actions == ["MESSAGE"] and job.manifest().last_sequence == call.sequence
    if name == "jobHistory.json":  # nothing was left to read: the job went on from its baseline
        assert [e.kind for e in entries] == ["repair", "llm_call"] and repair.definition is not None
        assert not (job.workspace / "a.txt").exists()
    else:  # the history rebuilt the manifest: nothing lost
        assert [e.kind for e in entries] == ["user_action", "llm_call", "repair", "llm_call"]
        assert (job.workspace / "a.txt").exists()
    assert logist_cli("job", "history", "hurt").returncode == 0
    shutil.rmtree(aside) if aside.is_dir() else aside.unlink()
