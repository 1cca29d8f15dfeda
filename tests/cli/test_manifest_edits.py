"""A hand-edited ``job_manifest.json``: a field of a
wrong type or value is named with its value, shown around by the commands
that look and refused by the next command that changes the job, never
rebuilt from the history on its own (that would drop the person's other
edits); a manifest that is not JSON at all (what a crash or a disk leaves)
is rebuilt from the history, and the output says so. The real ``logist``
program in this process (``logist_cli``), the scripted server."""

from __future__ import annotations

import json

from conftest import logist_cli
from logist.store.session import JobFiles
from logist.engine.create import create_job
from logist.replay.scripted import answer


def _edit(job_dir, **fields) -> bytes:
    """Edit the manifest as a person would: parse, change, write back."""
    path = job_dir / "job_manifest.json"
    data = json.loads(path.read_text())
    for name, value in fields.items():
        where = data
        *parents, last = name.split(".")
        for parent in parents:
            where = where[parent]
        where[last] = value
    path.write_text(json.dumps(data, indent=2))
    return path.read_bytes()


def test_an_invalid_field_is_named_shown_around_and_refused_never_rebuilt(jobs, llm):
    create_job(jobs, "j", "Say hi")
    job_dir = jobs.path / "j"
    # Two edits: one valid (a lower step budget), one not (a status that does not exist).
    edited = _edit(job_dir, **{"settings.max_steps": 7, "status": "DONE"})
    entries_before = (job_dir / "jobHistory.json").read_bytes()

    status = logist_cli("job", "status", "j")
    assert status.returncode == 0, status.stderr
    assert "PENDING" in status.stdout  # what the history says, shown
    warnings = status.stderr.strip().splitlines()
    assert len(warnings) == 1, status.stderr
    assert 'field status is "DONE"' in warnings[0] and "'PENDING'" in warnings[0]  # the field, its value, the allowed ones
    listed = logist_cli("job", "list")
    assert listed.returncode == 0 and "j" in listed.stdout
    assert len(listed.stderr.strip().splitlines()) == 1 and 'field status is "DONE"' in listed.stderr

    llm.add(answer("MESSAGE", message="hi"))
    step = logist_cli("job", "step", "j", "--base-url", llm.base_url)
    assert step.returncode == 1, step.stderr
    lines = step.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("Error: "), step.stderr
    assert 'field status is "DONE"' in lines[0] and "'SUCCESS'" in lines[0]
    assert "fix status in job_manifest.json" in lines[0] and "logist job fsck j --rebuild-manifest" in lines[0]
    assert llm.requests == []
    # Nothing was rebuilt, moved or recorded.
    assert (job_dir / "job_manifest.json").read_bytes() == edited
    assert (job_dir / "jobHistory.json").read_bytes() == entries_before
    assert not list(job_dir.glob("job_manifest.json.corrupt-*"))

    # The person fixes the one field: their other edit is kept and the job goes on.
    _edit(job_dir, status="PENDING")
    step = logist_cli("job", "step", "j", "--oneshot", "--base-url", llm.base_url)
    assert step.returncode == 0, step.stderr
    assert len(llm.requests) == 1 and "of 7]" in llm.requests[0]["messages"][-1]["content"]
    assert json.loads((job_dir / "job_manifest.json").read_text())["settings"]["max_steps"] == 7


def test_a_wrong_type_is_named_and_rebuilt_only_when_asked(jobs):
    create_job(jobs, "j", "Say hi")
    job_dir = jobs.path / "j"
    edited = _edit(job_dir, **{"settings.max_steps": "ten"})
    fsck = logist_cli("job", "fsck", "j")
    assert fsck.returncode == 1
    assert 'field settings.max_steps is "ten": Input should be a valid integer' in fsck.stdout
    assert (job_dir / "job_manifest.json").read_bytes() == edited

    rebuilt = logist_cli("job", "fsck", "j", "--rebuild-manifest")
    assert rebuilt.returncode == 0, rebuilt.stdout + rebuilt.stderr
    assert "invalid field (settings.max_steps); rebuilt on request from history entry 1" in rebuilt.stdout
    aside = list(job_dir.glob("job_manifest.json.corrupt-*"))
    assert len(aside) == 1 and aside[0].read_bytes() == edited
    assert json.loads((job_dir / "job_manifest.json").read_text())["settings"]["max_steps"] == 100
    assert [e.kind for e in JobFiles(job_dir).entries()] == ["user_action", "repair"]


def test_a_manifest_that_is_not_json_is_rebuilt_and_the_output_says_so(jobs, llm):
    create_job(jobs, "j", "Say hi")
    job_dir = jobs.path / "j"
    (job_dir / "job_manifest.json").write_text('{"job_id": "j", "objec')  # cut short
    status = logist_cli("job", "status", "j")
    assert status.returncode == 0 and "PENDING" in status.stdout
    assert len(status.stderr.strip().splitlines()) == 1
    assert "is corrupt" in status.stderr and "the next command that changes the job rebuilds" in status.stderr

    llm.add(answer("MESSAGE", message="hi"))
    step = logist_cli("job", "step", "j", "--oneshot", "--base-url", llm.base_url)
    assert step.returncode == 0, step.stderr
    assert "repaired job j: job_manifest.json could not be read as a manifest" in step.stderr
    assert "rebuilt from history entry 1" in step.stderr
    assert len(list(job_dir.glob("job_manifest.json.corrupt-*"))) == 1
    assert len(llm.requests) == 1
