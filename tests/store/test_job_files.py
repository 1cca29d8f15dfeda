"""A job directory explains itself: its README names every file in it.

The job goes through what leaves files behind: a held command approved by a
person, a question answered, a process killed in the middle of recording a
step (its journals are on disk until the next command), a damaged manifest
moved aside, an HTML report and a rebuilt transcript. After each of those
the folder is listed and every name in it must be one the README names.
"""

from __future__ import annotations

import pytest

import json
import os
import re
import shutil
import subprocess
import sys
from fnmatch import fnmatchcase
from pathlib import Path

from logist.store.session import JOB_FILES, JobFiles, README_NAME, describe
from logist.engine.create import create_job
from logist.engine.decide import user_action
from logist.engine.step import step_once
from logist.replay.scripted import Reply
from logist.store.atomic import move_aside

from conftest import REPO_ROOT, logist_cli, logist_process


def readme_names(job_dir: Path) -> list[str]:
    """The names the README's tables list (first column)."""
    text = (job_dir / README_NAME).read_text(encoding="utf-8")
    return re.findall(r"^\| `([^`]+)` \|", text, flags=re.M)


def unexplained(job_dir: Path) -> list[str]:
    """Names in the job directory that no row of its README matches."""
    names = readme_names(job_dir)
    return sorted(
        entry for entry in os.listdir(job_dir)
        if not any(fnmatchcase(entry, name.rstrip("/")) for name in names)
    )


def answer(action: str, **fields) -> str:
    return json.dumps({"action": action, **fields})


def test_the_readme_names_every_file_a_job_leaves(jobs, llm):
    job = create_job(jobs, "files", "Print the date and ask whether UTC is right", command_policy="ask")
    assert readme_names(job.dir) == [f.name for f in JOB_FILES]
    assert unexplained(job.dir) == []
    seen = set(os.listdir(job.dir))

    llm.add(Reply(content=answer("CMD", command="date -u")), Reply(content=answer("ASK", question="Is UTC right?")))
    step_once(job, endpoints=llm.endpoints)  # the command is held for a person
    user_action(job, "approve-command")
    step_once(job, endpoints=llm.endpoints)
    user_action(job, "answer", "Yes.")
    seen |= set(os.listdir(job.dir))
    assert unexplained(job.dir) == []

    # Killed while recording a step: its journals stay until the next command.
    killed = logist_process("job", "poststep", "files", "--response-string", answer("MESSAGE", message="killed"),
                        env={"LOGIST_FAILPOINT": "before_history_append"})
    assert killed.returncode == -9, killed.stderr
    assert {"step_journal.json", "jobHistory.json.append"} <= set(os.listdir(job.dir))
    seen |= set(os.listdir(job.dir))
    assert unexplained(job.dir) == []

    # A damaged manifest is moved aside and rebuilt by the next command.
    job.manifest_path.write_text("{ not json")
    repaired = logist_cli("job", "poststep", "files", "--response-string", answer("MESSAGE", message="after"))
    assert repaired.returncode == 0, repaired.stderr
    assert [n for n in os.listdir(job.dir) if n.startswith("job_manifest.json.corrupt-")]

    for args in (["job", "report", "files"], ["job", "transcript", "files", "--rebuild"]):
        result = logist_cli(*args)
        assert result.returncode == 0, result.stderr
    seen |= set(os.listdir(job.dir))
    assert unexplained(job.dir) == []
    assert {"report.html", "transcript.md", ".lock", ".views.lock", "workspace"} <= seen
    # Each file the README says is always there was there all along.
    assert {f.name.rstrip("/") for f in JOB_FILES if f.always} <= set(os.listdir(job.dir))


def test_names_only_rare_events_leave_are_described(tmp_path):
    """The files an upgrade or a repair leaves, made by the code that makes them."""
    old = tmp_path / "old"
    old.mkdir()
    for name in ("jobHistory.json", "job_manifest.json"):
        shutil.copy(REPO_ROOT / "tests" / "data" / "v1-calc" / name, old / name)
    assert JobFiles(old).session.upgrade()
    assert sorted(os.listdir(old)) == [
        "README.md", "jobHistory.json", "jobHistory.json.v1", "job_manifest.json", "job_manifest.json.v1"]
    aside = move_aside(old / "jobHistory.json", "2026-11-23T100405Z")
    for name in os.listdir(old):
        assert describe(name) is not None, name
    assert describe(aside.name).name == "*.corrupt-*"
    # atomic_write's temporary name (a dot, the file's name, a random part, .tmp)
    assert describe(".job_manifest.json.k2j3h4x_.tmp").name == ".*.tmp"
    assert describe("notes.txt") is None and describe("workspace").name == "workspace/"


def test_the_readme_is_outside_the_workspace_and_the_prompt(jobs, llm):
    job = create_job(jobs, "apart", "Say hi")
    readme = (job.dir / README_NAME).read_text(encoding="utf-8")
    assert readme.startswith("# Logist job `apart`\n\n> Say hi\n")
    llm.add(Reply(content=answer("MESSAGE", message="hi")))
    step_once(job, endpoints=llm.endpoints)
    assert not (job.workspace / README_NAME).exists()
    tracked = subprocess.run(["git", "ls-files"], cwd=job.workspace, capture_output=True, text=True, check=True)
    assert README_NAME not in tracked.stdout.split()
    (call,) = [e for e in JobFiles(job.dir).load_history().interactions if e.request is not None]
    assert not any("Logist job `apart`" in m.content or README_NAME in m.content for m in call.request.prompt)


def test_the_readme_commands_work_from_the_job_folder(jobs):
    job = create_job(jobs, "here", "Say hi")
    text = (job.dir / README_NAME).read_text(encoding="utf-8")
    command = re.search(r"`logist (--jobs-dir \.\. job status here)`", text).group(1).split()
    result = subprocess.run([sys.executable, "-m", "logist", *command, "--json"], cwd=job.dir,
                            capture_output=True, text=True, env={**os.environ, "LOGIST_JOBS_DIR": "/nonexistent"})
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)["status"] == "PENDING"


def test_temp_files_of_a_killed_write_are_removed_by_the_next_command(jobs, llm):
    """A write killed between its temp file and the rename leaves
    ``.<name>.<random>.tmp`` (logist.store.atomic); the next command that
    takes the job's lock removes those of the files written under it, and
    transcript.md's under the views' lock; the report's (written by a jobs
    index report without that lock, perhaps right now) and anything else
    are left alone."""
    from logist.replay.scripted import answer

    job = create_job(jobs, "temps", "Write hello.py that prints a greeting")
    left = [".step_journal.json.k1w2x3y4.tmp", ".job_manifest.json.a9b8c7d6.tmp", ".jobHistory.json.q1q2q3q4.tmp",
            ".jobHistory.json.append.r5r6r7r8.tmp", ".transcript.md.z1z2z3z4.tmp"]  # the last under .views.lock
    kept = [".report.html.y1y2y3y4.tmp", ".notes.txt.tmp", "my.job_manifest.json.tmp"]
    for name in left + kept:
        (job.dir / name).write_text('{"half": ')
    looked = logist_cli("job", "status", "temps")  # a command that only looks takes no lock: nothing removed
    assert looked.returncode == 0 and all((job.dir / name).exists() for name in left)
    llm.add(answer("MESSAGE", message="hi"))
    step_once(job, endpoints=llm.endpoints)
    assert not [name for name in left if (job.dir / name).exists()]
    assert all((job.dir / name).exists() for name in kept)
    assert [e.kind for e in JobFiles(job.dir).load_history().interactions] == ["user_action", "llm_call"], "nothing to record"
